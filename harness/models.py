"""Where the shipped vocabularies live, and how a name becomes a path.

The vocabularies come from llama-cpp-python's pinned source distribution
(`python -m harness fetch`), extracted to a cache folder:
``$GGUF_PARITY_CACHE`` or ``~/.cache/gguf-parity/<version>/``.
"""

from __future__ import annotations

import os
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
FETCH_COMMAND = "python -m harness fetch"


def project_root() -> Path:
    """The checkout holding `pyproject.toml`, or the current directory for an installed copy."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


# The 19 vocabularies llama.cpp ships for its tokenizer tests, by short name.
SHIPPED = (
    "aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm",
    "falcon", "gemma-4", "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt",
    "nomic-bert-moe", "phi-3", "qwen2", "qwen35", "refact", "starcoder",
)


class SetupError(RuntimeError):
    """Something the harness needs is missing; the message says how to get it."""


def cache_dir() -> Path:
    env = os.environ.get("GGUF_PARITY_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "gguf-parity" / LLAMA_CPP_PYTHON_VERSION


def models_dir() -> Path:
    return cache_dir() / "models"


def source_path(name: str) -> Path:
    """One of llama.cpp's tokenizer sources (`llama-vocab.cpp`, ...), as fetched."""
    return cache_dir() / "src" / name


def vocab_path(name: str) -> Path:
    return models_dir() / f"ggml-vocab-{name}.gguf"


def resolve(name_or_path: str | os.PathLike) -> Path:
    """A short name (`llama-spm`) or a path to a GGUF file, as an existing path.

    Raises `SetupError` naming the fetch command when a shipped vocabulary is
    not in the cache, and listing the known names when the name is unknown.
    """
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if path.suffix == ".gguf" or os.sep in text or path.exists():
        if not path.is_file():
            raise SetupError(f"no such GGUF file: {path}")
        return path
    if text not in SHIPPED:
        synthetic = _resolve_synthetic(text)
        if synthetic is not None:
            return synthetic
        raise SetupError(
            f"unknown vocabulary {text!r}: give a path to a .gguf file or one of: "
            + ", ".join(SHIPPED) + " (or a synthetic name: `python -m harness synth --list`)"
        )
    path = vocab_path(text)
    if not path.is_file():
        raise SetupError(
            f"vocabulary {text!r} is not in the cache ({models_dir()}); run: {FETCH_COMMAND}"
        )
    return path


def _resolve_synthetic(name: str) -> Path | None:
    """The cached file of a synthetic vocabulary (`rwkv-world`, `pre-qwen2`, ...), if `name` is one.

    Raises `SetupError` naming the build command when it is not built yet.
    """
    from . import synth  # late: synth imports this module

    if name not in synth.RECIPES:
        return None
    path = synth.synthetic_path(name)
    if not path.is_file():
        raise SetupError(
            f"synthetic vocabulary {name!r} is not built ({path}); run: "
            f"{synth.SYNTH_COMMAND} {name}  (it needs the shipped vocabularies: {FETCH_COMMAND})"
        )
    return path


def short_name(path: str | os.PathLike) -> str:
    """`llama-spm` for `.../ggml-vocab-llama-spm.gguf`; the file stem otherwise."""
    stem = Path(path).name.removesuffix(".gguf")
    return stem.removeprefix("ggml-vocab-")
