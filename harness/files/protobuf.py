"""Protocol Buffers' wire format, read field by field: enough to read a SentencePiece `.model`
without the `sentencepiece` library (the converter's piece count, the GGUF-key checks)."""

from __future__ import annotations

import struct
from typing import Any

MAX_VARINT_BYTES = 10  # a 64-bit value takes at most 10 bytes of 7 bits


class ProtobufError(ValueError):
    """Bytes that are not a whole protobuf message; the message names the byte offset."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and where it ends; longer than 10 bytes is refused (no 64-bit value is),
    so a run of 0xFF costs 10 steps, not a number that grows with the file."""
    start, value = pos, 0
    for shift in range(0, 7 * MAX_VARINT_BYTES, 7):
        if pos >= len(buf):
            raise ProtobufError(f"truncated varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise ProtobufError(f"varint at byte {start} is longer than {MAX_VARINT_BYTES} bytes")


def fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """A message's (field number, wire type, value) list, in order: a varint as int, a
    length-delimited value as bytes, a 32-bit value as float, a 64-bit one as its 8 bytes."""
    out, pos = [], 0
    while pos < len(buf):
        at = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire in (1, 2, 5):
            if wire == 2:
                size, pos = _varint(buf, pos)
            else:
                size = 8 if wire == 1 else 4
            if pos + size > len(buf):
                raise ProtobufError(f"field {number} at byte {at}: {size} bytes announced, {len(buf) - pos} left")
            value, pos = buf[pos:pos + size], pos + size
            if wire == 5:
                value = struct.unpack("<f", value)[0]
        else:
            raise ProtobufError(f"wire type {wire} at byte {at}")
        out.append((number, wire, value))
    return out
