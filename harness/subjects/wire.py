"""What the harness takes from an engine child: bounded on the wire, every value checked where it enters.

docs/engine-protocol.md ("Bounds") states the caps; this module holds them and the checks:

- `read_line`: one reply line by a deadline that covers a *partial* line too (a child that
  writes without end, or drips a byte a second, is late at the deadline, not never), and no
  longer than the request's cap (`reply_limit`): the harness never holds more than that of a
  reply in memory, and never parses a line over it;
- `parse`: the line as JSON, the non-standard constants `NaN` and `Infinity` kept as `Bare`
  markers, so that each fails where it lands, named (the protocol sends non-finite scores as
  strings);
- `ids_problem`, `column`, `checked_info`, `error_text`: each value of a reply checked before
  anything else reads it (ids: plain ints in llama.cpp's int32 token range, within the
  engine's own `n_tokens`, at most `IDS_PER_BYTE` per input byte plus `IDS_EXTRA`; scores
  float32 or the three strings; attributes int32 bits; texts base64; `info` typed and within
  `MAX_TOKENS`; an error object's strings valid Unicode). A value that fails is a
  `ReplyError` naming the field and the token: an engine error, never a bug of the harness.
"""

from __future__ import annotations

import binascii
import json
import time
from dataclasses import dataclass
from typing import Any

from .protocol import BYTE_FIELDS, unb64

LINE_FLOOR = 16 << 20        # bytes any reply line may have (a 32k vocabulary slice of gemma-4 is 2.6 MB)
LINE_PER_REQUEST_BYTE = 64   # and per byte of the request line (a long document's ids and pieces)
IDS_PER_BYTE, IDS_EXTRA = 16, 64  # ids one tokenization may return: per input byte, plus a constant
MAX_TOKENS = 1 << 24         # the largest `n_tokens` a hello may claim
TOKEN_LIMIT = 1 << 31        # llama_token is int32: ids and attributes are below this, and not negative
FLOAT32_LIMIT = (2 - 2 ** -24) * 2.0 ** 127  # the numbers that round to a finite float32 are below this
NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class ReplyError(ValueError):
    """A value of an engine's reply the protocol does not allow; the message names the field and token."""


