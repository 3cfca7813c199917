"""The `--report DIR` of one run: checked before the run starts, and held by one run at a time.

`ReportDir(path)` creates the folder, and takes an exclusive `flock` on
`DIR/.lock` (released by the kernel if the process dies, so it never goes
stale). A folder that cannot be created or written, or that another run
holds, is a `SetupError` (exit 2) before any model is checked, rather than a
traceback after the whole run. So is a path that is not a folder, a report file
in it that is not a regular file (`report.json` a FIFO or a link to `/dev/null`),
`cases/` that is not a folder, and a `.lock` that is a link or not a regular file
(`harness.files.atomic.check_output_folder`). The reports themselves are
written atomically by `harness.report.build.write`.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from ..errors import SetupError
from ..files.atomic import check_output_folder, kind_of

LOCK_NAME = ".lock"
# What a run writes into its report folder: checked before the run (a command with other names passes its own).
REPORT_FILES = ("report.json", "report.html", "messages.json", "messages.html")
REPORT_FOLDERS = ("cases", "found")
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class ReportDir:
    """A context manager: the report folder, writable and locked for the length of the block."""

    def __init__(self, path: str | os.PathLike[str], *, files: tuple[str, ...] = REPORT_FILES,
                 option: str = "--report") -> None:
        self.path = Path(path).absolute()
        self.files, self.option = files, option
        self._fd: int | None = None

    def __enter__(self) -> ReportDir:
        check_output_folder(self.path, self.option, files=self.files, folders=REPORT_FOLDERS)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path / LOCK_NAME, _LOCK_FLAGS, 0o644)
        except OSError as exc:
            raise SetupError(f"{self.option} {self.path}: not writable, or its {LOCK_NAME} is a link "
                             f"({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode := os.fstat(self._fd).st_mode):
            self._close()
            raise SetupError(f"{self.option} {self.path}: its {LOCK_NAME} is {kind_of(mode)}, not a regular file")
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._close()
            raise SetupError(f"{self.option} {self.path}: another run is writing this report folder "
                             "(it holds .lock); wait for it or give another --report") from None
        if not os.access(self.path, os.W_OK):
            self._close()
            raise SetupError(f"{self.option} {self.path}: not writable")
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None
