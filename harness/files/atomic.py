"""Files written whole or not at all, and only where a file may be written: the one way the harness writes.

Every output goes through `replacing` (a stream: a file object) or `building` (a path a child
program writes, such as a compiler's `-o`); `write_bytes_atomic` and `write_text_atomic` are
`replacing` for data in memory. Each

- checks the output path first (`check_output_path`): a device, a FIFO, a socket or a
  directory, or a link to one, is refused with one line (`SetupError`, exit 2) before any work,
  so `--json /dev/null` never replaces the system's `/dev/null`;
- writes under a random name created exclusively (`O_EXCL`, `O_NOFOLLOW`) beside the target,
  or in a private folder made for the write, so a link planted beside the output
  (`.out.gguf.tmp -> in.gguf`) is never followed and no fixed name can be another file;
- checks that what it wrote is a regular file, then renames it into place.

With the disk full, or a run killed mid-write, the target keeps its old content (a good older
report stays good) and no half-written file is ever read back; the temp file is removed when the
write fails. `locked(path)` is the lock two runs building the same shared entry take.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ..errors import SetupError

_SYSTEM_FOLDERS = (Path("/dev"), Path("/proc"), Path("/sys"))
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """What a file of this `st_mode` is, in words ("a regular file", "a FIFO", ...)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def check_output_path(path: str | os.PathLike[str], what: str) -> Path:
    """`path` as a `Path` when a regular file may be written there; else `SetupError`, one line.

    Refused (links followed): a device, a FIFO, a socket or a directory; a path whose parent
    (or nearest existing ancestor: missing folders are created on write) is not a directory; a
    path in a system folder (`/dev`, `/proc`, `/sys`), where the temp file and the rename would
    go: `/dev/stdout` or `/proc/self/fd/1` on a regular file would replace the link in `/dev`.
    A missing file, a regular file and a link to one (the link is replaced, not written
    through) are accepted. `what` names the option or file in the message ("--out").
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise SetupError(f"{what} {path}: cannot be written ({exc.strerror})") from None
    if mode is not None and not stat.S_ISREG(mode):
        link = "a link to " if path.is_symlink() else ""
        raise SetupError(f"{what} {path}: is {link}{kind_of(mode)}, not a regular file; nothing was written")
    _check_parent(path, what)
    _check_not_system(path, what)
    return path


def _check_not_system(path: Path, what: str) -> None:
    folder = path.absolute().parent.resolve()
    if any(folder == root or root in folder.parents for root in _SYSTEM_FOLDERS):
        raise SetupError(f"{what} {path}: is in {folder}, a system folder; nothing is written there "
                         "(give a file's own path)")


def check_output_folder(path: str | os.PathLike[str], what: str, *, files: tuple[str, ...] = (),
                        folders: tuple[str, ...] = ()) -> Path:
    """`path` as a `Path` when it is a folder, or can be made one; else `SetupError`, one line.

    Refused (links followed): a path that exists and is not a directory; one whose nearest existing
    ancestor is not a directory. The names in `files` (the outputs a command writes there) are
    checked with `check_output_path`, those in `folders` must be folders if they exist, so
    a `report.json` that is a FIFO is refused before the run, not after it.
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise SetupError(f"{what} {path}: not writable ({exc.strerror})") from None
    if mode is not None and not stat.S_ISDIR(mode):
        link = "a link to " if path.is_symlink() else ""
        raise SetupError(f"{what} {path}: is {link}{kind_of(mode)}, not a folder")
    _check_parent(path, what)
    for name in files:
        check_output_path(path / name, what)
    for name in folders:
        inner = path / name
        if inner.exists() and not inner.is_dir():
            raise SetupError(f"{what} {path}: {inner} is {kind_of(inner.stat().st_mode)}, not a folder")
    return path


def _check_parent(path: Path, what: str) -> None:
    parent = path.parent
    while True:
        try:
            mode = parent.stat().st_mode
        except FileNotFoundError:
            if parent == parent.parent:
                break
            parent = parent.parent
            continue
        except OSError as exc:
            raise SetupError(f"{what} {path}: its folder {parent} cannot be used ({exc.strerror})") from None
        if not stat.S_ISDIR(mode):
            raise SetupError(f"{what} {path}: {parent} is {kind_of(mode)}, not a folder")
        return


@contextmanager
def replacing(path: str | os.PathLike[str], what: str = "output file") -> Iterator[BinaryIO]:
    """A binary file object whose content replaces `path` when the block ends without an error.

    The path is checked before the block runs (`check_output_path`); the file is created
    exclusively under a random name beside it, fsynced and renamed into place. Keeps the
    target's permission bits, else 0644.
    """
    target = check_output_path(path, what)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, target.stat().st_mode & 0o777 if target.is_file() else 0o644)  # mkstemp makes it 0600
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        _place(Path(tmp), target, what)
    except BaseException:
        _unlink_quietly(tmp)
        raise


@contextmanager
def building(path: str | os.PathLike[str], what: str = "output file", *, optional: bool = False) -> Iterator[Path]:
    """A path in a private folder (0700, beside `path`) for a child program to write; renamed onto
    `path` when the block ends without an error. The folder is removed either way.

    `optional`: a program that may decline to write (a converter's refusal) leaves `path` as it was.
    """
    target = check_output_path(path, what)
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        built = folder / target.name
        yield built
        if not optional or os.path.lexists(built):
            _place(built, target, what)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _place(tmp: Path, target: Path, what: str) -> None:
    """Rename the written file `tmp` onto `target`: both checked again, just before."""
    mode = tmp.lstat().st_mode
    if not stat.S_ISREG(mode):
        raise SetupError(f"{what} {target}: what was written ({tmp}) is {kind_of(mode)}, not a regular file")
    check_output_path(target, what)
    os.replace(tmp, target)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes | bytearray, what: str = "output file") -> Path:
    """Replace `path` with `data` atomically (`replacing`); returns the path."""
    with replacing(path, what) as out:
        out.write(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike[str], text: str, what: str = "output file") -> Path:
    """`write_bytes_atomic` of `text` as UTF-8."""
    return write_bytes_atomic(path, text.encode("utf-8"), what)


def _unlink_quietly(name: str | os.PathLike[str]) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


@contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive `flock` on the file `path` (created) for the block; another process waits.

    The lock file is opened without following a link, and must be a regular file. The kernel
    drops the lock when the holder exits, killed or not: no stale lock to clean up.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise SetupError(f"lock file {path}: cannot be opened ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SetupError(f"lock file {path}: is {kind_of(mode)}, not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
