"""Exhaustive sweeps beside the fuzzer: every input of a kind, not a sample (`run --sweeps`, ids `sweep-NAME-N`).

The brute-force generators llama.cpp's own `tests/test-tokenizer-random.py` runs, written
here from their description (no code of that file is copied). Each sweep is a list of
(index, text), its index stable whatever the size asked, so a case id names one input for good:

- `added`: every added and special token (the original's first, then the GGUF's
  CONTROL, USER_DEFINED and UNKNOWN tokens) alone and inside text, with every combination
  of whitespace before and after it (`AROUND`, the lstrip/rstrip cases): 256 inputs per token;
- `vocab`: every vocabulary entry, decoded (llama.cpp's piece of the token), on its own;
  the index is the token id;
- `unicode`: every code point assigned in Python's tables, in llama.cpp's, or listed by
  `derived.UNICODE_VERSIONS` (surrogates, private use and noncharacters left out), in a
  short context (`CONTEXT`); the index is the code point;
- `ascii`: pairs of ASCII characters (U+0001..U+007F, and none) with zero, one or two
  spaces before, between and after them, in three arrangements.

A sweep is screened in `screen_order`: the added tokens in priority order (the ones the GGUF
does not hold as the original does first), every other sweep in `spread_order`, so that a size
(`sized`) or a time budget that cuts it short still leaves a spread over the whole. `parse(text)`
reads the `--sweeps` value: `all`, `none`, `default`, or `NAME[=N],...`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

NAMES = ("added", "vocab", "unicode", "ascii")
# What a three-way run sweeps by default: every sweep whole, within a time budget per model (`DEFAULT_SECONDS`,
# `--sweep-seconds`). On a 256,000-token model (gemma-256k) every sweep whole took 290 s of screening on the
# 2-core machine at load 7.7, 125 s CPU (docs/benchmarks.md, "Sweeps"): within the budget, under 10 minutes.
DEFAULT_SIZES: dict[str, int | None] = dict.fromkeys(NAMES)
DEFAULT_SECONDS = 480.0
AROUND = ("", " ", "  ", "\n", "\r\n", "\n\n", "\t", "\t\t")  # whitespace before and after an added token
FORMS_PER_TOKEN = len(AROUND) ** 2 * 4
ASCII_SPACES = ("", " ", "  ")
CONTEXT = "a{c} {c}'s"  # a code point after a letter, after a space, and before 's
MAX_TOKEN_BYTES = 256  # an added token longer than this is left out of the added sweep
Item = tuple[int, str]


def parse(text: str) -> dict[str, int | None]:
    """`--sweeps` read: `all` (every input of every sweep), `none`, `default` (`DEFAULT_SIZES`), or
    `NAME[=N],...` (those sweeps; N inputs at most, else all). `ValueError` names what is wrong."""
    value = text.strip()
    if value in ("all", "none", "default"):
        return {"all": dict.fromkeys(NAMES), "none": {}, "default": dict(DEFAULT_SIZES)}[value]
    sizes: dict[str, int | None] = {}
    for part in value.split(","):
        name, _, size = part.strip().partition("=")
        if name not in NAMES:
            raise ValueError(f"unknown sweep {name!r} (known: {', '.join(NAMES)}; or all, none, default)")
        if name in sizes:
            raise ValueError(f"sweep {name!r} named twice")
        if not size:
            sizes[name] = None
            continue
        if not size.isdigit() or int(size) < 1:
            raise ValueError(f"sweep {name}={size!r}: the size is a whole number of inputs, 1 or more")
        sizes[name] = int(size)
    return sizes


def describe(sizes: dict[str, int | None]) -> str:
    """The `--sweeps` value that asks for `sizes` again."""
    if not sizes:
        return "none"
    return ",".join(name if size is None else f"{name}={size}" for name, size in sizes.items())


def spread_order(n: int) -> list[int]:
    """0..n-1 in bit-reversed order (0, n/2, n/4, 3n/4, ...): every prefix is spaced evenly over the whole, so a
    sweep cut short by its size or its time still covers every plane of the code points, every part of the
    vocabulary."""
    bits = max(n - 1, 0).bit_length()
    out = []
    for k in range(1 << bits):
        j = int(format(k, f"0{bits}b")[::-1], 2) if bits else 0
        if j < n:
            out.append(j)
    return out


def screen_order(items: Sequence[Item], *, ordered: bool = False) -> list[Item]:
    """`items` in the order a sweep screens them: as given when `ordered` (the added sweep: its tokens are in
    priority order already), else `spread_order`."""
    return list(items) if ordered else [items[j] for j in spread_order(len(items))]


def sized(items: Sequence[Item], limit: int | None) -> list[Item]:
    """The first `limit` items of a screen order (all of them with None)."""
    return list(items) if limit is None else list(items[:limit])


def added_forms(token: str) -> list[str]:
    """A token alone, after a letter, before a letter and between two, with every whitespace pair around it."""
    out = []
    for before in AROUND:
        for after in AROUND:
            core = before + token + after
            out += [core, "a" + core, core + "z", "a" + core + "z"]
    return out


def added_inputs(tokens: Iterable[str]) -> list[Item]:
    """`added_forms` of every token (each once, empty and over-long ones left out), numbered in order."""
    kept = [t for t in dict.fromkeys(tokens) if t and len(t.encode("utf-8", "surrogatepass")) <= MAX_TOKEN_BYTES]
    return [(i * FORMS_PER_TOKEN + j, form) for i, token in enumerate(kept)
            for j, form in enumerate(added_forms(token))]


def vocab_inputs(pieces: Sequence[bytes], skip: Iterable[int] = ()) -> list[Item]:
    """Every token's piece that is text (valid UTF-8, not empty), indexed by token id; `skip` (control
    tokens: the added sweep's) left out."""
    left_out = set(skip)
    out = []
    for token, piece in enumerate(pieces):
        if token in left_out or not piece:
            continue
        try:
            out.append((token, piece.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return out


def unicode_points(llama_flags: Any = None, extra: Iterable[int] = ()) -> list[int]:
    """Every code point assigned in Python's Unicode tables, or in llama.cpp's (`llama_flags`, its flags indexed by
    code point, as `tokenizer.unicode.flags_array`; UNDEFINED = 1), or in `extra`; never a surrogate, a
    private-use code point or a noncharacter."""
    listed = set(extra)
    out = []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000 or _private(cp) or (cp & 0xFFFE) == 0xFFFE or 0xFDD0 <= cp <= 0xFDEF:
            continue
        known = unicodedata.category(chr(cp)) != "Cn"
        if known or cp in listed or (llama_flags is not None and not int(llama_flags[cp]) & 1):
            out.append(cp)
    return out


def _private(cp: int) -> bool:
    return 0xE000 <= cp <= 0xF8FF or cp >= 0xF0000


def unicode_inputs(points: Iterable[int]) -> list[Item]:
    """Each code point in `CONTEXT`, indexed by the code point."""
    return [(cp, CONTEXT.format(c=chr(cp))) for cp in points]


def ascii_inputs() -> list[Item]:
    """Two ASCII characters (or fewer) with every run of up to two spaces before, between and after them, in
    three arrangements; each text once, numbered in the order generated (repeats keep their number)."""
    chars = [chr(c) for c in range(1, 0x80)] + [""]
    seen: dict[str, int] = {}
    index = 0
    for first in chars:
        for second in chars:
            for before in ASCII_SPACES:
                for after in ASCII_SPACES:
                    for text in (before + first + second + after, before + first + after + second,
                                 first + before + second + after):
                        seen.setdefault(text, index)
                        index += 1
    return [(i, text) for text, i in seen.items() if text]
