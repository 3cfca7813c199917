"""A seeded input generator for the BPE differential tests.

Deterministic for a given seed (so a failure replays), and aimed at what
separates BPE pre-tokenizers: letters, digits and marks of many scripts,
every kind of whitespace, contractions in both cases, punctuation runs,
Unicode 15/15.1 code points Python 3.11 does not know, special-token texts,
long runs, and invalid UTF-8.  It never produces a code point above U+10FFFF
(llama.cpp aborts on those; tests/tokenizer/test_bpe.py checks that case on its own).
"""

from __future__ import annotations

import random

WORDS = (
    "Hello", "world", "the", "don't", "I'M", "you'll", "WE'VE", "she'd", "it's", "'s", "'T", "'Ll",
    "naïve", "café", "Привет", "мир", "Ελληνικά", "日本語", "中文字符", "한국어", "ไทย", "हिन्दी",
    "العربية", "עברית", "🦙", "👍🏽", "e\u0301", "a\u0308\u0323", "ﬁ", "\u2126", "\u212a", "ǅ", "µ",
    "١٢٣", "½", "²", "𝒳", "𐐀", "𝟘", "ℌ", "Ⅻ", "〇", "‐", "—", "…", "™", "€", "$", "+",
    "\u200b", "\u200d", "\ufeff", "\u00ad", "\u0300", "\U0001e030", "\U0002ebf0", "\u2ffc",
    "\u0897", "\u1c89", "𠀀", "龥", "ヿ", "ｱ", "ＡＢ", "０１", "IMGIMGABZ", "<sentinel:12>",
    "ab1234567", "3.14159", "1,000,000", "<dna>acgtN</dna>", "<dna>ACG",
)
SPACES = (
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\v", "\f", " \n ", "\u3000", "\u00a0",
    "\u0085", "\u2028", "\u1680", "\u2009", "\u202f", "\x1c", "\x1f", "\x00", "\x7f",
)
PUNCT = tuple("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + (
    "...", "?!", "。", "，", "、", "！", "「", "」", "«", "»", "¿", "¡")
INVALID = (
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xff",
    b"\xfe", b"\xf0\x9f", b"\xf0\x80\x80\x80", b"\xe0\x80\x80", b"\xc1\xbf", b"\xf8\x88\x80\x80\x80",
    b"\xf4\x8f\xbf\xbf",
)
RUN_SEEDS = ("a", " ", "1", "\n", "!", "é", "\t", "ab")


def random_char(rng: random.Random) -> str:
    """Any scalar value, weighted towards the BMP's scripts."""
    while True:
        r = rng.random()
        if r < 0.5:
            cp = rng.randrange(0x80, 0x3000)
        elif r < 0.8:
            cp = rng.randrange(0x3000, 0x10000)
        else:
            cp = rng.randrange(0x10000, 0x110000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def _part(rng: random.Random, specials: list[bytes]) -> bytes:
    r = rng.random()
    if r < 0.35:
        return rng.choice(WORDS).encode()
    if r < 0.55:
        return rng.choice(SPACES).encode()
    if r < 0.68:
        return "".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 3))).encode()
    if r < 0.76:
        return str(rng.randrange(10 ** rng.randint(1, 12))).encode()
    if r < 0.86:
        return "".join(random_char(rng) for _ in range(rng.randint(1, 4))).encode()
    if r < 0.92 and specials:
        return rng.choice(specials)
    if r < 0.97:
        return rng.choice(INVALID)
    return (rng.choice(RUN_SEEDS) * rng.randint(5, 40)).encode()


def generate(rng: random.Random, specials: list[bytes] = (), *, max_parts: int = 12) -> bytes:
    """One input: empty now and then, else 1..max_parts parts joined."""
    if rng.random() < 0.02:
        return b""
    return b"".join(_part(rng, list(specials)) for _ in range(rng.randint(1, max_parts)))


def inputs(seed: str, n: int, specials: list[bytes] = ()) -> list[bytes]:
    """`n` inputs for `seed` (a string, so each vocabulary gets its own stream)."""
    rng = random.Random(seed)
    return [generate(rng, specials) for _ in range(n)]
