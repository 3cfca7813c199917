"""Files written whole or not at all: a temp file next to the target, then a rename.

With the disk full, or a run killed mid-write, the target keeps its old
content (a good older report stays good) and no half-written file is ever
read back. The temp file is removed when the write fails. `locked(path)` is
the lock two runs building the same shared folder take (the converter venv).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes | bytearray) -> Path:
    """Replace `path` with `data` atomically (same-directory temp file, fsync, `os.replace`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, path.stat().st_mode & 0o777 if path.exists() else 0o644)  # mkstemp makes it 0600
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return path


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """`write_bytes_atomic` of `text` as UTF-8."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def _unlink_quietly(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


@contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive `flock` on the file `path` (created) for the block; another process waits.

    The kernel drops the lock when the holder exits, killed or not: no stale lock to clean up.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
