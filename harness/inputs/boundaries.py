"""Boundary inputs derived from the tokenizer's rules, not hoped for from fuzzing.

Hand-picked corpora and uniform fuzzing under-sample the exact places where two
tokenizers part: a punctuation class missing one ASCII character, an uppercase
contraction, a digit run of four in Devanagari. Here the inputs are enumerated
from the rules themselves:

- per pre-tokenizer regex (`generic_probes`): every printable ASCII character
  alone and before/after letters, digits and spaces; every contraction tail
  in every case mix after ASCII and non-ASCII letters; digit runs of 1 to 5 in
  every script `\\p{N}` covers; whitespace runs of every kind before letters,
  digits and the end; one character of every Unicode general category; the
  edges of the CJK ranges; NFD/lower-case table rows; invalid UTF-8;
- per vocabulary (`vocab_probes`): every special and user-defined token alone,
  glued and spaced (with tabs and newlines for lstrip/rstrip), tokens that
  start or end with a space or U+2581, the longest tokens, byte-fallback
  triggers;
- per engine (`table_probes`): rows of the normaliser tables (llama.cpp's NFD
  and lower-case tables; the UGM charsmap's keys), every row in the full set;
- from inside llama.cpp's Unicode tables (`harness.inputs.unicode_probes`): the
  first, last, middle and a seeded random code point of every UnicodeData
  First/Last range (Hangul syllables, every CJK extension, Tangut, the private
  use planes), and up to four code points per block of those whose class
  differs between llama.cpp's tables and Python's `unicodedata` (what Python
  cannot name), each after a letter, before `'s` and after a digit.

`cases(model, level)` gives them as corpus cases. `level="slice"` packs the
probes into a few dozen long cases: it joins the default corpora (so the main
job runs it; goldens change only when re-recorded). `level="full"` gives one
case per few probes and every table row: the nightly session's
(`GGUF_PARITY_BOUNDARIES=full`). `boundary_inputs()` is the same material as
a Hypothesis strategy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

from ..environment_vars import BOUNDARIES
from ..models.model import Model, as_model
from .cases import make_case, spread

LEVEL_ENV = BOUNDARIES.name   # slice (default), full or off

PRINTABLE_ASCII = "".join(chr(c) for c in range(0x21, 0x7F))
ASCII_WHITESPACE = " \t\n\r\x0b\x0c"
# Whitespace to Python's str.isspace / str.split but not to llama.cpp (unicode.cpp's table):
# the information separators U+001C..U+001F. A re-implementation that splits with Python's
# whitespace cuts `a\x1cb` where llama.cpp's WPM drops the character (BPE: a symbol of its own).
PYTHON_ONLY_WHITESPACE = "\x1c\x1d\x1e\x1f"
CONTRACTION_TAILS = ("s", "t", "re", "ve", "m", "ll", "d")
# Zero of each decimal-digit script \p{N} covers, and No/Nl samples.
DIGIT_ZEROS = (0x30, 0x660, 0x6F0, 0x966, 0x9E6, 0xE50, 0xFF10, 0x1D7CE, 0x104A0)
OTHER_NUMBERS = "²³¹¼½¾ⅫⅧ①⑳〇"
WHITESPACE_KINDS = (" ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\xa0", "\u1680",
                    "\u2000", "\u2009", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000")
# One representative per general category (Cs as raw bytes in `invalid_utf8_probes`).
CATEGORIES = {
    "Lu": "Ä", "Ll": "ß", "Lt": "ǅ", "Lm": "ʰ", "Lo": "中", "Mn": "\u0301", "Mc": "\u0903",
    "Me": "\u20dd", "Nd": "٣", "Nl": "Ⅻ", "No": "²", "Pc": "‿", "Pd": "—", "Ps": "「",
    "Pe": "」", "Pi": "«", "Pf": "»", "Po": "¡", "Sm": "∑", "Sc": "€", "Sk": "˜", "So": "©",
    "Zs": "\u2003", "Zl": "\u2028", "Zp": "\u2029", "Cc": "\x01", "Cf": "\u200b",
    "Co": "\ue000", "Cn": "\U000e0080",
}
# Edges of the CJK ranges of WPM's is_chinese_char and unicode.cpp's Han ranges.
CJK_EDGES = (0x3400, 0x4DBF, 0x4E00, 0x9FFF, 0xF900, 0xFAFF, 0x20000, 0x2A6DF, 0x2A700,
             0x2B73F, 0x2B740, 0x2B81F, 0x2B820, 0x2B91F, 0x2B920, 0x2CEAF, 0x2F800, 0x2FA1F)
INVALID_UTF8 = (b"\x80", b"\xc0\x80", b"\xc1\xbf", b"\xe2\x82", b"\xed\xa0\x80", b"\xf5\x80",
                b"\xff", b"\xe0\x80\xaf", b"\xc3", b"\xf8\x88\x80\x80\x80")


# --- generic probes (per pre-tokenizer regex) ----------------------------------------------

def ascii_probes() -> list[str]:
    """Each printable ASCII character alone and next to letters, digits, spaces and a non-ASCII letter."""
    out = []
    for c in PRINTABLE_ASCII + ASCII_WHITESPACE:
        out += [c, f"a{c}", f"{c}a", f"7{c}", f"{c}7", f" {c}", f"{c} ", f"é{c}", f"{c}{c}b"]
    return out


def case_mixes(tail: str) -> list[str]:
    """Every upper/lower spelling of a contraction tail ('ll' -> ll, lL, Ll, LL)."""
    mixes = [""]
    for ch in tail:
        mixes = [m + v for m in mixes for v in dict.fromkeys((ch.lower(), ch.upper()))]
    return mixes


def contraction_probes() -> list[str]:
    """word'tail for every tail in every case mix, after ASCII, non-ASCII, digit and space, and before letters."""
    out = []
    for tail in CONTRACTION_TAILS:
        for mix in case_mixes(tail):
            # a tail alone is one piece either way ('M is also "non-letter + letters"); a tail
            # followed by letters tells whether the contraction alternative matched first
            out += [f"I'{mix}", f"WE'{mix}", f"é'{mix}", f"Ж'{mix}", f"7'{mix}", f" '{mix}", f"'{mix} x",
                    f"x '{mix}", f"WE'{mix}BE", f"i'{mix}ok", f"É'{mix}Ü"]
    return out


