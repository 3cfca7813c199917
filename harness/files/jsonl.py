"""JSON Lines as the spec has it: one JSON value per line, lines split on "\\n" only.

JSON strings may hold U+2028, U+2029 and U+0085 raw, and `str.splitlines`
splits on them (and on \\v, \\f, \\x1c-\\x1e), so a reader that uses it cannot
read back what a plain `json.dumps(..., ensure_ascii=False)` wrote. Here every writer
escapes those characters, and lone surrogates, as `\\uXXXX` (still valid JSON, still
readable UTF-8 for everything else), and the reader splits the bytes on b"\\n" alone, so whatever the harness writes it
reads back exactly: `tests/files/test_jsonl.py` checks the round trip with
Hypothesis over arbitrary Unicode.

Reading is bounded (`harness.files.input_limits`): the file size, each line's length and
its JSON nesting; invalid UTF-8 is an error naming the line.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from . import input_limits
from .atomic import check_output_path, write_text_atomic

# Characters JSON allows raw in a string but that break lines (or UTF-8 encoding, for surrogates).
_UNSAFE = re.compile("[\u0085\u2028\u2029\ud800-\udfff]")


class JSONLError(ValueError):
    """A JSON Lines file that cannot be read; the message names the file and line."""


def dumps(record: Any) -> str:
    """One record as one line of JSON (no newline), safe to split on "\\n" and to encode as UTF-8."""
    return escape_unsafe(json.dumps(record, ensure_ascii=False, allow_nan=False))


def escape_unsafe(text: str) -> str:
    """JSON text with U+0085, U+2028, U+2029 and lone surrogates as `\\uXXXX` (they occur only in strings)."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def lines_text(records: Iterable[Any]) -> str:
    """The file text for `records`: one line each, each ending in "\\n"."""
    return "".join(dumps(r) + "\n" for r in records)


def write(path: str | os.PathLike[str], records: Iterable[Any]) -> Path:
    """Write `records` to `path` atomically (temp file and rename): a reader never sees half a file."""
    return write_text_atomic(Path(path), lines_text(records))


def append(path: str | os.PathLike[str], record: Any) -> None:
    """Append one record; a file that does not end in a newline gets one first.

    Only to a regular file (`check_output_path`: a FIFO or a device is refused, not written).
    """
    path = check_output_path(path, "JSON Lines file")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "r+b") as out:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped after the check
            raise JSONLError(f"{path}: not a regular file; nothing appended")
        end = out.seek(0, os.SEEK_END)
        if end and os.pread(fd, 1, end - 1) != b"\n":
            out.write(b"\n")
        out.write((dumps(record) + "\n").encode("utf-8"))


def read(path: str | os.PathLike[str], *, max_bytes: int = input_limits.MAX_CORPUS_BYTES,
         max_line: int = input_limits.MAX_LINE_BYTES) -> Iterator[tuple[int, object]]:
    """(line number, value) for each non-blank line; `JSONLError` naming the line on anything wrong.

    Streamed line by line (binary `readline` splits on b"\\n" only), so an
    over-long line costs at most `max_line` bytes before it is refused.
    """
    path = Path(path)
    try:
        with input_limits.open_regular(path, "JSON Lines file", limit=max_bytes) as f:
            yield from _records(f, path, max_line, max_bytes)
    except input_limits.InputTooLarge as exc:
        raise JSONLError(str(exc)) from None
    except OSError as exc:
        raise JSONLError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _records(f: BinaryIO, path: Path, max_line: int, max_bytes: int) -> Iterator[tuple[int, object]]:
    lineno = total = 0
    while line := f.readline(max_line + 2):
        lineno += 1
        total += len(line)
        if total > max_bytes:
            raise JSONLError(f"{path}: grew past the limit of {max_bytes:,} bytes while read")
        body = line[:-1] if line.endswith(b"\n") else line
        if len(body) > max_line:
            raise JSONLError(f"{path}:{lineno}: line is over the limit of {max_line:,} bytes")
        if not body.strip():
            continue
        try:
            yield lineno, input_limits.loads(body.decode("utf-8"), f"{path}:{lineno}")
        except UnicodeDecodeError as exc:
            raise JSONLError(f"{path}:{lineno}: not UTF-8 ({exc.reason} at byte {exc.start} of the line)") from None
        except ValueError as exc:
            raise JSONLError(str(exc)) from None
