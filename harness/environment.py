"""What a child process of the harness starts with: its environment, its memory cap, the checkout.

Every child the harness starts (a llama.cpp worker, a reference child, a `llama.cpp@VERSION`
child, the converter, an engine child) gets this checkout on its import path (`child_env`) and
an address-space cap (`child_memory`: `--memory-limit` when the command has it, else
`default_memory()`, 4 GiB or half the RAM). `project_root` is the checkout, for the files it
holds (corpora, goldens, mutants); `venvs_dir` is where the harness's own venvs live.
Kept at the bottom floor, beside `harness.errors`: every stage starts children.
May import: the standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

GIB = 1 << 30
DEFAULT_MEMORY = 4 * GIB       # or half the machine's memory, whichever is smaller
MIN_MEMORY = 256 << 20         # below this a child cannot even import llama.cpp
_CHILD_MEMORY: list[int | None] = [None]  # set_child_memory


def _package_parent() -> Path:
    """The folder that holds `harness/`: the checkout, if it holds `pyproject.toml`."""
    return Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    """The environment of a Python child: this checkout importable whatever the current directory.

    An installed copy is importable as it is: then nothing is added (`project_root()` would be the
    current directory, perhaps a model folder, whose modules must not come before the libraries)."""
    here = _package_parent()
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
    here = _package_parent()
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


def venvs_dir() -> Path:
    """Where the harness's own venvs live, for every llama-cpp-python version: another release's
    (`--engine llama.cpp@VERSION`) and llama.cpp's converter (`GGUF_PARITY_VENVS` overrides it)."""
    return Path(os.environ.get("GGUF_PARITY_VENVS", Path.home() / ".cache" / "gguf-parity" / "venvs"))
