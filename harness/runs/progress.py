"""Progress for long runs: a redrawn bar on a terminal, plain lines otherwise.

    with Progress(total=len(cases), label="llama-spm") as bar:
        for case in cases:
            ...
            bar.advance()

On a TTY the bar is redrawn in place on stderr. When stderr is not a terminal
(CI logs, pipes) it prints one plain line every `every` percent instead, so a
log stays short and readable. `Progress(total=0)` is valid and prints nothing
but the final line.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 28


class Progress:
    """A counter that shows itself; use as a context manager or call `close()`."""

    def __init__(self, *, total: int, label: str = "", stream: TextIO | None = None,
                 tty: bool | None = None, every: int = 10, quiet: bool = False) -> None:
        self.total = max(int(total), 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self._isatty() if tty is None else tty
        self.every = max(int(every), 1)
        self.quiet = quiet
        self.done = 0
        self.note = ""
        self._start = time.monotonic()
        self._last_step = -1
        self._closed = False

    def _isatty(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def advance(self, n: int = 1, *, note: str = "") -> None:
        """Count `n` more items done; `note` is shown next to the bar (e.g. a finding count)."""
        self.done += n
        if note:
            self.note = note
        self._show()

    def _fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 1.0

    def _line(self) -> str:
        elapsed = time.monotonic() - self._start
        note = f"  {self.note}" if self.note else ""
        return f"{self.label} {self.done}/{self.total} ({self._fraction():.0%}, {elapsed:.1f}s){note}"

    def _show(self) -> None:
        if self.quiet or self._closed:
            return
        if self.tty:
            filled = int(self._fraction() * BAR_WIDTH)
            bar = "#" * filled + "-" * (BAR_WIDTH - filled)
            self.stream.write(f"\r\x1b[2K[{bar}] {self._line()}")
            self.stream.flush()
            return
        step = int(self._fraction() * 100) // self.every
        if step != self._last_step:
            self._last_step = step
            print(self._line(), file=self.stream, flush=True)

    def close(self) -> None:
        """Finish the bar (a newline on a TTY, a last line otherwise)."""
        if self._closed or self.quiet:
            self._closed = True
            return
        if self.tty:
            self._show()
            self.stream.write("\n")
            self.stream.flush()
        elif self.done < self.total or self._last_step < 0:
            print(self._line(), file=self.stream, flush=True)
        self._closed = True

    def __call__(self, n: int = 1) -> None:
        """Callable form, for APIs that take a `progress` callback."""
        self.advance(n)