class LineTooLong(Exception):
    """A reply line over its cap (`reply_limit`); `size` is how much of it was read."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a reply line over {limit:,} bytes (the protocol's cap for this request)")
        self.size, self.limit = size, limit


class Late(Exception):
    """No whole reply line by the deadline (nothing came, or only part of a line)."""

    def __init__(self, partial: int) -> None:
        super().__init__(f"{partial:,} bytes of a line" if partial else "nothing")
        self.partial = partial


class Gone(Exception):
    """The child is over (it exited, or closed its stdout) before a whole line came."""


def reply_limit(request_bytes: int) -> int:
    """The most bytes the reply line to a request line of `request_bytes` may have."""
    return LINE_FLOOR + LINE_PER_REQUEST_BYTE * request_bytes


def read_line(contained: Any, deadline: float, limit: int) -> bytes:
    """One line from a `harness.contained.Contained` child's stdout, without its b"\\n".

    The deadline (time.monotonic()) is looked at before every read, so a child that keeps
    writing is late at it too; `LineTooLong` as soon as the line passes `limit` bytes, `Late`
    at the deadline, `Gone` when the child is over. What follows the line stays in the child's
    buffer, as `Contained.readline` keeps it.
    """
    parts: list[bytes] = []
    size = 0
    chunk, contained.buffer = contained.buffer, b""
    while True:
        end = chunk.find(b"\n")
        if end >= 0:
            if size + end > limit:
                raise LineTooLong(size + end, limit)
            parts.append(chunk[:end])
            contained.buffer = chunk[end + 1:]
            return b"".join(parts)
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            raise LineTooLong(size, limit)
        left = deadline - time.monotonic()
        if left <= 0:
            raise Late(size)
        got = contained.read(left)
        if got is None:
            raise Late(size)
        if not got:
            raise Gone()
        chunk = got


@dataclass(frozen=True)
class Bare:
    """A bare JSON constant (`NaN`, `Infinity`, `-Infinity`): not JSON, so no value of the protocol."""

    name: str

    def __repr__(self) -> str:
        return f"the bare constant {self.name}"


def parse(line: bytes) -> Any:
    """The reply line as JSON (`ValueError` when it is not; `RecursionError` is one too)."""
    try:
        return json.loads(line, parse_constant=Bare)
    except RecursionError:
        raise ValueError("nested too deeply") from None


# --- values ---------------------------------------------------------------------------------------

def describe(value: object) -> str:
    """A value as an error message shows it: its type and at most 80 characters of it."""
    if isinstance(value, Bare):
        return repr(value)
    text = repr(value)
    return f"{type(value).__name__} {text[:80]}{'...' if len(text) > 80 else ''}"


def ids_problem(ids: object, *, size: int, n_tokens: int | None) -> str | None:
    """Why `ids` (one tokenization of `size` input bytes) is not an answer, or None.

    A JSON list of at most `IDS_PER_BYTE * size + IDS_EXTRA` plain integers (`1.0`, `"1"`,
    `true` are not ids), each in 0 .. 2^31-1 and below the engine's own `n_tokens` when it
    declared one. The length is checked first: a long list is refused before it is walked.
    """
    if not isinstance(ids, list):
        return f"ids is {describe(ids)}, not a list of ints"
    cap = IDS_PER_BYTE * size + IDS_EXTRA
    if len(ids) > cap:
        return (f"{len(ids):,} ids for an input of {size:,} bytes: over the protocol's cap of {cap:,} "
                f"({IDS_PER_BYTE} per input byte + {IDS_EXTRA})")
    if not set(map(type, ids)) <= {int}:  # a bool's type is not int
        index, item = next((i, v) for i, v in enumerate(ids) if type(v) is not int)
        return f"ids[{index}] is {describe(item)}, not an int"
    if not ids:
        return None
    bound = TOKEN_LIMIT if n_tokens is None else min(n_tokens, TOKEN_LIMIT)
    if min(ids) < 0:
        index = next(i for i, v in enumerate(ids) if v < 0)
        return f"ids[{index}] is the token id {ids[index]}: a token id is never negative"
    if max(ids) >= bound:
        index = next(i for i, v in enumerate(ids) if v >= bound)
        where = f"the engine's n_tokens {n_tokens:,}" if bound == n_tokens else "2^31 (llama_token is int32)"
        return f"ids[{index}] is the token id {_number_text(ids[index])}: not below {where}"
    return None


def _number_text(value: int) -> str:
    return str(value) if value.bit_length() < 256 else f"about 2^{value.bit_length() - 1}"


def clean_text(value: object, limit: int | None = None) -> str:
    """`value` as a str that is valid Unicode (a lone surrogate shown as `\\udXXX`), cut to `limit`."""
    text = value if isinstance(value, str) else str(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if limit is None else text[:limit]


def error_text(obj: object) -> tuple[str, str]:
    """A protocol error object as (`"Type: message"`, traceback), every string valid Unicode."""
    if not isinstance(obj, dict):
        return f"ProtocolError: expected an error object, got {describe(obj)}", ""
    name = obj.get("type", "Error")
    return (f"{clean_text(name if isinstance(name, str) else describe(name))}: "
            f"{clean_text(obj.get('message', ''))}", clean_text(obj.get("traceback", "")))


def column(field: str, values: object, start: int, count: int) -> list:
    """One field of a `vocab` slice (tokens `start` .. `start + count - 1`), every value checked."""
    if not isinstance(values, list) or len(values) != count:
        got = f"{len(values):,} values" if isinstance(values, list) else describe(values)
        raise ReplyError(f"vocab field {field!r}: expected {count:,} values (tokens {start:,}..), got {got}")
    read = _READERS[field]
    out = []
    for offset, value in enumerate(values):
        try:
            out.append(read(value))
        except (ReplyError, TypeError, binascii.Error) as exc:
            raise ReplyError(f"vocab field {field!r} of token {start + offset}: {exc}") from None
    return out


def _bytes(value: object) -> bytes:
    if not isinstance(value, str):
        raise ReplyError(f"{describe(value)} is not a base64 string")
    return unb64(value)


def _score(value: object) -> float:
    """A float32 score: a JSON number within float32's range, or "NaN", "Infinity", "-Infinity"."""
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    if isinstance(value, Bare):
        raise ReplyError(f"{value!r} is not JSON: a non-finite score is sent as the string \"{value.name}\"")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReplyError(f"{describe(value)} is not a number")
    if not -FLOAT32_LIMIT < value < FLOAT32_LIMIT:  # an int of any size compares; a float from 1e999 is inf
        shown = _number_text(value) if isinstance(value, int) else repr(value)
        raise ReplyError(f"{shown} is not a float32")
    return float(value)


