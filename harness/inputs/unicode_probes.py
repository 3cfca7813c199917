"""Code points from inside llama.cpp's Unicode tables: range interiors and what Python cannot name.

Two kinds of table bug hide from inputs picked by hand or drawn through
Python's `unicodedata`:

- a UnicodeData `<..., First>`/`<..., Last>` pair (Hangul syllables, every CJK
  extension, Tangut, the private use planes) expanded wrongly: only its two
  endpoints, or only the ranges a generator knew by name. `FIRST_LAST_RANGES`
  lists the pairs of the UCD llama.cpp's `unicode-data.cpp` was generated from
  (Unicode 15.1); `range_samples()` takes the first, last, middle and a seeded
  random code point of each;
- a code point llama.cpp's tables class differently from Python's
  `unicodedata` (Python 3.11 carries Unicode 14.0, so all of 15.0 and 15.1 is
  unassigned there: CJK Extensions H and I, Kawi, Nag Mundari, new emoji...).
  `differing_codepoints()` finds them by comparing the two tables (category
  flag, whitespace, lower-case map), and `block_samples()` keeps up to four per
  block of 128 code points. The set depends on the running Python's
  `unicodedata`: the goldens are recorded on Python 3.11.

`probes()` turns both into boundary probes (harness.inputs.boundaries), and
`table_codepoints()` gives the fuzzer's character strategies (harness.inputs.strategies)
llama.cpp's classes instead of Python's where the two differ.
"""

from __future__ import annotations

import random
import unicodedata
from functools import cache

import numpy as np

from tokenizer import unicode as uni

# UnicodeData.txt 15.1's First/Last pairs: (name, first, last). llama.cpp's generator
# (scripts/gen-unicode-data.py) gives every code point in between the pair's flags.
FIRST_LAST_RANGES = (
    ("CJK Ideograph Extension A", 0x3400, 0x4DBF),
    ("CJK Ideograph", 0x4E00, 0x9FFF),
    ("Hangul Syllable", 0xAC00, 0xD7A3),
    ("Non Private Use High Surrogate", 0xD800, 0xDB7F),
    ("Private Use High Surrogate", 0xDB80, 0xDBFF),
    ("Low Surrogate", 0xDC00, 0xDFFF),
    ("Private Use", 0xE000, 0xF8FF),
    ("Tangut Ideograph", 0x17000, 0x187F7),
    ("Tangut Ideograph Supplement", 0x18D00, 0x18D08),
    ("CJK Ideograph Extension B", 0x20000, 0x2A6DF),
    ("CJK Ideograph Extension C", 0x2A700, 0x2B739),
    ("CJK Ideograph Extension D", 0x2B740, 0x2B81D),
    ("CJK Ideograph Extension E", 0x2B820, 0x2CEA1),
    ("CJK Ideograph Extension F", 0x2CEB0, 0x2EBE0),
    ("CJK Ideograph Extension I", 0x2EBF0, 0x2EE5D),
    ("CJK Ideograph Extension G", 0x30000, 0x3134A),
    ("CJK Ideograph Extension H", 0x31350, 0x323AF),
    ("Plane 15 Private Use", 0xF0000, 0xFFFFD),
    ("Plane 16 Private Use", 0x100000, 0x10FFFD),
)
BLOCK_BITS = 7          # a "block" is 128 code points: every differing stretch of the UCD is sampled
PER_BLOCK = 4
SEED = "gguf-parity unicode probes"

# Python's general category (its first letter, Cn apart) -> llama.cpp's category flag.
_FLAG_OF_CATEGORY = {"C": uni.CONTROL, "L": uni.LETTER, "M": uni.ACCENT_MARK, "N": uni.NUMBER,
                     "P": uni.PUNCTUATION, "S": uni.SYMBOL, "Z": uni.SEPARATOR}
_CLASS_BITS = uni.MASK_CATEGORIES | uni.WHITESPACE


def is_surrogate(cpt: int) -> bool:
    return 0xD800 <= cpt < 0xE000


# --- Python's view ---------------------------------------------------------------------------

@cache
def python_categories() -> tuple[tuple[str, ...], np.ndarray]:
    """Python's general categories (its `unicodedata` version): the names, and each code point's index in them."""
    every = list(map(unicodedata.category, map(chr, range(uni.MAX_CODEPOINTS))))
    names = tuple(sorted(set(every)))
    index = {name: i for i, name in enumerate(names)}
    return names, np.fromiter(map(index.__getitem__, every), dtype=np.uint8, count=len(every))


def _python_has(categories: set[str]) -> np.ndarray:
    """For each code point: is its Python category one of `categories`?"""
    names, codes = python_categories()
    return np.isin(codes, [i for i, name in enumerate(names) if name in categories])


