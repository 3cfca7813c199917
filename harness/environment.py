"""What a child process of the harness starts with: its environment, its memory cap, the checkout.

Every child the harness starts (a llama.cpp worker, a reference child, a `llama.cpp@VERSION`
child, the converter, an engine child) gets this checkout on its import path (`child_env`) and
an address-space cap (`child_memory`: `--memory-limit` when the command has it, else
`default_memory()`, 4 GiB or half the RAM). `project_root` is the checkout, for the files it
holds (corpora, goldens, mutants); `venvs_dir` is where the harness's own venvs live.

A child sets its own cap with `lower_limit`, which never raises an inherited limit: under
`ulimit -v`, a container's limit or `prlimit --as=N` lower than the cap, the inherited one stays
in force, and a limit that cannot be set is a `LimitError` (a set-up error, exit 2), never a
crash of what the child runs. `exec_bounded` is that for a program that is not Python (the chat
helper): capped, tied to its parent's life, then exec'd.
Kept at the bottom floor, beside `harness.errors`: every stage starts children.
May import: `harness.environment_vars`, the standard library.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .environment_vars import VENVS

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
    (`--engine llama.cpp@VERSION`) and llama.cpp's converter (`$GGUF_PARITY_VENVS` overrides it)."""
    return VENVS.get() or Path.home() / ".cache" / "gguf-parity" / "venvs"


class LimitError(RuntimeError):
    """A resource limit could not be set on this process: a set-up error of the harness (exit 2)."""


def lowered(wanted: int, soft: int, hard: int, infinity: int) -> int:
    """The limit to set: `wanted`, or an inherited `soft`/`hard` limit below it (never raised)."""
    return min([wanted, *(v for v in (soft, hard) if v != infinity and v >= 0)])


def lower_limit(name: str, wanted: int) -> int:
    """Cap this process's `RLIMIT_<name>` ("AS": address space, "DATA": heap and private writable
    mappings) at `wanted` bytes, or keep an inherited limit that is lower; the limit now in force.

    `LimitError` naming the limit when it cannot be set (never a ValueError deep in a child)."""
    import resource

    which = getattr(resource, f"RLIMIT_{name}")
    soft, hard = resource.getrlimit(which)
    limit = lowered(wanted, soft, hard, resource.RLIM_INFINITY)
    if limit <= 0:  # setrlimit would read a negative one as no limit at all
        raise LimitError(f"cannot set the memory limit RLIMIT_{name} to {limit:,} bytes: not a size")
    try:
        resource.setrlimit(which, (limit, limit))
    except (ValueError, OSError) as exc:
        raise LimitError(f"cannot set the memory limit RLIMIT_{name} to {limit:,} bytes "
                         f"(inherited soft {soft}, hard {hard}): {exc}") from None
    return limit


def die_with_parent_signal() -> None:
    """Ask the kernel to SIGKILL this process when the thread that started it exits (Linux's
    PR_SET_PDEATHSIG, kept across exec); nothing where there is no prctl."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


BOUNDED_EXEC = "import sys; from harness.environment import exec_bounded; exec_bounded(sys.argv[1:])"


def bounded_argv(argv: list[str], memory: int, *, limit: str = "DATA") -> list[str]:
    """`argv` run under `exec_bounded`: its `RLIMIT_<limit>` at `memory` bytes, tied to this process."""
    return [sys.executable, "-P", "-c", BOUNDED_EXEC, limit, str(memory), str(os.getpid()), *argv]


def exec_bounded(argv: list[str]) -> None:
    """`python -c BOUNDED_EXEC LIMIT MEMORY PARENT PROGRAM ARGS...`: cap `RLIMIT_<LIMIT>` ("AS" or "DATA")
    at MEMORY bytes (lowered as `lower_limit`), die with process PARENT, then exec PROGRAM (found on
    PATH as a shell would; limits and the parent-death signal survive exec).

    A limit that cannot be set is one JSON line `{"setup_error": ...}` on stdout, exit 2; a PROGRAM
    that cannot be started, one line on stderr, exit 127 (as a shell says it)."""
    limit, memory, parent, program = argv[0], int(argv[1]), int(argv[2]), argv[3:]
    try:
        lower_limit(limit, memory)
    except LimitError as exc:
        sys.stdout.write(json.dumps({"setup_error": str(exc)}) + "\n")
        sys.stdout.flush()
        raise SystemExit(2) from None
    die_with_parent_signal()
    if os.getppid() != parent:  # the parent went before the signal was armed
        raise SystemExit(1)
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        sys.stderr.write(f"cannot start {program[0]}: {exc.strerror or exc}\n")
        raise SystemExit(127) from None
