"""The shipped vocabularies: their names, the cache they are fetched into, and where each file is.

The 19 vocabularies llama.cpp ships for its tokenizer tests (`SHIPPED`) come from
llama-cpp-python's pinned source distribution (`python -m harness fetch`), extracted to a cache
folder: ``$GGUF_PARITY_CACHE`` or ``~/.cache/gguf-parity/<version>/`` (`cache_dir`, `models_dir`,
`templates_dir`, `source_path`); `shipped_path(name)` is one of them, or a `SetupError` naming the
fetch command. Any name, path or URL given to a command becomes a file in `harness.models.paths`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..environment_vars import CACHE
from ..errors import SetupError
from .pin import LLAMA_CPP_PYTHON_VERSION  # the pinned release, written once in harness/data/pin.txt

FETCH_COMMAND = "python -m harness fetch"


# The 19 vocabularies llama.cpp ships for its tokenizer tests, by short name.
SHIPPED = (
    "aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm",
    "falcon", "gemma-4", "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt",
    "nomic-bert-moe", "phi-3", "qwen2", "qwen35", "refact", "starcoder",
)


def cache_dir() -> Path:
    named = CACHE.get()
    if named:  # absolute: oracle workers run in another directory
        return named.expanduser().absolute()
    return Path.home() / ".cache" / "gguf-parity" / LLAMA_CPP_PYTHON_VERSION


def models_dir() -> Path:
    return cache_dir() / "models"


def templates_dir() -> Path:
    """llama.cpp's `models/templates/*.jinja` from the sdist (`python -m harness fetch`)."""
    return cache_dir() / "templates"


def source_path(name: str) -> Path:
    """One of llama.cpp's tokenizer sources (`llama-vocab.cpp`, ...), as fetched."""
    return cache_dir() / "src" / name


def vocab_path(name: str) -> Path:
    return models_dir() / f"ggml-vocab-{name}.gguf"


def shipped_path(name: str) -> Path:
    """The cached file of shipped vocabulary `name` (`SetupError` naming the fetch command if absent).

    Name-or-path resolution for the commands is `harness.models.paths.resolve`;
    this is the part `harness.models.synth` needs, kept here so the two do not import each other.
    """
    path = vocab_path(name)
    if not path.is_file():
        raise SetupError(
            f"vocabulary {name!r} is not in the cache ({models_dir()}); run: {FETCH_COMMAND}"
        )
    return path


def short_name(path: str | os.PathLike) -> str:
    """`llama-spm` for `.../ggml-vocab-llama-spm.gguf`; the file stem otherwise."""
    stem = Path(path).name.removesuffix(".gguf")
    return stem.removeprefix("ggml-vocab-")