def digit_probes() -> list[str]:
    """Digit runs of 1 to 5 in every decimal script, bare, after a letter and a space, and No/Nl."""
    out = []
    for zero in DIGIT_ZEROS:
        for n in range(1, 6):
            run = "".join(chr(zero + (k * 7 + 1) % 10) for k in range(n))
            out += [run, f"a{run}", f" {run}", f"{run}b"]
    out += [f"x{c}1" for c in OTHER_NUMBERS]
    return out


def whitespace_probes() -> list[str]:
    """Runs of 1 to 3 of each whitespace kind before a letter, a digit, punctuation and the end."""
    out = []
    for ws in WHITESPACE_KINDS:
        for n in (1, 2, 3):
            run = ws * n
            out += [f"{run}a", f"a{run}1", f"b{run}!", f"c{run}", f"x {run}y"]
    return out


def category_probes() -> list[str]:
    """One character of each general category, alone and between letters, digits and spaces."""
    out = []
    for ch in CATEGORIES.values():
        out += [ch, f"a{ch}b", f" {ch}", f"{ch}1", f"1{ch}", f"e{ch}{ch}"]
    return out


def cjk_probes() -> list[str]:
    """The code points at and around the edges of the CJK/Han ranges, between letters."""
    out = []
    for cp in CJK_EDGES:
        for c in (cp - 1, cp, cp + 1):
            out.append(f"a{chr(c)}b")
    return out


def invalid_utf8_probes() -> list[bytes]:
    """Invalid UTF-8 (overlong, surrogate, truncated, bad lead bytes) between letters."""
    return [b"a" + bad + b"b" for bad in INVALID_UTF8]


def generic_probes() -> list[str | bytes]:
    out: list[str | bytes] = []
    for family in (ascii_probes, contraction_probes, digit_probes, whitespace_probes, category_probes,
                   cjk_probes):
        out += family()
    out += invalid_utf8_probes()
    out += python_space_probes()  # last, so that adding them left the earlier cases as they were
    return out


def python_space_probes() -> list[str]:
    """Python-only whitespace between letters, digits and spaces (`PYTHON_ONLY_WHITESPACE`)."""
    return [p for c in PYTHON_ONLY_WHITESPACE for p in (f"a{c}b", f"7{c}7", f" {c}a", f"a{c} ", f"é{c}é")]


# --- tables (per engine) --------------------------------------------------------------------

def nfd_rows() -> list[str]:
    """Every code point llama.cpp's NFD table maps to another (the WPM accent stripping)."""
    from tokenizer import unicode as uni

    firsts, lasts, bases = uni._nfd_ranges()
    return [chr(c) for lo, hi, base in zip(firsts.tolist(), lasts.tolist(), bases.tolist(), strict=True)
            for c in range(lo, hi + 1) if c != base and not 0xD800 <= c < 0xE000]


def lowercase_rows() -> list[str]:
    """Every code point llama.cpp's lower-case table changes."""
    from tokenizer import unicode as uni

    pairs = uni.tables()["lowercase"]
    return [chr(c) for c, low in zip(pairs[0::2], pairs[1::2], strict=False) if c != low and not 0xD800 <= c < 0xE000]


