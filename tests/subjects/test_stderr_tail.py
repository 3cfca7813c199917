"""An engine child's stderr costs the harness a bounded tail in memory: no file grows on disk with it.

A child that prints without end (a debug build, a loop) used to be copied whole into a temporary
file: 100 MB of stderr was 100 MB of /tmp. Now only the last `KEEP` bytes are kept, and an error still
names what the child said last.
"""

from __future__ import annotations

import os
import stat
import sys
import time

from harness.subjects.client import Child
from harness.subjects.stderr_tail import KEEP, StderrTail

FLOOD = ("import sys, time\n"
         "for _ in range(100): sys.stderr.buffer.write(b'x' * (1 << 20))\n"
         "sys.stderr.buffer.write(b'the last words\\n'); sys.stderr.flush(); time.sleep(60)\n")


def open_file_bytes() -> int:
    """Bytes of the regular files this process holds open (a deleted temp file included)."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            info = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            total += info.st_size
    return total


def test_a_child_flooding_stderr_costs_a_bounded_tail_and_no_disk():
    before = open_file_bytes()
    child = Child([sys.executable, "-c", FLOOD])
    try:
        mark = 0
        deadline = time.monotonic() + 60
        while child.stderr.mark() < 100 << 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert child.stderr.mark() > 100 << 20  # every byte was read ...
        assert open_file_bytes() - before < 1 << 20  # ... and none of it went to a file
        tail = child.stderr.since(mark, 2000)
        assert tail.endswith(b"the last words\n") and len(tail) == 2000
    finally:
        child.kill()
        child.close()


def test_since_gives_only_what_came_after_the_mark():
    tail = StderrTail()
    try:
        os.write(tail.fd, b"before\n")
        time.sleep(0.3)
        mark = tail.mark()
        os.write(tail.fd, b"after\n")
        tail.handed_over()
        assert tail.since(mark, 100) == b"after\n"
        assert tail.since(tail.mark(), 100) == b""
        assert len(tail._kept) <= KEEP
    finally:
        tail.close()