@cache
def python_flags() -> np.ndarray:
    """Python's `unicodedata` and `str.isspace` as llama.cpp's category and whitespace bits."""
    names, codes = python_categories()
    by_code = np.array([uni.UNDEFINED if cat == "Cn" else _FLAG_OF_CATEGORY[cat[0]] for cat in names], dtype=np.uint16)
    flags = by_code[codes]
    spaces = np.fromiter(map(str.isspace, map(chr, range(uni.MAX_CODEPOINTS))), dtype=bool, count=uni.MAX_CODEPOINTS)
    flags[spaces] |= uni.WHITESPACE
    return flags


def _python_lower(cpt: int) -> int:
    """Python's lower case of one code point, or -1 when it is longer (U+0130 -> "i̇")."""
    lower = chr(cpt).lower()
    return ord(lower) if len(lower) == 1 else -1


@cache
def differing_codepoints() -> tuple[int, ...]:
    """Code points whose class (category flag, whitespace) or lower-case differs between the two tables."""
    ours = uni.flags_array() & _CLASS_BITS
    found = set(np.nonzero(ours != python_flags())[0].tolist())
    cased = set(uni.tables()["lowercase"][0::2])
    cased.update(c for c in range(uni.MAX_CODEPOINTS) if not is_surrogate(c) and chr(c).lower() != chr(c))
    found.update(c for c in cased if not is_surrogate(c) and _python_lower(c) != uni.tolower(c))
    return tuple(sorted(found))


# --- samples ---------------------------------------------------------------------------------

def _spread(cpts: list[int], rng: random.Random, most: int) -> list[int]:
    """First, last, middle and seeded random ones of `cpts` (sorted), at most `most`, no repeats."""
    if len(cpts) <= most:
        return cpts
    picked = dict.fromkeys([cpts[0], cpts[-1], cpts[len(cpts) // 2]])
    while len(picked) < most:
        picked[cpts[rng.randrange(1, len(cpts) - 1)]] = None
    return sorted(picked)


def range_samples() -> dict[str, list[int]]:
    """Each First/Last range's first, last, middle and a seeded random interior code point."""
    out = {}
    for name, first, last in FIRST_LAST_RANGES:
        rng = random.Random(f"{SEED}: {name}")
        out[name] = sorted({first, last, (first + last) // 2, rng.randint(first + 1, last - 1)})
    return out


def blocks() -> dict[int, list[int]]:
    """The differing code points by block (the block's first code point -> its code points)."""
    out: dict[int, list[int]] = {}
    for cpt in differing_codepoints():
        out.setdefault(cpt >> BLOCK_BITS << BLOCK_BITS, []).append(cpt)
    return out


def block_samples() -> dict[int, list[int]]:
    """Up to `PER_BLOCK` differing code points of each block: first, last, middle, seeded random."""
    return {start: _spread(cpts, random.Random(f"{SEED}: {start:#x}"), PER_BLOCK)
            for start, cpts in blocks().items()}


def sampled_codepoints() -> list[int]:
    """Every sampled code point, once: the range samples, then the block samples."""
    found = [c for cpts in range_samples().values() for c in cpts]
    found += [c for cpts in block_samples().values() for c in cpts]
    return list(dict.fromkeys(found))


def probe(cpt: int) -> str | bytes:
    """One code point after a letter and before a contraction, and after a digit.

    `a{c}'s` tells a letter from any other class (the letter run takes it, and
    `'s` is a contraction only after it); `1{c}` tells a number. A surrogate is
    given as the raw bytes llama.cpp's lenient decoder reads as that code point.
    """
    if is_surrogate(cpt):
        raw = chr(cpt).encode("utf-8", "surrogatepass")
        return b"a" + raw + b"'s 1" + raw
    ch = chr(cpt)
    return f"a{ch}'s 1{ch}"


def probes() -> list[str | bytes]:
    """The boundary probes of every sampled code point (text first, surrogate bytes last)."""
    cpts = sampled_codepoints()
    return [probe(c) for c in cpts if not is_surrogate(c)] + [probe(c) for c in cpts if is_surrogate(c)]


# --- for the fuzzer --------------------------------------------------------------------------

@cache
def table_codepoints(categories: tuple[str, ...]) -> np.ndarray:
    """Code points of the general `categories` (all of one major class), as llama.cpp's tables class them.

    A code point counts when llama.cpp gives it that class's flag and Python either
    agrees on the exact category or cannot name it (Cn): so the 15.0/15.1 letters,
    digits and marks Python 3.11 lacks are drawn too, and a code point whose class
    differs goes by llama.cpp's. Surrogates are left out.
    """
    majors = {cat[0] for cat in categories}
    if len(majors) != 1 or not majors <= set(_FLAG_OF_CATEGORY):
        raise ValueError(f"categories {categories!r} must share one major class of {sorted(_FLAG_OF_CATEGORY)}")
    flag = _FLAG_OF_CATEGORY[majors.pop()]
    ours = (uni.flags_array() & uni.MASK_CATEGORIES) == flag
    picked = ours & _python_has({*categories, "Cn"})
    picked[0xD800:0xE000] = False
    return np.nonzero(picked)[0].astype(np.int64)
