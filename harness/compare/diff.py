"""The comparator: where two tokenizations part, shown readably, with a cheap diagnosis.

`diff_encoding(...)` compares one case under one flag combination: the first
differing index, both id sequences aligned around it with readable token
texts, the differing pieces as bytes, and the detokenization differences.
`classify(...)` names the likely cause when it can be derived cheaply:

    special-token partition, pre-tokenizer split, merge order, byte fallback,
    normalisation, BOS/EOS, detokenize (and engine error / oracle crash).

Vocabulary differences are pinned to token ids by `harness.golden.records.diff_vocab`
and shown with both sides' text, score and attribute by `harness.compare.findings`. All
comparisons are on exact ids and bytes;
`visible()` and `errors="replace"` are for display only.

Every step is linear in the length of the id lists, and what is built for display is bounded:
an engine may answer with millions of ids (a flood of BOS, a document whose ids part late), and
its comparison must stay within seconds (tests/compare/test_long_replies.py). The aligned rows
stop `ALIGNED_ROWS` after the first difference; a differing span's pieces are spelled up to
`PIECE_BYTES` once it is longer than `LONG_SPAN` tokens (`harness.compare.long_inputs.trimmed`
keeps less than that of such a finding).
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenizer.attrs import Attr

CONTEXT = 4  # tokens shown either side of the first difference
SPECIAL_BITS, BYTE_BITS = int(Attr.CONTROL | Attr.USER_DEFINED), int(Attr.BYTE)  # plain ints: IntFlag ops are slow
ALIGNED_ROWS = 64  # aligned rows drawn from the first difference on, at most (its span may be millions long)
LONG_SPAN = 1024  # a differing span of more tokens than this has its pieces spelled up to PIECE_BYTES
PIECE_BYTES = 64 << 10

VISIBLE = {" ": "␣", "\n": "↵", "\r": "␍", "\t": "⇥", "\u00a0": "⍽"}


def visible(data: bytes | str, *, line_breaks: bool = False) -> str:
    """Whitespace and control characters made visible; invalid UTF-8 shown as `\\xNN`.

    For display only: `visible(b"a b\\n\\xff") == "a␣b↵\\\\xff"`. The one spelling of every
    page and terminal line (token cards, messages, pytest items); with `line_breaks`, a
    newline stays a line break after its `↵` (a rendered prompt read as lines).
    """
    text = data.decode("utf-8", "backslashreplace") if isinstance(data, bytes) else data
    shown = "".join(_visible_char(ch) for ch in text)
    return shown.replace(VISIBLE["\n"], VISIBLE["\n"] + "\n") if line_breaks else shown


def _visible_char(ch: str) -> str:
    if ch in VISIBLE:
        return VISIBLE[ch]
    if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Zs", "Cs", "Co", "Cn"):
        return f"\\u{{{ord(ch):04X}}}"
    return ch


@dataclass(frozen=True)
class TokenTable:
    """One side's view of the vocabulary, enough to spell ids and classify a difference."""

    texts: Sequence[bytes] = ()
    attrs: Sequence[int] = ()
    pieces: Sequence[bytes] = ()
    edge_ids: frozenset[int] = field(default_factory=frozenset)  # bos, eos, sep

    def text(self, token: int) -> bytes:
        return self.texts[token] if 0 <= token < len(self.texts) else f"<id {token}?>".encode()

    def attr(self, token: int) -> int:
        return int(self.attrs[token]) if 0 <= token < len(self.attrs) else 0

    def piece(self, token: int) -> bytes:
        return self.pieces[token] if 0 <= token < len(self.pieces) else self.text(token)

    def is_special(self, token: int) -> bool:
        return bool(self.attr(token) & SPECIAL_BITS)


SCAN = 4096  # items compared per slice while looking for where two sequences part (at C speed)


