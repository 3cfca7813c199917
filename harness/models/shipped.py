"""The shipped vocabularies' names and their cache; the checkout's own places.

A name becomes a path in `harness.models.paths`; this module only knows where things are:
the cache (`cache_dir`, `models_dir`, `templates_dir`), the harness's venvs (`venvs_dir`),
the checkout (`project_root`) and a Python child's environment (`child_env`).
The vocabularies come from llama-cpp-python's pinned source distribution
(`python -m harness fetch`), extracted to a cache folder:
``$GGUF_PARITY_CACHE`` or ``~/.cache/gguf-parity/<version>/``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import SetupError

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
FETCH_COMMAND = "python -m harness fetch"


GIB = 1 << 30
DEFAULT_MEMORY = 4 * GIB       # or half the machine's memory, whichever is smaller
MIN_MEMORY = 256 << 20         # below this a child cannot even import llama.cpp
_CHILD_MEMORY: list[int | None] = [None]  # set_child_memory


def child_env() -> dict[str, str]:
    """The environment of a Python child: this checkout importable whatever the current directory.

    An installed copy is importable as it is: then nothing is added (`project_root()` would be the
    current directory, perhaps a model folder, whose modules must not come before the libraries)."""
    here = Path(__file__).resolve().parents[2]
    checkout = str(here) if (here / "pyproject.toml").is_file() else None
    path = os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path)


def physical_memory() -> int | None:
    """Bytes of RAM on this machine, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def default_memory() -> int:
    """4 GiB, or half the RAM on a smaller machine (never below MIN_MEMORY)."""
    ram = physical_memory()
    return DEFAULT_MEMORY if ram is None else max(MIN_MEMORY, min(DEFAULT_MEMORY, ram // 2))


def set_child_memory(limit: int | None) -> None:
    """The address-space cap of every child this process starts (`--memory-limit`; None: the default)."""
    _CHILD_MEMORY[0] = limit


def child_memory() -> int:
    """Bytes of address space for a child: a llama.cpp worker, a reference child, a `llama.cpp@VERSION`
    child, the converter. `--memory-limit` when the command has it, else `default_memory()`."""
    return _CHILD_MEMORY[0] or default_memory()


def project_root() -> Path:
    """The checkout holding `pyproject.toml`, or the current directory for an installed copy."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


# The 19 vocabularies llama.cpp ships for its tokenizer tests, by short name.
SHIPPED = (
    "aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm",
    "falcon", "gemma-4", "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt",
    "nomic-bert-moe", "phi-3", "qwen2", "qwen35", "refact", "starcoder",
)


def venvs_dir() -> Path:
    """Where the harness's own venvs live, for every llama-cpp-python version: another release's
    (`--engine llama.cpp@VERSION`) and llama.cpp's converter (`GGUF_PARITY_VENVS` overrides it)."""
    return Path(os.environ.get("GGUF_PARITY_VENVS", Path.home() / ".cache" / "gguf-parity" / "venvs"))


def cache_dir() -> Path:
    env = os.environ.get("GGUF_PARITY_CACHE")
    if env:  # absolute: oracle workers run in another directory
        return Path(env).expanduser().absolute()
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
