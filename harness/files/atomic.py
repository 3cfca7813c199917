"""Files written whole or not at all: a temp file next to the target, then a rename.

With the disk full, or a run killed mid-write, the target keeps its old
content (a good older report stays good) and no half-written file is ever
read back. The temp file is removed when the write fails.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
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