def first_diff(expected: Sequence, got: Sequence) -> int | None:
    """The first index where the sequences (of ids, or a str, or bytes) differ (the shorter length
    if one is a prefix), or None."""
    n = min(len(expected), len(got))
    at = 0
    while at < n and expected[at:at + SCAN] == got[at:at + SCAN]:
        at += SCAN
    for index in range(at, min(at + SCAN, n)):
        if expected[index] != got[index]:
            return index
    return None if len(expected) == len(got) else n


def _common_suffix(expected: Sequence[int], got: Sequence[int], start: int) -> int:
    """How many items the two sequences share at their ends, not reaching back before `start`."""
    most = min(len(expected), len(got)) - start
    n = 0
    while n + SCAN <= most and expected[len(expected) - n - SCAN:len(expected) - n] == \
            got[len(got) - n - SCAN:len(got) - n]:
        n += SCAN
    while n < most and expected[-1 - n] == got[-1 - n]:
        n += 1
    return n


def differing_span(expected: Sequence[int], got: Sequence[int]) -> tuple[int, int, int]:
    """(start, end in expected, end in got) of the region between common prefix and suffix."""
    start = first_diff(expected, got)
    if start is None:
        return len(expected), len(expected), len(got)
    tail = _common_suffix(expected, got, start)
    return start, len(expected) - tail, len(got) - tail


def aligned(expected: Sequence[int], got: Sequence[int], table: TokenTable,
            *, got_table: TokenTable | None = None, context: int = CONTEXT) -> list[dict]:
    """Rows `{index, expected, expected_text, got, got_text, differs}` around the first difference."""
    got_table = got_table or table
    start, end_e, end_g = differing_span(expected, got)
    lo, hi = max(start - context, 0), min(max(end_e, end_g) + context, start + ALIGNED_ROWS)
    rows = []
    for index in range(lo, min(hi, max(len(expected), len(got)))):
        e = expected[index] if index < len(expected) else None
        g = got[index] if index < len(got) else None
        rows.append({
            "index": index,
            "expected": e, "expected_text": None if e is None else visible(table.text(e)),
            "got": g, "got_text": None if g is None else visible(got_table.text(g)),
            "differs": e != g,
        })
    return rows


def spelled(ids: Sequence[int], table: TokenTable) -> bytes:
    return b"".join(table.piece(t) for t in ids)


def spelled_span(ids: Sequence[int], table: TokenTable) -> bytes:
    """`spelled(ids)`, stopped past `PIECE_BYTES` when there are more than `LONG_SPAN` ids (display only:
    `long_inputs.trimmed` keeps the first 600 characters of such a span's pieces)."""
    if len(ids) <= LONG_SPAN:
        return spelled(ids, table)
    parts, size = [], 0
    for token in ids:
        piece = table.piece(token)
        parts.append(piece)
        size += len(piece)
        if size > PIECE_BYTES:
            break
    return b"".join(parts)


# --- classification -------------------------------------------------------------------------

def _strip_edges(ids: Sequence[int], table: TokenTable) -> Sequence[int]:
    """`ids` without the BOS/EOS/SEP ids at either end (by index: a million BOS ids is one slice)."""
    lo, hi = 0, len(ids)
    while lo < hi and ids[lo] in table.edge_ids:
        lo += 1
    while hi > lo and ids[hi - 1] in table.edge_ids:
        hi -= 1
    return ids[lo:hi]


def _char_class(ch: str) -> str:
    if ch.isspace():
        return "space"
    cat = unicodedata.category(ch)[0]
    return {"L": "letter", "M": "letter", "N": "digit"}.get(cat, "other")


def _crosses_class(piece: bytes) -> bool:
    text = piece.decode("utf-8", "replace").replace("▁", " ").replace("Ġ", " ")
    classes = [_char_class(ch) for ch in text]
    return any(a != b for a, b in itertools.pairwise(classes))


def _region(expected: Sequence[int], got: Sequence[int]) -> tuple[Sequence[int], Sequence[int]]:
    start, end_e, end_g = differing_span(expected, got)
    return expected[start:end_e], got[start:end_g]


