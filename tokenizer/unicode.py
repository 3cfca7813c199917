"""llama.cpp's Unicode tables and UTF-8 decoding, reproduced exactly.

The character classes here come from llama.cpp's own `unicode-data.cpp`
(lifted into `data/unicode_data.json` by `tools/gen_unicode.py`), not from
Python's `unicodedata`: the pinned llama.cpp was generated from a newer UCD
than Python 3.11 carries, and the pre-tokenizers must see the same letters,
digits and marks llama.cpp sees.

Also here: llama.cpp's lenient UTF-8 decoder (`unicode_cpts_from_utf8`),
which accepts overlong forms, surrogates and lead bytes up to 0xF7, and turns
each byte it cannot decode into U+FFFD; its lower-casing and NFD tables; and
the GPT-2 byte <-> character mapping.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

# raised here; LlamaCppAbort is re-exported for callers that catch it next to these functions
from .errors import LlamaCppAbort as LlamaCppAbort
from .errors import UnencodableCodepoint

MAX_CODEPOINTS = 0x110000

# unicode_cpt_flags bits (llama.cpp unicode.h)
UNDEFINED = 0x0001
NUMBER = 0x0002
LETTER = 0x0004
SEPARATOR = 0x0008
ACCENT_MARK = 0x0010
PUNCTUATION = 0x0020
SYMBOL = 0x0040
CONTROL = 0x0080
MASK_CATEGORIES = 0x00FF
WHITESPACE = 0x0100
LOWERCASE = 0x0200
UPPERCASE = 0x0400
NFD = 0x0800

# The single character llama.cpp's `unicode_regex_split` writes for each
# non-ASCII code point in its "collapsed" text, by category.
COLLAPSED_WHITESPACE = 0x0B
COLLAPSED_OTHER = 0xD0
COLLAPSED_BY_CATEGORY = {
    NUMBER: 0xD1,
    LETTER: 0xD2,
    PUNCTUATION: 0xD3,
    ACCENT_MARK: 0xD4,
    SYMBOL: 0xD5,
}
# Our own extra classes for the Kimi-K2 splitter, which also needs Han.
COLLAPSED_HAN_LETTER = 0xD6
COLLAPSED_HAN_OTHER = 0xD7

# unicode_cpt_is_han(): fixed ranges, independent of the flag table.
HAN_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0x2CEB0, 0x2EBEF), (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


@cache
def tables() -> dict[str, Any]:
    """The raw tables, as flat integer lists (see tools/gen_unicode.py)."""
    text = resources.files("tokenizer").joinpath("data", "unicode_data.json").read_text()
    found: dict[str, Any] = json.loads(text)
    return found


@cache
def flags_array() -> np.ndarray:
    """uint16 flags for every code point 0..0x10FFFF, as llama.cpp computes them."""
    data = tables()
    ranges = np.array(data["ranges_flags"], dtype=np.int64).reshape(-1, 2)
    starts, values = ranges[:, 0], ranges[:, 1]
    if starts[0] != 0 or starts[-1] != MAX_CODEPOINTS:
        raise ValueError("unicode_data.json: ranges must start at 0 and end at 0x110000")
    flags = np.repeat(values[:-1].astype(np.uint16), np.diff(starts))
    flags[np.array(data["whitespace"], dtype=np.int64)] |= WHITESPACE
    lower = np.array(data["lowercase"], dtype=np.int64).reshape(-1, 2)
    flags[lower[:, 1]] |= LOWERCASE
    upper = np.array(data["uppercase"], dtype=np.int64).reshape(-1, 2)
    flags[upper[:, 1]] |= UPPERCASE
    nfd = np.array(data["ranges_nfd"], dtype=np.int64).reshape(-1, 3)
    flags[nfd[:, 2]] |= NFD
    return flags


def cpt_flags(cpt: int) -> int:
    """`unicode_cpt_flags_from_cpt`: UNDEFINED beyond the table."""
    return int(flags_array()[cpt]) if 0 <= cpt < MAX_CODEPOINTS else UNDEFINED


def is_han(cpt: int) -> bool:
    """`unicode_cpt_is_han`."""
    return any(lo <= cpt <= hi for lo, hi in HAN_RANGES)


def _collapse_base() -> np.ndarray:
    flags = flags_array()
    out = np.full(MAX_CODEPOINTS, COLLAPSED_OTHER, dtype=np.uint8)
    category = flags & MASK_CATEGORIES
    for cat, byte in COLLAPSED_BY_CATEGORY.items():
        out[category == cat] = byte
    out[(flags & WHITESPACE) != 0] = COLLAPSED_WHITESPACE
    out[:128] = np.arange(128, dtype=np.uint8)
    return out


@cache
def collapse_table() -> np.ndarray:
    """Code point -> the byte llama.cpp's collapsed text holds for it."""
    return _collapse_base()


@cache
def collapse_table_han() -> np.ndarray:
    """As `collapse_table`, with Han code points given classes of their own."""
    out = _collapse_base().copy()
    for lo, hi in HAN_RANGES:
        letters = (flags_array()[lo:hi + 1] & LETTER) != 0
        out[lo:hi + 1] = np.where(letters, COLLAPSED_HAN_LETTER, COLLAPSED_HAN_OTHER)
    return out


