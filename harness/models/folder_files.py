"""A model folder's files opened as data: inside the folder, regular, bounded; private copies for children.

A folder from anywhere (a download, a shared drive, an archive unpacked) may hold links:
`chat_template.jinja -> /etc/shadow`, `tokenizer.json -> ../../secret.txt`, a FIFO or a
device named like a tokenizer file. Every file the harness takes from a model folder
(`convert`, `--reference hf:`, `spm:`, `tekken:`, the chat side) is opened here, and only when:

- its real path (every link followed) stays inside the folder: a link to another file of
  the folder is followed, a link that leaves the folder is refused. One exception, the
  Hugging Face cache's own layout: in `.../models--ORG--NAME/snapshots/REV/` every file is a
  link to `../../blobs/HASH`, so for such a snapshot folder the repository's `blobs/` counts
  as inside too;
- it is a regular file: a FIFO, a device, a socket, a directory, a dangling link or a link
  loop is refused, and is never opened;
- it is at most its size limit (the caller's, from `harness.files.input_limits`).

A hard link is a regular file of the folder: nothing tells it from any other name of its
bytes, so it is read like any other file (whoever made the folder could as well have copied
the bytes; a hard link to a file the user cannot read gives them nothing either).

The checks hold against a folder that changes while it is read: the file is opened at its
resolved path with `O_NOFOLLOW` (a link swapped in since fails to open), what was opened is
judged by `fstat` of the descriptor, and on Linux the descriptor's own path
(`/proc/self/fd/N`) must still be inside. The folder itself, as the user names it, may be a
link: only what is inside it is judged. A refusal is a `SetupError` naming the file (exit 2).

`private_copy` copies such files into a folder of this process, removed at its exit: what a
child loads by itself (transformers' `AutoTokenizer`, a reference library) is that copy,
never the user's folder.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..errors import SetupError

_CHUNK = 1 << 20
_OPEN_FLAGS = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_NOCTTY", 0))
_FD_PATHS = Path("/proc/self/fd")
HUB_REPOS = ("models--", "datasets--", "spaces--")  # huggingface_hub's cache folders, one per repository
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a link"))


class TooLarge(SetupError):
    """A file of a folder over its size limit (or grown past it while it was read)."""


def present(path: Path) -> bool:
    """Something is at `path`: a file, a FIFO, a link (even one to nowhere). The harness then reads it or
    refuses it; it never passes over a file of the folder as if it were not there."""
    return os.path.lexists(path)


def roots(folder: Path) -> tuple[Path, ...]:
    """Where a file of `folder` may really be: the folder (resolved), and for a Hugging Face cache
    snapshot (`<cache>/models--ORG--NAME/snapshots/REV`) the repository's `blobs/` as well."""
    root = Path(os.path.realpath(folder))
    if root.parent.name == "snapshots" and root.parent.parent.name.startswith(HUB_REPOS):
        return root, root.parent.parent / "blobs"
    return (root,)


def _inside(path: Path, allowed: tuple[Path, ...]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in allowed)