def _attr(value: object) -> int:
    if type(value) is not int:
        raise ReplyError(f"{describe(value)} is not an int")
    if not 0 <= value < TOKEN_LIMIT:
        raise ReplyError(f"{_number_text(value)} is not an attribute (llama_token_attr bits, 0 .. 2^31-1)")
    return value


def _flag(value: object) -> bool:
    if type(value) is not bool:
        raise ReplyError(f"{describe(value)} is not true or false")
    return value


_READERS = {**dict.fromkeys(BYTE_FIELDS, _bytes), "score": _score, "attr": _attr, "eog": _flag, "control": _flag}


# --- hello's info ---------------------------------------------------------------------------------

def n_tokens_problem(value: object) -> str | None:
    """Why `value` is not a hello's `info.n_tokens` (an int, 0 .. `MAX_TOKENS`), or None."""
    if type(value) is not int or value < 0:
        return f"info.n_tokens is {describe(value)}, not a count"
    if value > MAX_TOKENS:
        return (f"info.n_tokens is {_number_text(value)}: over the protocol's cap of {MAX_TOKENS:,} tokens "
                "(2^24)")
    return None


def unicode_text(value: object, name: str) -> str:
    """A string of `info` (`vocab_type`, `pre`): a JSON string that is valid Unicode."""
    if not isinstance(value, str):
        raise ReplyError(f"{name} is {describe(value)}, not a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ReplyError(f"{name} is not valid Unicode: a lone surrogate U+{ord(value[exc.start]):04X} "
                         f"at index {exc.start}") from None
    return value


def checked_info(info: dict, caps: frozenset[str], special_names: tuple[str, ...],
                 flag_names: tuple[str, ...]) -> dict:
    """`info` as the vocabulary record takes it: n_tokens, vocab_type and pre, the special ids
    (ints in 0 .. 2^31-1, or null) and flags (true or false), each of an offered capability."""
    out = {k: info[k] for k in ("n_tokens",) if k in info}
    if "vocab_info" in caps:
        out["vocab_type"] = unicode_text(info.get("vocab_type"), "info.vocab_type")
        out["pre"] = unicode_text(info.get("pre"), "info.pre")
    if "specials" in caps:
        specials = info.get("specials")
        if specials is None:
            specials = {}
        if not isinstance(specials, dict):
            raise ReplyError(f"info.specials is {describe(specials)}, not an object")
        out["specials"] = {name: _special(specials.get(name), name) for name in special_names}
        for name in flag_names:
            if type(info.get(name)) is not bool:
                raise ReplyError(f"info.{name} is {describe(info.get(name))}, not true or false")
            out[name] = info[name]
    return out


def _special(value: object, name: str) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise ReplyError(f"info.specials.{name} is {describe(value)}, not an int or null")
    if not 0 <= value < TOKEN_LIMIT:
        raise ReplyError(f"info.specials.{name} is the token id {_number_text(value)}: not in 0 .. 2^31-1")
    return value
