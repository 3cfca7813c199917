"""llama.cpp's `unicode_regex_split`, reproduced on Python's `regex` module.

A pre-tokenizer is a list of expressions.  The first one splits the whole
text; each later one splits every piece the previous produced (a match never
crosses a piece boundary, and the text between matches is kept as pieces of
its own).  For each expression llama.cpp does one of three things, and so do
we:

1. A hand-written splitter, chosen by comparing the expression *text* with
   the GPT-2, LLaMA-3, Qwen2, Qwen3.5, Kimi-K2, AFMoE-digits, tiny_aya-digits
   and newline-runs patterns.  Their behaviour (not the regex they imitate)
   is what counts; we express each as a regex over the collapsed text below.
2. If the expression mentions `\\p{N}`, `\\p{L}`, `\\p{P}`, `\\p{M}`, `\\p{S}` or
   `\\p{Lu|Ll|Lt|Lm|Lo}`: std::regex over "collapsed" text, where every
   non-ASCII code point is replaced by one byte for its class (whitespace
   0x0B, number 0xD1, letter 0xD2, punctuation 0xD3, mark 0xD4, symbol 0xD5,
   anything else 0xD0) and each `\\p{..}` by that byte plus its ASCII
   members.  `\\p{Lu}` and friends all mean "any letter".
3. Otherwise std::wregex over the code points, non-ASCII whitespace replaced
   by 0x0B.

std::regex (ECMAScript) knows only ASCII for `\\s`, `\\d`, `\\w`; `$` matches
only at the very end.  Python's `regex` with the ASCII flag and `\\Z` agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate, islice

import numpy as np
import regex

from .. import unicode as uni
from ..cache import BoundedCache
from . import behaviours as pt

Span = tuple[int, int]
Stage = Callable[["Text", list[Span]], list[Span]]

# Character classes over collapsed text (see unicode.collapse).
_W = "\\t\\n\\x0b\\x0c\\r "
_L = "A-Za-z\\xd2"
_N = "0-9\\xd1"
_M = "\\xd4"
_LH = _L + "\\xd6"          # letters including Han (han-collapsed text only)
_H = "\\xd6\\xd7"

_CI = "'(?:[sStTmMdD]|[rR][eE]|[vV][eE]|[lL][lL])"
_WS_TAIL = [f"[{_W}]+(?![^{_W}])", f"[{_W}]+", "."]


def _compile(*alternatives: str) -> regex.Pattern:
    return regex.compile("|".join(alternatives), regex.DOTALL)


# Hand-written splitters of unicode.cpp, as regexes over the collapsed text.
_GPT2 = _compile(
    "'(?:[stmd]|re|ve|ll)",
    f" ?[{_L}]+",
    f" ?[{_N}]+",
    f" ?[^{_W}{_L}{_N}]+",
    *_WS_TAIL,
)


def _llama3_family(digits: str, letters: str = _L, marks: str = "") -> regex.Pattern:
    word = letters + marks
    return _compile(
        _CI,
        f"[^\\r\\n{word}{_N}]?[{word}]+",
        digits,
        f" ?[^{_W}{word}{_N}]+[\\r\\n]*",
        f"[{_W}]*[\\r\\n]+",
        *_WS_TAIL,
    )


_LLAMA3 = _llama3_family(f"[{_N}]{{1,3}}")
_QWEN2 = _llama3_family(f"[{_N}]")
_QWEN35 = _llama3_family(f"[{_N}]", marks=_M)
_KIMI_K2 = _compile(
    f"[{_H}]+",
    f"[^\\r\\n{_LH}{_N}]?[{_L}]+(?:{_CI})?",
    f"[{_N}]{{1,3}}",
    f" ?[^{_W}{_LH}{_N}]+[\\r\\n]*",
    f"[{_W}]*[\\r\\n]+",
    *_WS_TAIL,
)
_DIGIT_RUNS = regex.compile(f"[{_N}]+")
_NEWLINE_RUNS = regex.compile("[^\\n]+|\\n+")


class Text:
    """The views of one input the stages need, all one character per code point.

    A `Text` cut from a parent (`Text(piece, parent, offset)`) slices the
    parent's views instead of computing its own: a view maps each code point
    on its own, so the slice is the same.
    """

    def __init__(self, cps: str, parent: Text | None = None, offset: int = 0) -> None:
        self.cps = cps
        self._parent = parent
        self._offset = offset

    def _from_parent(self, view: str) -> str | None:
        if self._parent is None:
            return None
        whole: str = getattr(self._parent, view)
        return whole[self._offset:self._offset + len(self.cps)]

    @cached_property
    def collapsed(self) -> str:
        return self._from_parent("collapsed") or uni.collapse(self.cps)

    @cached_property
    def collapsed_han(self) -> str:
        return self._from_parent("collapsed_han") or uni.collapse(self.cps, han=True)

    @cached_property
    def wide(self) -> str:
        """What std::wregex sees: code points, non-ASCII whitespace as 0x0B."""
        inherited = self._from_parent("wide")
        if inherited is not None:
            return inherited
        if self.cps.isascii():
            return self.cps
        cps = uni.codepoints(self.cps).copy()
        flags = uni.flags_array()[np.minimum(cps, uni.MAX_CODEPOINTS - 1)]
        cps[(cps > 0x7F) & ((flags & uni.WHITESPACE) != 0)] = 0x0B
        return cps.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")


def _pattern_stage(pattern: regex.Pattern, view: str) -> Stage:
    """Every match is a piece; the hand-written splitters' patterns cover all input."""
    def stage(text: Text, spans: list[Span]) -> list[Span]:
        s = getattr(text, view)
        findall = pattern.findall  # no groups: whole matches, which tile the span
        out: list[Span] = []
        for a, b in spans:
            ends = list(accumulate(map(len, findall(s, a, b)), initial=a))
            out.extend(zip(ends, islice(ends, 1, None)))
        return out

    def words_of(cps: str) -> list[str]:
        """The pieces of the whole text as strings: `stage` and slicing in one pass, no `Text` built."""
        s = VIEWS[view](cps)
        found: list[str] = pattern.findall(s)
        if s is cps:
            return found
        ends = list(accumulate(map(len, found)))
        return list(map(cps.__getitem__, map(slice, [0, *ends[:-1]], ends)))

    stage.words_of = words_of  # type: ignore[attr-defined]
    return stage


