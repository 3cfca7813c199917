"""A GGUF with some metadata keys rewritten: every other key, the tensor directory and the tensor data kept.

`rewrite_metadata(src, dst, changes)` is what `repair` writes: the keys of
`src` in their order and on-disk types, with `changes` applied (a new key gets
llama.cpp's type for it, `tokenizer.gguf.constants.KEY_TYPES`), and each
tensor's bytes copied from `src` byte for byte to its place in `dst`, at the
same alignment. `harness.models.gguf_writer.rewrite` is the other one: it writes
zeros for the tensor data, which is enough for a vocabulary-only file and
not for a model.

The copy is streamed in chunks of `CHUNK` bytes, so a model of any size is
rewritten in bounded memory. After writing, `dst` is read back: its metadata
must be `src`'s with the changes, and each tensor's sha256 must be the one
it had in `src` (`Rewritten.tensors_checked`); anything else removes `dst`
and raises `RewriteError`. The file is written in a private folder beside `dst` and renamed
into place (`harness.files.atomic.building`): no link planted beside `dst` is followed.

No header field sets the size of what is written or held in memory beyond what `src` holds:
`general.alignment` pads the rewritten header, so an alignment larger than the source file
(2**31 in a 400-byte file would be 2 GiB of padding, in memory and on disk) is refused first,
naming the key (`check_rewritable`, `SetupError`).

    >>> rewrite_metadata("x.gguf", "x.fixed.gguf", {"tokenizer.ggml.pre": "llama-bpe"})
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from harness.models.gguf_writer import GGUFWriteError, header
from tokenizer.errors import GGUFError
from tokenizer.gguf.constants import Keys
from tokenizer.gguf.reader import GGUFFile, read

from ..errors import SetupError
from ..files.atomic import building

CHUNK = 1 << 20


class RewriteError(ValueError):
    """The rewritten file could not be written, or does not read back as it should."""


@dataclass(frozen=True)
class Rewritten:
    """What `rewrite_metadata` wrote: the keys changed and dropped, and the tensors whose bytes it checked."""

    path: Path
    changed: tuple[str, ...]
    dropped: tuple[str, ...]
    tensors_checked: int


def rewrite_metadata(src: str | os.PathLike[str], dst: str | os.PathLike[str], changes: Mapping[str, Any],
                     *, drop: Iterable[str] = ()) -> Rewritten:
    """Write `dst`: `src` with `changes` applied and `drop` removed, tensor data copied byte for byte."""
    source, target = Path(src), Path(dst)
    if source.resolve() == target.resolve():
        raise RewriteError(f"{target}: the output must be another file than the input")
    f = read(source)
    check_rewritable(f, source)
    dropped = tuple(drop)
    missing = sorted(set(dropped) - f.metadata.keys())
    if missing:
        raise RewriteError(f"{source}: cannot drop keys it lacks: {missing}")
    meta = {k: v for k, v in f.metadata.items() if k not in dropped} | dict(changes)
    try:
        head, placed = header(meta, types=f.types, version=f.version, tensors=f.tensors, max_data=None)
    except GGUFWriteError as exc:
        raise RewriteError(f"{target}: {exc}") from None
    with building(target, "the rewritten file") as tmp:
        with open(source, "rb") as inp, open(tmp, "xb") as out:
            out.write(head)
            for tensor, (offset, nbytes) in zip(f.tensors, placed, strict=True):
                out.seek(len(head) + offset)
                _copy(inp, out, tensor.offset, nbytes)
            out.truncate(len(head) + _data_end(placed, f.alignment))
        checked = _check(source, f, tmp, meta)
    return Rewritten(target, tuple(changes), dropped, checked)


def check_rewritable(f: GGUFFile, source: Path) -> None:
    """`SetupError` when a rewrite of `f` (read from `source`) would be padded beyond the file's size.

    A file with tensors has its data at a multiple of the alignment inside the file, so its
    alignment is at most its size; a file without tensors may claim any power of two. The
    default alignment (32) is always accepted.
    """
    size = source.stat().st_size
    if f.alignment > max(size, 32):
        raise SetupError(f"{source}: {Keys.ALIGNMENT} is {f.alignment:,}, more than the file's {size:,} bytes "
                         f"(a rewrite would pad its header to {f.alignment:,} bytes); not rewritten")


def _data_end(placed: list[tuple[int, int]], alignment: int) -> int:
    if not placed:
        return 0
    offset, nbytes = placed[-1]
    end = offset + nbytes
    return end + (-end) % alignment


def _copy(inp: BinaryIO, out: BinaryIO, start: int, nbytes: int) -> None:
    inp.seek(start)
    left = nbytes
    while left:
        chunk = inp.read(min(CHUNK, left))
        if not chunk:
            raise RewriteError(f"tensor data ends early at byte {inp.tell()} ({left} bytes short)")
        out.write(chunk)
        left -= len(chunk)


def _digest(path: Path, start: int, nbytes: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        fh.seek(start)
        left = nbytes
        while left:
            chunk = fh.read(min(CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def _check(path: Path, source: GGUFFile, written: Path, meta: Mapping[str, Any]) -> int:
    """`written` read back: the metadata `meta`, each tensor's bytes those of `source` (at `path`); the count."""
    try:
        back = read(written)
    except GGUFError as exc:
        raise RewriteError(f"the rewritten file does not read back: {exc}") from None
    if list(back.metadata) != list(meta) or any(not _same(back.metadata[k], v) for k, v in meta.items()):
        raise RewriteError("the rewritten file's metadata is not the source's with the changes")
    if [(t.name, t.shape, t.ggml_type) for t in back.tensors] != \
            [(t.name, t.shape, t.ggml_type) for t in source.tensors]:
        raise RewriteError("the rewritten file's tensor directory is not the source's")
    for old, new in zip(source.tensors, back.tensors, strict=True):
        if new.offset % back.alignment or _digest(path, old.offset, old.nbytes) != \
                _digest(written, new.offset, new.nbytes):
            raise RewriteError(f"tensor {old.name!r}: its bytes or alignment changed in the rewrite")
    return len(back.tensors)


def _same(a: Any, b: Any) -> bool:
    """Equal, a NaN equal to a NaN: a file holding one reads back as written (NaN != NaN would call every
    rewrite of it failed, and `repair` would then blame another cause)."""
    import numpy as np
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        floats = a.dtype.kind == "f" and b.dtype.kind == "f"
        return bool(np.array_equal(a, b, equal_nan=floats))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)
