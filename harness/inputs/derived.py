"""Boundary cases derived from the original tokenizer's own rules (`run --reference`, ids `bnd-orig-...`).

The generic slice (`harness.inputs.boundaries`) probes llama.cpp's rules; these
probe the original's, read as plain data (`harness.references.original`), so
that a class of difference the original has and the GGUF lost shows up on a
default run rather than by luck:

- `case` (the split pattern names letter case, `\\p{Lu}`, `\\p{Ll}`, `\\p{Lt}`):
  all-caps words that mix ASCII and non-ASCII letters (`AÇÃO`, `SÃO PAULO`),
  lower then upper outside ASCII (Armenian `ոՈ`), title case, per script;
- `marks` (the pattern names letters or marks): a letter with its combining
  marks, per script (`कि`, `กิ`, `بَ`, `e\\u0301`), alone, after a space and glued;
- `normal` (the normalizer is NFC, NFKC, NFD or NFKD, or lower-cases): the
  vocabulary's own words with letters that decompose, composed and
  decomposed; compatibility forms for NFK*; upper case for Lowercase;
- `added` (every added token whose flags make context matter: `lstrip`,
  `rstrip`, `single_word`, `normalized`, or none of them): the token glued to
  letters, spaced, between tabs and newlines, twice, in a word;
- `policy` (the config's `add_bos_token` / `add_eos_token`, or a post-processor
  that adds tokens): a plain word, an empty-looking text, the BOS text itself;
- `uni` (always): code points assigned in each Unicode version from 14.0 to
  16.0 (letters, marks, digits, symbols; case pairs), so the tables either side
  uses show their version (`" 🫩"` U+1FAE9, Garay, Tulu-Tigalari).

`derived_cases(rules, level)` packs them as cases, one probe family per case
group; `level="full"` gives one probe per case.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from .boundaries import pack
from .cases import make_case, spread

CASE_CLASSES = ("\\p{Lu}", "\\p{Ll}", "\\p{Lt}", "\\p{Lowercase", "\\p{Uppercase")
LETTER_CLASSES = ("\\p{L}", "\\p{M}", "\\p{Lo}", "\\p{Mn}", "\\w")
# (upper, lower) letter pairs outside ASCII, one or two per script with case
CASE_PAIRS = (("Ç", "ç"), ("Ã", "ã"), ("É", "é"), ("Ğ", "ğ"), ("Ł", "ł"), ("Ω", "ω"), ("Ж", "ж"),
              ("Ո", "ո"), ("Ა", "ა"), ("Ꭰ", "ꭰ"), ("\U00010400", "\U00010428"), ("\U0001e900", "\U0001e922"),
              ("Ⰰ", "ⰰ"), ("Ǆ", "ǆ"), ("ẞ", "ß"))
CASE_WORDS = ("AÇÃO", "SÃO PAULO", "ÉCOLE", "ĞÜL", "ŁÓDŹ", "ΑΘΉΝΑ", "MOSКВА", "ոՈ", "ՈՍ", "ǅemal", "ǄEMAL",
              "NAÏVE", "CAFÉ", "AΩB", "ЖAR", "ÇA VA", "'ÇA", "İSTANBUL", "STRAẞE")
# a letter with marks, per script
MARKED = ("कि", "क्षि", "কি", "கி", "కి", "ಕಿ", "കി", "කි", "กิ", "ກິ", "ကို", "កើ", "བོ", "بَ", "שָׁ", "e\u0301",
          "a\u0308\u0301", "ё", "й", "ᄀ\u1161", "\u05d0\u05b8", "ߊ߫")
COMPAT = ("ﬁ", "ＡＢＣ", "①", "²", "ℌ", "㎏", "ｶ", "…", "\u00a0x", "Ⅻ", "ǆ")
# code points assigned in each Unicode version (letters, marks, digits, symbols; case pairs)
UNICODE_VERSIONS: dict[str, tuple[int, ...]] = {
    "14.0": (0x10570, 0x10597, 0x1E290, 0x16A70, 0x16AC0, 0x0870, 0x1FAE0, 0x0C5D, 0xA7C0, 0xA7C1),
    "15.0": (0x11F04, 0x11F00, 0x11F50, 0x1E4D0, 0x1E4F0, 0x11B00, 0x0CF3, 0x1FA75, 0x1E030, 0x31350),
    "15.1": (0x2EBF0, 0x2EE5D, 0x2FFC, 0x31EF),
    "16.0": (0x1FAE9, 0x10D50, 0x10D70, 0x10D40, 0x11380, 0x105C0, 0x11BC0, 0x11BF0, 0x16100, 0x1E5D0,
             0xA7CB, 0xA7CC, 0xA7CD, 0x1C89, 0x1C8A, 0x13460),
}
MAX_NORMAL = 48     # vocabulary words probed per normalizer
MAX_ADDED = 64      # added tokens probed (spread over the list)


def _names_any(patterns: Sequence[str], classes: Iterable[str]) -> bool:
    return any(c in p for p in patterns for c in classes)


def case_probes(patterns: Sequence[str]) -> list[str]:
    """All-caps words mixing ASCII and non-ASCII letters, per script, when the pattern names letter case."""
    if not _names_any(patterns, CASE_CLASSES):
        return []
    out = list(CASE_WORDS)
    for up, low in CASE_PAIRS:
        out += [f"A{up}O", f"{up}AB", f"{low}{up}", f"{up}{up}{low}", f" {up}{low}a", f"a{up}", f"X{up}y"]
    return out


def mark_probes(patterns: Sequence[str]) -> list[str]:
    """A letter with its marks, per script: alone, after a space, glued after a Latin letter, doubled."""
    if not _names_any(patterns, LETTER_CLASSES):
        return []
    return [form for m in MARKED for form in (m, f" {m}", f"a{m}", f"{m}{m}")]


def normal_probes(normalizers: Sequence[str], words: Sequence[str]) -> list[str]:
    """The vocabulary's words whose letters decompose, composed and decomposed (NFC/NFD/NFKC/NFKD), the
    compatibility forms (NFK*), upper case (Lowercase)."""
    kinds = set(normalizers)
    out: list[str] = []
    if kinds & {"NFC", "NFKC", "NFD", "NFKD"}:
        changing = sorted((w for w in words if w and not w.isascii() and unicodedata.normalize("NFD", w) != w),
                          key=len)   # letters first, then words of every length up to the longest
        for word in (changing[i] for i in spread(list(range(len(changing))), MAX_NORMAL)):
            out += [unicodedata.normalize("NFC", word), unicodedata.normalize("NFD", word)]
    if kinds & {"NFKC", "NFKD"}:
        out += list(COMPAT)
    if "Lowercase" in kinds:
        letters = [w for w in words if w.strip().isalpha() and w.upper() != w]
        out += [w.upper() for w in (letters[i] for i in spread(list(range(len(letters))), MAX_NORMAL // 2))]
    return out


def added_probes(added: Sequence[Any]) -> list[str]:
    """Each added token in the contexts its lstrip / rstrip / single_word / normalized flags are about."""
    picked = [added[i] for i in spread(list(range(len(added))), MAX_ADDED)]
    out = []
    for token in picked:
        t = token.content
        out += [f"a{t}b", f"a {t} b", f"a  {t}  b", f"x\t{t}\n y", f"{t}{t}", f"word{t}", f" {t}"]
        if token.normalized and t.lower() != t:
            out.append(t.lower())
        if token.normalized and unicodedata.normalize("NFD", t) != t:
            out.append(unicodedata.normalize("NFD", t))
    return out


def policy_probes(rules: Any) -> list[str]:
    """Plain texts whose add_special pairs show the BOS/EOS policy (a missing or extra BOS or EOS)."""
    says = rules.add_bos is not None or rules.add_eos is not None or rules.post_bos or rules.post_eos
    return ["Hello world", " ", "a"] if says else []


def unicode_probes() -> list[str]:
    """Each version's code points after a space, after a letter, doubled, before 's and after a digit."""
    return [form for points in UNICODE_VERSIONS.values() for cp in points
            for form in (f" {chr(cp)}", f"a{chr(cp)}", chr(cp) * 2, f"{chr(cp)}'s", f"1{chr(cp)}")]


def families(rules: Any) -> list[tuple[str, list[str]]]:
    """(tag, probes) for every family the original's rules call for."""
    groups = [("case", case_probes(rules.patterns)), ("marks", mark_probes(rules.patterns)),
              ("normal", normal_probes(rules.normalizers, rules.vocab_words)), ("added", added_probes(rules.added)),
              ("policy", policy_probes(rules)), ("uni", unicode_probes())]
    return [(tag, probes) for tag, probes in groups if probes]


def derived_cases(rules: Any, level_name: str = "slice") -> list[dict[str, Any]]:
    """The probes as cases (ids `bnd-orig-TAG-NNNN`): 8 to a case in the slice, one each in the full set."""
    if level_name == "off":
        return []
    size = 1 if level_name == "full" else 8
    out = []
    for tag, probes in families(rules):
        packed = pack(probes, size=1 if tag == "policy" else size, sep="\n")
        out += [make_case(f"bnd-orig-{tag}-{i:04d}", data) for i, data in enumerate(packed)]
    return out
