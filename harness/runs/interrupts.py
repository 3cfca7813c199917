"""Ctrl-C and SIGTERM as an exception the run can finish a partial report on.

`raising_on_signals()` turns SIGINT and SIGTERM into `Interrupted` (a
`BaseException`, so an engine's or a check's `except Exception` cannot swallow
it). The command catches it, writes the report of the models finished so far
marked `interrupted`, and exits 128 + the signal number (130, 143). A second
signal during that clean-up is ignored: the clean-up itself is short and
closes the oracle workers.

Every command runs inside it (`harness.cli`), so a SIGTERM to any of them unwinds its
`with` and `finally` blocks, which end its children (llama.cpp workers, the chat helper, the
transformers child, engine and reference children: `harness.contained`), and exits 143;
`run`, `compare` and `chat` also write the report of what finished first.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The run was stopped by `signum`; `exit_status` is what the shell expects (128 + signum)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.name}")

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def _raise(signum: int, frame: FrameType | None) -> None:
    for sig in SIGNALS:  # the clean-up that follows must not be cut short by a second signal
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def raising_on_signals() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM raise `Interrupted`; the old handlers come back after.

    Only the main thread can set a handler: elsewhere (a command run from a thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, _raise) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
