"""The `--report DIR` of one run: checked before the run starts, and held by one run at a time.

`ReportDir(path)` creates the folder, and takes an exclusive `flock` on
`DIR/.lock` (released by the kernel if the process dies, so it never goes
stale). A folder that cannot be created or written, or that another run
holds, is a `SetupError` (exit 2) before any model is checked, rather than a
traceback after the whole run. The reports themselves are
written atomically by `harness.report.build.write`.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import SetupError

LOCK_NAME = ".lock"


class ReportDir:
    """A context manager: the report folder, writable and locked for the length of the block."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).absolute()
        self._fd: int | None = None

    def __enter__(self) -> ReportDir:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise SetupError(f"--report {self.path}: not writable ({exc.strerror or exc})") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._close()
            raise SetupError(f"--report {self.path}: another run is writing this report folder "
                             "(it holds .lock); wait for it or give another --report") from None
        if not os.access(self.path, os.W_OK):
            self._close()
            raise SetupError(f"--report {self.path}: not writable")
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None
