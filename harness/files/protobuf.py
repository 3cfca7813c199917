"""Protocol Buffers' wire format, read field by field: enough to read a SentencePiece `.model`
without the `sentencepiece` library (the converter's piece count, the GGUF-key checks)."""

from __future__ import annotations

import struct
from typing import Any


class ProtobufError(ValueError):
    """Bytes that are not a whole protobuf message; the message names the byte offset."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError(f"truncated varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


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
