"""The render budget: a hostile chat template kept within a time, size and memory limit.

Every attribute/item access, call, operator, filter, loop step over `range` and output chunk
of a render (the environment's hooks, `tokenizer.chat.jinja`) checks a deadline and (every
few milliseconds) the process's memory growth, and strings built by operators, filters and
concatenation may not exceed a size limit; `ChatBudgetExceeded` names which was hit.
"""

from __future__ import annotations

import os
import time
from typing import Any

from .errors import ChatBudgetExceeded

DEFAULT_TIME_BUDGET = 5.0  # seconds per render
DEFAULT_SIZE_BUDGET = 16 << 20  # characters in any one string, and in the output
DEFAULT_MEMORY_BUDGET = 512 << 20  # bytes a render may grow the process's resident memory by
MEMORY_CHECK_SECONDS = 0.005
TIME_EXCEEDED = "chat template ran longer than its"  # how a render stopped by the clock begins its message
try:
    PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):  # not a POSIX system: no /proc/self/statm either
    PAGE_SIZE = 4096
def resident_bytes() -> int | None:
    """This process's resident memory now (Linux: /proc/self/statm), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read(64).split()[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


class Budget:
    """A deadline, a size limit and a memory limit, checked from the environment's hooks.

    The memory limit is the growth of the process's resident memory over its size when the
    budget was made, looked at every `MEMORY_CHECK_SECONDS` from `tick()` (every hook and every
    1,024 steps of a `range` tick), so a template that allocates in a loop or in one filter call
    over a range (`range(10**8)|list`) stops within a few megabytes of the limit. Where the
    resident size cannot be read, only time and size bound a render.
    """

    def __init__(self, seconds: float, size: int, memory: int = DEFAULT_MEMORY_BUDGET) -> None:
        self.seconds = seconds
        self.size = size
        self.memory = memory
        self.deadline = time.monotonic() + seconds
        self.output = 0
        self.base = resident_bytes()
        self.next_memory_check = time.monotonic() + MEMORY_CHECK_SECONDS

    def tick(self) -> None:
        now = time.monotonic()
        if now > self.deadline:
            raise ChatBudgetExceeded(f"{TIME_EXCEEDED} {self.seconds:g} s budget")
        if now > self.next_memory_check and self.base is not None:
            self.next_memory_check = now + MEMORY_CHECK_SECONDS
            grown = (resident_bytes() or 0) - self.base
            if grown > self.memory:
                raise ChatBudgetExceeded(f"chat template grew this process by {grown >> 20:,} MiB, over its "
                                         f"budget of {self.memory >> 20:,} MiB")

    def sized(self, value: Any) -> Any:
        if isinstance(value, (str, list)) and len(value) > self.size:
            raise ChatBudgetExceeded(f"chat template built a value of {len(value):,} items, over its "
                                     f"budget of {self.size:,}")
        return value

    def emit(self, chunk: str) -> str:
        self.tick()
        self.output += len(chunk)
        if self.output > self.size:
            raise ChatBudgetExceeded(f"chat template output passed its budget of {self.size:,} characters")
        return chunk

