"""Limits on llama.cpp worker processes: how many, how long per case, how much memory.

llama.cpp can hang on hostile input while its memory grows (an RWKV vocabulary
whose fragment loop never ends grows about 0.5 GB/s), so every worker runs
under an address-space cap and every case under a timeout; a worker that hits
either becomes a crash record, never a machine out of memory. The options are
shared by `record`, `drift` and `run`, and validated before any worker starts:
a value out of range is a `SetupError` (exit 2, one line), never a run of fake
crashes (`record --timeout 0` once wrote a golden of 226 of them).

    add_options(parser)                 # --jobs --force-jobs --timeout --memory-limit
    limits = from_args(args)            # Limits(jobs, timeout, memory) or SetupError
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import threading
import time
from dataclasses import dataclass

from ..environment import GIB, MIN_MEMORY, lower_limit, physical_memory, set_child_memory
from ..errors import SetupError

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 3600.0          # an hour per case is already a hang
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": GIB, "T": 1 << 40}
PARENT_POLL = 0.2  # seconds between a worker's checks that its parent is alive


@dataclass(frozen=True)
class Limits:
    """Worker processes per model, seconds per case, and bytes of address space per worker."""

    jobs: int = 1
    timeout: float = DEFAULT_TIMEOUT
    memory: int | None = None   # None: harness.environment.default_memory() when a worker starts


def check_timeout(seconds: float) -> float:
    """`seconds` if it is a usable per-case timeout; `SetupError` for nan, inf, <= 0 or > an hour."""
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_TIMEOUT:
        raise SetupError(f"--timeout {seconds:g} is out of range: give seconds per case, "
                         f"more than 0 and at most {MAX_TIMEOUT:g}")
    return float(seconds)


def check_jobs(jobs: int, *, force: bool = False) -> int:
    """`jobs` if at least 1 and at most the CPU count (any number with `force`); else `SetupError`."""
    if jobs < 1:
        raise SetupError(f"--jobs {jobs} is out of range: at least 1")
    cpus = os.cpu_count() or 1
    if jobs > cpus and not force:
        raise SetupError(f"--jobs {jobs} is more than the {cpus} CPUs of this machine; "
                         "add --force-jobs to run that many llama.cpp workers anyway")
    return jobs


def parse_memory(text: str) -> int:
    """Bytes from "4G", "512M", "1.5GiB" or a plain byte count; `SetupError` outside the sane range."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise SetupError(f"--memory-limit {text!r} is not a size: write e.g. 4G, 512M or 1.5GiB")
    size = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    ram = physical_memory()
    if size < MIN_MEMORY or (ram is not None and size > ram):
        top = f"{ram / GIB:.1f}G (this machine's memory)" if ram else "the machine's memory"
        raise SetupError(f"--memory-limit {text} is out of range: from {MIN_MEMORY >> 20}M to {top}")
    return size


def add_options(parser: argparse.ArgumentParser) -> None:
    """--jobs, --force-jobs, --timeout and --memory-limit for a command that starts workers."""
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="llama.cpp worker processes (at most the CPU count unless --force-jobs)")
    parser.add_argument("--force-jobs", action="store_true",
                        help="allow more --jobs than CPUs")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help="a case longer than this is a hang (re-checked in a fresh worker); "
                             f"more than 0, at most {MAX_TIMEOUT:g} (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--memory-limit", default=None, metavar="SIZE",
                        help="address-space cap of each llama.cpp worker, e.g. 4G or 512M "
                             "(default 4G, or half the RAM if smaller); hitting it is a crash. The "
                             "reference, converter and llama.cpp@VERSION children get the same cap")


def from_args(args: argparse.Namespace) -> Limits:
    """The validated `Limits` of the parsed options; `SetupError` (exit 2) naming the bad one."""
    memory = parse_memory(args.memory_limit) if args.memory_limit is not None else None
    set_child_memory(memory)  # the reference, converter and llama.cpp@VERSION children get the same cap
    return Limits(jobs=check_jobs(args.jobs, force=args.force_jobs), timeout=check_timeout(args.timeout),
                  memory=memory)


# --- inside a worker ----------------------------------------------------------------------

def limit_memory(limit: int) -> int:
    """Cap this process's address space at `limit` bytes, so a runaway allocation fails here; an
    inherited lower limit stays (`lower_limit`). The cap in force; `LimitError` if it cannot be set."""
    return lower_limit("AS", limit)


def die_with_parent(parent: int) -> None:
    """Kill this worker as soon as process `parent` is gone (it is then re-parented).

    A thread rather than PR_SET_PDEATHSIG: that signal fires when the *thread*
    that started us exits, and the parent starts workers from pool threads.
    llama.cpp calls release the GIL, so the thread runs while llama.cpp hangs.
    """
    def die() -> None:  # with its process group when it leads one (harness.contained starts it so)
        if os.getpgid(0) == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        die()

    if os.getppid() != parent:  # already gone before we got here
        die()
    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()