# The views `Text` computes, for a text cut from no parent (`words_of`).
VIEWS: dict[str, Callable[[str], str]] = {
    "cps": lambda cps: cps,
    "collapsed": uni.collapse,
    "collapsed_han": lambda cps: uni.collapse(cps, han=True),
    "wide": lambda cps: Text(cps).wide,
}


def _digit_groups(text: Text, spans: list[Span]) -> list[Span]:
    """unicode.cpp's AFMoE digit splitter, used for afmoe and tiny_aya.

    A digit run of length n is cut into n % 3 leading digits then groups of
    three.  Text before a run is *not* cut off: it joins the run's first
    group (quirk of the original, kept), and text after the last run is one
    piece.
    """
    s = text.collapsed
    out: list[Span] = []
    for a, b in spans:
        prev = a
        for m in _DIGIT_RUNS.finditer(s, a, b):
            start, end = m.span()
            cut = start + (end - start) % 3
            if cut == start:
                cut += 3
            out.append((prev, cut))
            out.extend((i, i + 3) for i in range(cut, end, 3))
            prev = end
        if prev < b:
            out.append((prev, b))
    return out


def _context_free(source: str) -> bool:
    """No `^`, `\\b`, `\\B`, `\\A` or lookbehind: searching with pos/endpos equals searching a slice."""
    stripped = regex.sub(r"\[\^|\\.", "", source)  # drop class-negation carets and escapes
    return "^" not in stripped and "(?<" not in source and not regex.search(r"\\[bBA]", source)


def _stl_stage(pattern: regex.Pattern, view: str) -> Stage:
    """std::regex_iterator semantics: matches and the gaps between them are pieces."""
    sliced = not _context_free(pattern.pattern)

    def stage(text: Text, spans: list[Span]) -> list[Span]:
        s = getattr(text, view)
        out: list[Span] = []
        for a, b in spans:
            prev = a
            matches = pattern.finditer(s[a:b]) if sliced else pattern.finditer(s, a, b)
            shift = a if sliced else 0
            for m in matches:
                start, end = m.start() + shift, m.end() + shift
                if start > prev:
                    out.append((prev, start))
                if end > start:
                    out.append((start, end))
                prev = end
            if prev < b:
                out.append((prev, b))
        return out
    return stage


CUSTOM: dict[str, Stage] = {
    pt.GPT2: _pattern_stage(_GPT2, "collapsed"),
    pt.LLAMA3: _pattern_stage(_LLAMA3, "collapsed"),
    pt.LLAMA3.replace(pt.CONTRACTIONS, "(?i:'s|'t|'re|'ve|'m|'ll|'d)", 1):
        _pattern_stage(_LLAMA3, "collapsed"),
    pt.QWEN2: _pattern_stage(_QWEN2, "collapsed"),
    pt.QWEN35: _pattern_stage(_QWEN35, "collapsed"),
    "\\p{Han}+": _pattern_stage(_KIMI_K2, "collapsed_han"),
    "\\p{AFMoE_digits}": _digit_groups,
    "\\d{1,3}(?=(?:\\d{3})*\\b)": _digit_groups,
    pt.NEWLINE_RUNS: _pattern_stage(_NEWLINE_RUNS, "cps"),
}