def codepoints(text: str) -> np.ndarray:
    """The code points of `text` (which may hold lone surrogates) as uint32."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


def collapse(text: str, *, han: bool = False) -> str:
    """One character per code point: ASCII kept, the rest replaced by class.

    This is llama.cpp's "collapsed" text, on which its std::regex fallback
    runs; `han=True` adds the Han classes the Kimi-K2 splitter needs.
    """
    if text.isascii():
        return text
    table = collapse_table_han() if han else collapse_table()
    cps = codepoints(text)
    return str(table[np.minimum(cps, MAX_CODEPOINTS - 1)].tobytes().decode("latin-1"))


@cache
def _lower_map() -> dict[int, int]:
    pairs = tables()["lowercase"]
    return dict(zip(pairs[0::2], pairs[1::2]))


def tolower(cpt: int) -> int:
    """`unicode_tolower`: one code point to one, per llama.cpp's table."""
    return _lower_map().get(cpt, cpt)


@cache
def _nfd_ranges() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    triples = np.array(tables()["ranges_nfd"], dtype=np.int64).reshape(-1, 3)
    return triples[:, 0], triples[:, 1], triples[:, 2]


def nfd(cpts: list[int]) -> list[int]:
    """`unicode_cpts_normalize_nfd`: llama.cpp's one-to-one "NFD" (base letter only)."""
    firsts, lasts, bases = _nfd_ranges()
    out = []
    for cpt in cpts:
        i = int(np.searchsorted(firsts, cpt, side="right")) - 1
        out.append(int(bases[i]) if i >= 0 and cpt <= lasts[i] else cpt)
    return out


# --- UTF-8, the llama.cpp way -------------------------------------------------

def _decode_one(data: bytes, i: int) -> tuple[int, int] | None:
    """(code point, length) of the sequence at `i`, or None where llama.cpp gives up."""
    lead = data[i]
    if lead < 0x80:
        return lead, 1
    if not lead & 0x40:
        return None
    for size, mask in ((2, 0x1F), (3, 0x0F), (4, 0x07)):
        if not lead & (0x80 >> size):
            tail = data[i + 1:i + size]
            if len(tail) < size - 1 or any(b & 0xC0 != 0x80 for b in tail):
                return None
            cpt = lead & mask
            for b in tail:
                cpt = (cpt << 6) | (b & 0x3F)
            return cpt, size
    return None


_UTF8_LEN = (1,) * 12 + (2, 2, 3, 4)  # sequence length by the lead byte's high nibble


def utf8_chars(data: bytes) -> list[bytes]:
    """`data` cut into characters by lead byte alone, as llama.cpp's BPE and SPM sessions do.

    No validation: a continuation or invalid lead byte stands alone, and a cut
    sequence at the end keeps what is there.
    """
    try:
        return [c.encode("utf-8") for c in data.decode("utf-8")]
    except UnicodeDecodeError:
        pass
    out, pos, n = [], 0, len(data)
    while pos < n:
        step = _UTF8_LEN[data[pos] >> 4]
        out.append(data[pos:pos + step])
        pos += step
    return out


def decode_lenient(data: bytes) -> str:
    """`unicode_cpts_from_utf8`: bytes -> code points, never failing.

    Valid UTF-8 decodes as usual.  Otherwise each undecodable byte becomes
    U+FFFD, while overlong forms and surrogates decode to their value.  Code
    points above U+10FFFF raise `UnencodableCodepoint` (llama.cpp aborts).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    i, n = 0, len(data)
    while i < n:
        step = _decode_one(data, i)
        if step is None:
            out.append("\ufffd")
            i += 1
            continue
        cpt, size = step
        if cpt >= MAX_CODEPOINTS:
            raise UnencodableCodepoint(
                f"bytes {data[i:i + size].hex(' ')} at offset {i} decode to code point "
                f"{cpt:#x}, beyond U+10FFFF; llama.cpp aborts on this input"
            )
        out.append(chr(cpt))
        i += size
    return "".join(out)


def encode(text: str) -> bytes:
    """`unicode_cpt_to_utf8` over a string: surrogates encoded as three bytes."""
    return text.encode("utf-8", "surrogatepass")


# --- GPT-2 byte-level mapping ---------------------------------------------------

@cache
def byte_to_char() -> tuple[str, ...]:
    """`unicode_byte_to_utf8`: byte value -> the printable character standing for it."""
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    mapping = {b: chr(b) for b in kept}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return tuple(mapping[b] for b in range(256))


@cache
def char_to_byte() -> dict[str, int]:
    """`unicode_utf8_to_byte`: the inverse of `byte_to_char`."""
    return {ch: b for b, ch in enumerate(byte_to_char())}


@cache
def byte_translation() -> dict[int, str]:
    """The `str.translate` table of `byte_encode`: byte value -> its stand-in character."""
    return dict(enumerate(byte_to_char()))


def byte_encode(word: bytes) -> str:
    """GPT-2 byte-level encoding of a word: each byte -> its stand-in character."""
    return word.decode("latin-1").translate(byte_translation())
