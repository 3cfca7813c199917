"""A child's stderr kept as a bounded tail in memory: a child may write gigabytes, the harness keeps 64 KiB.

`StderrTail()` is a pipe whose write end goes to the child (`fd`, closed here once the child has it,
`handed_over`) and whose read end a daemon thread drains into a buffer of the last `KEEP` bytes,
counting every byte seen. `mark()` is that count when a request starts; `since(mark, n)` the last `n`
bytes written after it (what is still kept), so an error names what the child said about that
request. Nothing goes to disk, so a child printing without end can fill neither memory nor /tmp.
"""

from __future__ import annotations

import os
import select
import threading

KEEP = 64 << 10       # bytes of stderr kept
CHUNK = 64 << 10      # bytes read at a time
DRAIN_WAIT = 0.2      # seconds `since` waits for what a child wrote just before it died


class StderrTail:
    """The read side of a child's stderr pipe; see the module docstring."""

    def __init__(self) -> None:
        self._read, self.fd = os.pipe()
        self._kept = bytearray()
        self._total = 0
        self._eof = False
        self._stop = False
        self._lock = threading.Condition()
        self._thread = threading.Thread(target=self._drain, name="stderr-tail", daemon=True)
        self._thread.start()

    def handed_over(self) -> None:
        """The child holds the write end now: close ours, so the pipe ends when the child's copies do."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _drain(self) -> None:
        while not self._stop:
            ready, _, _ = select.select([self._read], [], [], 0.1)
            if not ready:
                continue
            data = os.read(self._read, CHUNK)
            with self._lock:
                if not data:
                    self._eof = True
                    self._lock.notify_all()
                    return
                self._total += len(data)
                self._kept += data
                del self._kept[:-KEEP]
                self._lock.notify_all()

    def mark(self) -> int:
        with self._lock:
            return self._total

    def since(self, mark: int, n: int) -> bytes:
        """The last `n` bytes written after `mark` that are still kept (after a short wait for a late write)."""
        with self._lock:
            if not self._eof:
                self._lock.wait(DRAIN_WAIT)
            new = self._total - mark
            return bytes(self._kept[-min(new, n):]) if new > 0 and n > 0 else b""

    def close(self) -> None:
        self.handed_over()
        self._stop = True
        self._thread.join(1.0)
        if not self._thread.is_alive():
            os.close(self._read)