# k_ucat_enum of unicode.cpp: property -> collapsed byte and ASCII members.
_UCAT = {
    "\\p{N}": ("\xd1", "\x30-\x39"),
    "\\p{L}": ("\xd2", "\x41-\x5A\x61-\x7A"),
    "\\p{P}": ("\xd3", "\x21-\x23\x25-\x2A\x2C-\x2F\x3A-\x3B\x3F-\x40\\\x5B-\\\x5D\x5F\\\x7B\\\x7D"),
    "\\p{M}": ("\xd4", ""),
    "\\p{S}": ("\xd5", "\\\x24\\\x2B\x3C-\x3E\x5E\x60\\\x7C\\\x7E"),
}
for _name in ("Lu", "Ll", "Lt", "Lm", "Lo"):
    _UCAT[f"\\p{{{_name}}}"] = _UCAT["\\p{L}"]


class RegexNotSupported(ValueError):
    """An expression llama.cpp itself refuses to run."""


def uses_categories(expr: str) -> bool:
    return any(key in expr for key in _UCAT)


def collapse_pattern(expr: str) -> str:
    """The collapsed-text version of `expr`, built the way unicode.cpp builds it."""
    if not expr.isascii():
        raise RegexNotSupported(
            f"regex {expr!r} mixes unicode categories and non-ASCII characters; "
            "llama.cpp refuses it"
        )
    out: list[str] = []
    inside = False
    i = 0
    while i < len(expr):
        c = expr[i]
        if c == "[" and (i == 0 or expr[i - 1] != "\\"):
            inside = True
        elif inside and c == "]" and expr[i - 1] != "\\":
            inside = False
        elif expr.startswith("\\p{", i) and i + 3 < len(expr):
            close = expr.find("}", i + 3)
            prop = expr[i:close + 1] if close != -1 and close <= i + 10 else ""
            if prop in _UCAT:
                byte, members = _UCAT[prop]
                out.append(byte + members if inside else f"[{byte}{members}]")
                i = close + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _ecmascript_to_python(expr: str) -> str:
    """`$` outside a class is end of input in ECMAScript; Python's `$` also matches before a final newline."""
    out: list[str] = []
    inside = escaped = False
    for c in expr:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == "[" and not inside:
            inside = True
        elif c == "]" and inside:
            inside = False
        elif c == "$" and not inside:
            out.append("\\Z")
            continue
        out.append(c)
    return "".join(out)


def compile_stage(expr: str) -> Stage:
    """The stage llama.cpp runs for one expression."""
    if expr in CUSTOM:
        return CUSTOM[expr]
    if uses_categories(expr):
        source, view = collapse_pattern(expr), "collapsed"
    else:
        source, view = expr, "wide"
    pattern = regex.compile(_ecmascript_to_python(source), regex.ASCII)
    return _stl_stage(pattern, view)


MEMO_MAX_LEN = 64


@dataclass(frozen=True)
class Splitter:
    """A compiled pre-tokenizer: text in, list of code-point spans out."""

    stages: tuple[Stage, ...]
    _memo: BoundedCache[tuple[int, str], tuple[str, ...]] = field(
        default_factory=BoundedCache, compare=False, repr=False)

    @classmethod
    def for_pretokenizer(cls, pre: pt.PreTokenizer) -> Splitter:
        return cls(tuple(compile_stage(expr) for expr in pre.patterns))

    def spans(self, text: Text) -> list[Span]:
        """All stages in context, no memo (the reference path, for tests)."""
        spans: list[Span] = [(0, len(text.cps))] if text.cps else []
        for stage in self.stages:
            spans = stage(text, spans)
        return spans

    def split(self, cps: str) -> list[str]:
        """The words of `cps` (strings, possibly with lone surrogates), as llama.cpp splits them.

        Each expression after the first splits each piece on its own, never
        looking past it, so the words of a short piece depend on its text
        alone: they are memoised per (stage, piece).
        """
        out: list[str] = []
        if len(self.stages) == 1 and hasattr(self.stages[0], "words_of"):
            return self.stages[0].words_of(cps) if cps else out
        if cps:
            self._descend(Text(cps), [(0, len(cps))], 0, out)
        return out

    def _descend(self, text: Text, spans: list[Span], k: int, out: list[str]) -> None:
        cps = text.cps
        spans = self.stages[k](text, spans)
        k += 1
        if k == len(self.stages):
            out.extend(map(cps.__getitem__, map(slice, *zip(*spans)))) if spans else None
            return
        memo = self._memo
        pending: list[Span] = []  # consecutive long spans, split together in context
        for a, b in spans:
            if b - a > MEMO_MAX_LEN:
                pending.append((a, b))
                continue
            if pending:
                self._descend(text, pending, k, out)
                pending = []
            piece = cps[a:b]
            words = memo.get((k, piece))
            if words is None:
                found: list[str] = []
                self._descend(Text(piece, text, a), [(0, len(piece))], k, found)
                words = memo.put((k, piece), tuple(found))
            out.extend(words)
        if pending:
            self._descend(text, pending, k, out)