def charsmap_rows(model: Model | Path) -> list[str]:
    """The keys of a UGM vocabulary's precompiled charsmap that decode as text (every row)."""
    import numpy as np

    from tokenizer.normalize.charsmap import parse

    blob = (as_model(model).metadata or {}).get("tokenizer.ggml.precompiled_charsmap")
    if blob is None:
        return []
    try:
        cm = parse(np.asarray(blob).astype(np.uint8).tobytes())
    except ValueError:
        return []
    keys = list(cm.singles) + list(getattr(cm, "followers", ()))
    out = []
    for key in keys:
        try:
            out.append(key.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return sorted(set(out))


def table_probes(model: Model | Path | None, *, every: int) -> list[str]:
    """Table rows joined into words: every `every`-th row (1 = all), each after a letter."""
    rows = nfd_rows() + lowercase_rows() + (charsmap_rows(model) if model is not None else [])
    picked = rows[::every]
    return ["x" + "".join(picked[i:i + 24]) for i in range(0, len(picked), 24)]


# --- per vocabulary -------------------------------------------------------------------------

def _token_lists(model: Model | Path) -> tuple[list[bytes], list[int]] | None:
    """Token texts and GGUF token types, read from the file (never from an engine under test)."""
    from tokenizer.gguf import reader as gguf

    metadata = as_model(model).metadata
    if metadata is None:
        return None
    tokens = metadata.get("tokenizer.ggml.tokens") or []
    types = metadata.get("tokenizer.ggml.token_type")
    texts = [gguf.as_bytes(t) for t in tokens]
    kinds = [int(k) for k in types] if types is not None else [NORMAL] * len(texts)
    return texts, kinds


NORMAL, UNKNOWN, CONTROL, USER_DEFINED = 1, 2, 3, 4   # GGUF token types (llama.cpp's)


def spelled(text: bytes) -> str:
    """A token text as the input that spells it: GPT-2 byte-level decoded, or U+2581 as a space."""
    from tokenizer import unicode as uni

    decoded = text.decode("utf-8", "replace")
    table = uni.char_to_byte()
    if "\u2581" not in decoded and all(ch in table for ch in decoded):
        return bytes(table[ch] for ch in decoded).decode("utf-8", "ignore")
    return decoded.replace("\u2581", " ")


_EDGE_MARKS = (b" ", "\u0120".encode(), "\u2581".encode())   # space, GPT-2's byte-level space, SPM's


def vocab_probes(model: Model | Path, *, longest: int = 12, max_special: int = 128) -> list[str]:
    """Special and user-defined tokens alone, glued, spaced and wrapped in whitespace (lstrip, rstrip);
    the longest normal tokens that start or end with a space (or U+2581), and the longest overall
    (tokens over 64 bytes are left out: they are runs a corpus case need not repeat)."""

    found = _token_lists(model)
    if found is None:
        return []
    texts, kinds = found
    ids = [i for i, (t, k) in enumerate(zip(texts, kinds, strict=False))
           if k in (UNKNOWN, CONTROL, USER_DEFINED) and 0 < len(t) <= 64]
    special = [texts[i].decode("utf-8", "replace") for i in spread(ids, max_special)]
    out = special_probes(special)
    normal = sorted((t for t, k in zip(texts, kinds, strict=False) if k == NORMAL and len(t) <= 64),
                    key=len, reverse=True)
    edged = [t for t in normal if t.startswith(_EDGE_MARKS) or t.endswith(_EDGE_MARKS)]
    out += [spelled(t) for t in edged[:longest]]
    out += [spelled(t) for t in normal[:longest]]
    out += numeric_tokens(texts, kinds, most=longest)
    return [t for t in out if t]


def special_probes(special: list[str]) -> list[str]:
    """Special texts run together, spaced, inside words between tabs and newlines (lstrip, rstrip), and
    before spaces."""
    if not special:
        return []
    return ["".join(special), " ".join(special), "".join(f"x \t{t}\n y" for t in special),
            "".join(f"{t}  z\n\n" for t in special)]


def reference_specials(model: Model | Path | None, tokens: list[tuple[str, bool]], *,
                       max_special: int = 128) -> list[str]:
    """The original tokenizer's own special and added tokens (`tokens`: (text, special), from
    `harness.references.added`) that the GGUF does not hold the same way: not at all or as a NORMAL
    token (the conversion dropped it, or wrote it NORMAL), or special the other way (a special one
    not CONTROL or UNKNOWN, a plain added one not USER_DEFINED); spread over at most `max_special`.
    `vocab_probes` (the GGUF's own list) cannot be relied on to reach those."""
    found = _token_lists(model) if model is not None else None
    held: dict[str, bool] = {}
    if found is not None:
        for text, kind in zip(*found, strict=False):
            if kind in (UNKNOWN, CONTROL, USER_DEFINED):
                held.setdefault(text.decode("utf-8", "replace"), kind != USER_DEFINED)
    odd = [t for t, special in tokens if t and held.get(t) is not special and len(t.encode("utf-8")) <= 64]
    return [odd[i] for i in spread(list(range(len(odd))), max_special)]


def reference_probes(model: Model | Path | None, tokens: list[tuple[str, bool]], *,
                     max_special: int = 128) -> list[str]:
    """`reference_specials` as probes: the GGUF's special forms (`special_probes`) and `see TOKEN here`."""
    picked = reference_specials(model, tokens, max_special=max_special)
    return special_probes(picked) + ["".join(f"see {t} here\n" for t in picked)] if picked else []


def reference_cases(model: Model | Path | None, tokens: list[tuple[str, bool]],
                    level_name: str = "slice") -> list[dict[str, Any]]:
    """Boundary cases (ids `bnd-ref-...`) from the original's special and added tokens (`reference_probes`)."""
    if level_name == "off":
        return []
    full = level_name == "full"
    probes = reference_probes(model, tokens, max_special=100_000 if full else 128)
    return [make_case(f"bnd-ref-{i:04d}", data) for i, data in enumerate(pack(probes, size=1, sep="\n"))]


def numeric_tokens(texts: list[bytes], kinds: list[int], *, most: int) -> list[str]:
    """Tokens spelled by two or more \\p{N} characters (`10`, fullwidth `１０`), at most `most`, spread.

    Whether such a token is reachable is decided by the pre-tokenizer's digit rule alone:
    one digit per piece (qwen2) never reaches it, groups of up to three (llama3) do. A
    digit rule that differs from llama.cpp's shows on exactly these inputs.
    """
    import regex

    numeric = regex.compile(r"\p{N}{2,}")
    spelled_all = (spelled(t) for t, k in zip(texts, kinds, strict=False) if k == NORMAL and 1 < len(t) <= 64)
    found = sorted({s for s in spelled_all if numeric.fullmatch(s)}, key=lambda s: (len(s), s))
    return [found[i] for i in spread(list(range(len(found))), most)]


# --- packing into cases ---------------------------------------------------------------------

def pack(probes: Iterable[str | bytes], *, size: int, sep: str = " ") -> Iterator[bytes]:
    """Probes joined by `sep`, `size` at a time (as bytes: some probes are invalid UTF-8)."""
    batch: list[bytes] = []
    for p in probes:
        batch.append(p if isinstance(p, bytes) else p.encode("utf-8"))
        if len(batch) == size:
            yield sep.encode().join(batch)
            batch = []
    if batch:
        yield sep.encode().join(batch)


def level() -> str:
    return BOUNDARIES.get()


def cases(model: Model | Path | None, level_name: str = "slice") -> list[dict[str, Any]]:
    """Boundary cases for one vocabulary (ids `bnd-...`): the default slice or the full set."""
    if level_name == "off":
        return []
    from . import unicode_probes

    full = level_name == "full"
    generic = generic_probes()
    groups: list[tuple[str, Iterable[bytes]]] = [
        ("gen", pack(generic, size=4 if full else 48)),
        ("tab", pack(table_probes(model, every=1 if full else 97), size=1 if full else 8, sep="\n")),
    ]
    if model is not None:
        groups.append(("voc", pack(vocab_probes(model, longest=64 if full else 12,
                                                max_special=100_000 if full else 128), size=1 if full else 6,
                                   sep="\n")))
    inside = unicode_probes.probes()   # text apart from the surrogates' raw bytes: one case is not text for them all
    groups.append(("uni", chain(pack([p for p in inside if isinstance(p, str)], size=8 if full else 48),
                                pack([p for p in inside if isinstance(p, bytes)], size=8 if full else 48))))
    out = []
    for tag, packed in groups:
        out += [make_case(f"bnd-{tag}-{i:04d}", data) for i, data in enumerate(packed)]
    return out


# --- as a Hypothesis strategy ---------------------------------------------------------------

def boundary_inputs(model: Model | Path | None = None) -> SearchStrategy[str]:
    """One to four boundary probes, glued or spaced: the rules' edges, in new combinations."""
    from hypothesis import strategies as st

    from . import unicode_probes

    probes = generic_probes() + unicode_probes.probes() + (vocab_probes(model) if model is not None else [])
    texts = [p for p in probes if isinstance(p, str)]
    glue = st.sampled_from(["", " ", "\n", "a", "1"])
    return st.lists(st.tuples(st.sampled_from(texts), glue), min_size=1, max_size=4).map(
        lambda parts: "".join(p + g for p, g in parts))
