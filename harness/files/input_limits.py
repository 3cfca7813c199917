"""Limits on what the harness reads from files, so a hostile or broken file costs little.

A golden, a corpus or a found file is input like any other: a 4 MB
`.json.gz` that inflates to 4 GiB, a 50 MB corpus line or a golden nested a
million levels deep must end in one clear line (exit 2), not in gigabytes of
memory or in a report blaming llama.cpp. Every limit is far above what the
shipped files need (the largest golden is 0.5 MB, the largest corpus line
under 1 KB) and is named in the error, so a user who needs more knows what
to raise.

`read_capped(path, limit, what)` reads a file (inflating `.gz` as a stream,
stopping at `limit`), `loads(text, where)` parses JSON with a depth limit.
Both raise `InputTooLarge` / `ValueError` subclasses naming the file.

Only a regular file is read (links followed): a FIFO, a device (`/dev/zero` has no end), a
socket or a directory is refused with `NotARegularFile`, one line, before a byte is read, and
never more than `limit` + 1 bytes are read, so a file that grows while read is bounded too.
A side file (`--known-crashes`, a manifest, a corpus, a found file, chat targets, the real
set's toml, and any other small file of settings) is read with `read_side_text` or
`read_side_json`: the same reader under `MAX_SIDE_FILE_BYTES`, decoded as UTF-8.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

MAX_GOLDEN_BYTES = 16 << 20   # a golden file, and what a .json.gz may inflate to (32x the largest)
MAX_CORPUS_BYTES = 16 << 20   # a corpus or found file
MAX_LINE_BYTES = 1 << 20      # one JSON Lines record (one case's input)
MAX_JSON_DEPTH = 64           # nesting of arrays and objects in any JSON the harness reads
# An original tokenizer's files (a reference's, a folder's): about 4x the largest known of each kind
MAX_TOKENIZER_JSON_BYTES = 128 << 20  # tokenizer.json, tekken.json (Gemma 3's tokenizer.json is 33 MB)
MAX_SPM_MODEL_BYTES = 32 << 20        # a SentencePiece .model (Gemma 3's is 4.7 MB)
MAX_CONFIG_BYTES = 16 << 20           # tokenizer_config.json (large ones list added tokens: about 2 MB)
MAX_SIDE_FILE_BYTES = 16 << 20        # a file of settings or a list (the largest shipped: 76 KB)
MAX_REPORT_BYTES = 256 << 20          # a report.json read back (a full run's is a few MB)
_CHUNK = 1 << 20


class InputTooLarge(ValueError):
    """A file (or its inflated content, or one line) is over a limit of this module, or has no bound."""


class NotARegularFile(InputTooLarge):
    """A path to read is a FIFO, a device, a socket or a directory (links followed): nothing bounds what it
    would give (`/dev/zero`), or its open would wait (a FIFO), so it is not read."""


def read_capped(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The file's bytes, inflated when it ends in `.gz`; `InputTooLarge` above `limit` bytes either way.

    Only a regular file is read (`NotARegularFile` else). Inflating is a stream with a cap, so a
    zip bomb costs at most `limit` bytes of memory, and bad zlib data is a `ValueError` naming the file.
    """
    path = Path(path)
    raw = _read_regular(path, limit, what)
    if path.suffix != ".gz":
        return raw
    return _inflate(raw, limit, f"{path}: {what}")


def open_regular(path: str | os.PathLike[str], what: str, *, limit: int | None = None) -> BinaryIO:
    """`path` opened for reading in binary, when it is a regular file (links followed) of at most
    `limit` bytes; `NotARegularFile` / `InputTooLarge` naming it else. A FIFO is refused before
    it is opened (its open would wait for a writer), and the open itself does not block."""
    path = Path(path)
    _check_regular(path, os.stat(path).st_mode, what)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    handle = os.fdopen(fd, "rb")
    try:
        info = os.fstat(fd)
        _check_regular(path, info.st_mode, what)  # the path was swapped between the stat and the open
        if limit is not None and info.st_size > limit:
            raise InputTooLarge(f"{path}: {what} is {info.st_size:,} bytes, over the limit of {limit:,}")
    except BaseException:
        handle.close()
        raise
    return handle


def _read_regular(path: Path, limit: int, what: str) -> bytes:
    """At most `limit` bytes of the regular file `path` (`InputTooLarge` past them)."""
    with open_regular(path, what, limit=limit) as handle:
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise InputTooLarge(f"{path}: {what} grew past the limit of {limit:,} bytes while read")
    return raw


def _check_regular(path: Path, mode: int, what: str) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise NotARegularFile(f"{path}: {what} is {kind}, not a regular file; not read")


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def read_side_text(path: str | os.PathLike[str], what: str, *, limit: int = MAX_SIDE_FILE_BYTES) -> str:
    """A side file's text (UTF-8): a regular file of at most `limit` bytes, else one line naming it."""
    raw = read_capped(path, limit, what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: {what} is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def read_side_json(path: str | os.PathLike[str], what: str, *, limit: int = MAX_SIDE_FILE_BYTES) -> Any:
    """A side file's JSON value: `read_side_text`, then `loads` (depth-limited), errors naming the file."""
    return loads(read_side_text(path, what, limit=limit), f"{path}: {what}")


def tokenizer_file_limit(path: str | os.PathLike[str]) -> int:
    """The size limit of an original tokenizer's file, by its kind (its name)."""
    path = Path(path)
    if path.name == "tokenizer_config.json":
        return MAX_CONFIG_BYTES
    if path.suffix == ".model":
        return MAX_SPM_MODEL_BYTES
    return MAX_TOKENIZER_JSON_BYTES


def read_tokenizer_file(path: str | os.PathLike[str]) -> bytes:
    """An original tokenizer's file (tokenizer.json, tokenizer_config.json, tekken.json, a `.model`),
    `InputTooLarge` above its limit (`tokenizer_file_limit`)."""
    return read_capped(path, tokenizer_file_limit(path), "an original tokenizer's file")


def _inflate(raw: bytes, limit: int, where: str) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip framing
    out = bytearray()
    data = raw
    try:
        while data and not inflater.eof:
            out += inflater.decompress(data, _CHUNK)
            if len(out) > limit:
                raise InputTooLarge(f"{where} inflates to over {limit:,} bytes, the limit")
            data = inflater.unconsumed_tail
        if not inflater.eof:
            raise ValueError(f"{where} is a truncated gzip stream")
    except zlib.error as exc:
        raise ValueError(f"{where} is not valid gzip data ({exc})") from None
    return bytes(out)


def loads(text: str | bytes, where: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, refusing nesting deeper than `max_depth` with a `ValueError` naming `where`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"{where}: JSON nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if depth_over(value, max_depth):
        raise ValueError(f"{where}: JSON nested deeper than {max_depth} levels")
    return value


def depth_over(value: Any, limit: int) -> bool:
    """True when `value` nests lists/dicts more than `limit` deep (iterative: no recursion to blow)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
