"""Each token's bytes as llama.cpp's `token_to_piece` spells it, from the GGUF's text alone.

A live run asks llama.cpp for every piece; a golden replay has only the GGUF and llama.cpp's recorded
attributes. So that both draw the same pieces (and name a difference by the same signature,
`harness.compare.signature`), the replay spells each token from its text by the rules of the GGUF
format, which are facts of the file, not of any engine:

- special tokens (CONTROL, USER_DEFINED, UNKNOWN) are their text;
- byte tokens (`<0x0A>`, attribute BYTE) are that byte;
- byte-level BPE (`bpe`) writes each byte as one character of GPT-2's byte-to-unicode alphabet (a
  character outside it is spelled `[UNK_BYTE_0x<its UTF-8 in hex><the token's text>]`, as llama.cpp does),
  except the pre-tokenizers that escape whitespace (`ESCAPING_PRE`), which write a space as U+2581, as
  SentencePiece-style vocabularies (`spm`, `ugm`, `wpm`) do;
- in those, a token neither normal, byte nor special (unused, undefined) is spelled empty;
- `plamo2` and the rest: the text (RWKV's escapes are not undone: its pieces are for display).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

CONTROL, USER_DEFINED, UNKNOWN, NORMAL, BYTE = 1 << 3, 1 << 4, 1 << 0, 1 << 2, 1 << 5
ESCAPING_PRE = frozenset({"gemma4", "granite-embed-multi-311m", "sarvam-moe"})  # BPE that writes spaces as U+2581
_BYTE_TOKEN = re.compile(rb"<0x([0-9A-Fa-f]{2})>")
ESCAPED_SPACE = "\u2581".encode()


@cache
def _byte_level() -> dict[str, int]:
    """GPT-2's byte-to-unicode alphabet, inverted: character -> byte."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


def spell(text: bytes, attr: int, vocab_type: str, pre: str = "") -> bytes:
    """One token's piece (special tokens as their text) from its GGUF text and attribute."""
    if attr & (CONTROL | USER_DEFINED | UNKNOWN):
        return text
    if vocab_type not in ("spm", "ugm", "wpm", "bpe"):
        byte = _byte(text) if attr & BYTE else None
        return text if byte is None else byte
    if attr & BYTE:
        return _byte(text) or b""
    if not attr & NORMAL:
        return b""
    if vocab_type != "bpe" or pre in ESCAPING_PRE:
        return text.replace(ESCAPED_SPACE, b" ")
    return _byte_level_decode(text)


def _byte(text: bytes) -> bytes | None:
    match = _BYTE_TOKEN.fullmatch(text)
    return bytes([int(match.group(1), 16)]) if match else None


def _byte_level_decode(text: bytes) -> bytes:
    table = _byte_level()
    out = bytearray()
    for ch in text.decode("utf-8", "replace"):
        if ch in table:
            out.append(table[ch])
        else:
            out += b"[UNK_BYTE_0x" + ch.encode("utf-8").hex().encode() + text + b"]"
    return bytes(out)


def spelled_pieces(texts: Sequence[bytes], attrs: Sequence[int], vocab_type: str, pre: str = "") -> list[bytes]:
    """Every token's piece (`spell`), in id order."""
    return [spell(t, int(attrs[i]) if i < len(attrs) else 0, vocab_type, pre) for i, t in enumerate(texts)]