def kind(mode: int) -> str:
    """What a file that is not regular is, for a message: "a FIFO", "a directory", ..."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _resolved(path: Path, allowed: tuple[Path, ...]) -> Path:
    """`path` with every link followed, checked to be inside `allowed`; `SetupError` otherwise."""
    try:
        real = Path(os.path.realpath(path, strict=True))
    except OSError as exc:
        if present(path):
            raise SetupError(f"{path}: a link that leads nowhere ({exc.strerror or exc}): refused") from None
        raise SetupError(f"{path}: no such file") from None
    if not _inside(real, allowed):
        raise SetupError(f"{path}: a link to {real}, outside the folder {allowed[0]}: refused (a model "
                         "folder's files are read only inside it)")
    return real


def open_file(path: Path, limit: int, *, folder: Path | None = None) -> int:
    """A read-only descriptor of `path`, a file of `folder` (by default `path.parent`), checked as the
    module doc says; `SetupError` naming `path` otherwise. The caller closes it."""
    allowed = roots(path.parent if folder is None else folder)
    real = _resolved(path, allowed)
    _check(path, os.stat(real, follow_symlinks=False), limit)  # judged before opening: a device is never opened
    try:
        fd = os.open(real, _OPEN_FLAGS)
    except OSError as exc:
        raise SetupError(f"{path}: cannot open it ({exc.strerror or exc})") from None
    try:
        _check(path, os.fstat(fd), limit)
        _check_opened(path, fd, allowed)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check(path: Path, info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise SetupError(f"{path}: {kind(info.st_mode)}, not a regular file: refused (a model folder's files "
                         "are read only when they are regular files)")
    if info.st_size > limit:
        raise TooLarge(f"{path}: {info.st_size:,} bytes, over the limit of {limit:,} for this file")


def _check_opened(path: Path, fd: int, allowed: tuple[Path, ...]) -> None:
    """The descriptor's own path inside `allowed` (Linux): no folder on the way was swapped for a link."""
    try:
        opened = Path(os.readlink(_FD_PATHS / str(fd)))
    except OSError:
        return  # no /proc: O_NOFOLLOW and fstat are the checks
    if not _inside(opened, allowed):
        raise SetupError(f"{path}: changed while it was opened (now {opened}, outside the folder): refused")


def read_file(path: Path, limit: int, *, folder: Path | None = None) -> bytes:
    """The bytes of `path` (a file of `folder`, by default `path.parent`), at most `limit`; `SetupError`
    otherwise."""
    fd = open_file(path, limit, folder=folder)
    try:
        data = bytearray()
        while chunk := os.read(fd, _CHUNK):
            data += chunk
            if len(data) > limit:  # it grew while it was read
                raise TooLarge(f"{path}: over the limit of {limit:,} bytes for this file")
        return bytes(data)
    except OSError as exc:
        raise SetupError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def size(path: Path, limit: int) -> int:
    """The size of `path`, checked as `read_file` checks it (without reading it)."""
    fd = open_file(path, limit)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def copy_file(path: Path, target: Path, limit: int, *, folder: Path | None = None) -> None:
    """Copy `path` (checked as `read_file` checks it) to `target`, a new file (created, never followed)."""
    fd = open_file(path, limit, folder=folder)
    try:
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                      0o600)
        copied = 0
        try:
            while chunk := os.read(fd, _CHUNK):
                copied += len(chunk)
                if copied > limit:
                    raise TooLarge(f"{path}: over the limit of {limit:,} bytes for this file")
                os.write(out, chunk)
        finally:
            os.close(out)
    finally:
        os.close(fd)


_PRIVATE: list[Path] = []
PRIVATE_PREFIX = "gguf-parity-originals-"


def _private_root() -> Path:
    """This process's folder of private copies, removed when it exits (by this process, not a fork of it);
    the folders of processes that are gone without removing theirs (killed) are removed first."""
    if not _PRIVATE:
        _sweep(Path(tempfile.gettempdir()))
        root = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-"))
        atexit.register(_remove_root, root, os.getpid())
        _PRIVATE.append(root)
    return _PRIVATE[0]


def _sweep(tmp: Path) -> None:
    for old in tmp.glob(f"{PRIVATE_PREFIX}*-*"):
        pid = old.name.removeprefix(PRIVATE_PREFIX).partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def _remove_root(root: Path, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(root, ignore_errors=True)


def private_copy(folder: Path, names: Iterable[tuple[str, int]]) -> Path:
    """A new folder of this process holding a copy of each present `folder/name` (with its size limit),
    each checked as `read_file` checks it; sub-folders in a name are made. What a child loads itself."""
    copy = Path(tempfile.mkdtemp(prefix="copy-", dir=_private_root()))
    try:
        for name, limit in names:
            source = folder / name
            if present(source):
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                copy_file(source, copy / name, limit, folder=folder)
    except BaseException:
        shutil.rmtree(copy, ignore_errors=True)
        raise
    return copy


def remove_copy(copy: Path) -> None:
    """Remove a folder `private_copy` made (anything else is left alone)."""
    if _PRIVATE and copy.parent == _PRIVATE[0]:
        shutil.rmtree(copy, ignore_errors=True)