Region = tuple[Sequence[int], Sequence[int]]  # the differing span of each side (`_region`), found once


def _distinct(region: Region) -> set[int]:
    """The ids of both sides' spans, each once: a rule looks each up once, however long the spans."""
    return set(itertools.chain(*region))
Classifier = Callable[[Sequence[int], Sequence[int], TokenTable, Region], str | None]
CLASSIFIERS: list[Classifier] = []


def _classifier(fn: Classifier) -> Classifier:
    CLASSIFIERS.append(fn)
    return fn


@_classifier
def _bos_eos(expected, got, table, region):
    return "BOS/EOS" if list(_strip_edges(expected, table)) == list(_strip_edges(got, table)) else None


@_classifier
def _special_partition(expected, got, table, region):
    return "special-token partition" if any(table.is_special(t) for t in _distinct(region)) else None


@_classifier
def _byte_fallback(expected, got, table, region):
    return "byte fallback" if any(table.attr(t) & BYTE_BITS for t in _distinct(region)) else None


@_classifier
def _normalisation(expected, got, table, region):
    exp, gt = region
    return "normalisation" if spelled(exp, table) != spelled(gt, table) else None


@_classifier
def _split_or_merge(expected, got, table, region):
    exp, gt = region
    crosses = [any(_crosses_class(table.text(t)) for t in set(side)) for side in (exp, gt)]
    return "pre-tokenizer split" if crosses[0] != crosses[1] else "merge order"


def classify(expected: Sequence[int], got: Sequence[int], table: TokenTable) -> str:
    """The likeliest cause of an id difference, by the first rule that applies.

    The order matters: BOS/EOS placement, then special tokens in the differing
    region, then byte tokens, then whether both sides spell the same bytes
    (if not: normalisation), then whether a differing token crosses a
    letter/digit/space/punctuation boundary on one side only (a pre-tokenizer
    split) or not (merge order).
    """
    region = _region(expected, got)
    for rule in CLASSIFIERS:
        found = rule(expected, got, table, region)
        if found:
            return found
    return "merge order"  # pragma: no cover - the last rule always answers


# --- one case, one flag combination ---------------------------------------------------------

def diff_detok(expected: Mapping[tuple[bool, bool], bytes],
               got: Mapping[tuple[bool, bool], bytes | None]) -> list[dict]:
    """Detokenization differences keyed by (remove_special, unparse_special)."""
    out = []
    for key in sorted(expected):
        e, g = expected[key], got.get(key)
        if e != g:
            out.append({"remove_special": key[0], "unparse_special": key[1],
                        "expected": visible(e), "got": None if g is None else visible(g),
                        "expected_hex": e.hex(), "got_hex": None if g is None else g.hex()})
    return out


def diff_encoding(expected_ids: Sequence[int], got_ids: Sequence[int], table: TokenTable, *,
                  expected_detok: Mapping | None = None, got_detok: Mapping | None = None,
                  got_table: TokenTable | None = None) -> dict | None:
    """None when ids and detokenizations agree, else the comparator's findings."""
    expected_ids, got_ids = list(expected_ids), list(got_ids)
    detok = diff_detok(expected_detok or {}, got_detok or {})
    index = first_diff(expected_ids, got_ids)
    if index is None and not detok:
        return None
    out: dict[str, Any] = {"expected": expected_ids, "got": got_ids, "first_diff": index, "detokenize": detok}
    if index is None:
        out["category"] = "detokenize"
        return out
    start, end_e, end_g = differing_span(expected_ids, got_ids)
    pieces = spelled_span(expected_ids[start:end_e], table), spelled_span(got_ids[start:end_g], got_table or table)
    out.update(
        category=classify(expected_ids, got_ids, table),
        aligned=aligned(expected_ids, got_ids, table, got_table=got_table),
        expected_piece=visible(pieces[0]), got_piece=visible(pieces[1]),
        expected_piece_hex=pieces[0].hex(), got_piece_hex=pieces[1].hex(),
    )
    return out
