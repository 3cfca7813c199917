"""The comparator: where two tokenizations part, shown readably, with a cheap diagnosis.

`diff_encoding(...)` compares one case under one flag combination: the first
differing index, both id sequences aligned around it by index (`aligned`) and by
bytes (`by_bytes`: segments that cover the same bytes on both sides, so a split
shows as a split), the differing pieces as bytes, and the detokenization differences.
`classify(...)` guesses a likely cause when it can be derived cheaply:

    special-token partition, pre-tokenizer split, merge order, byte fallback,
    normalisation, BOS/EOS, detokenize (and engine error / oracle crash).

The guess is kept in each finding (`category`), never shown as a difference's category:
one bug gets several labels from it (a tab given the newline's id is `normalisation` under
one flag pair, `special-token partition` under another). A difference is named by its
signature (`harness.compare.signature`), whose kind is its category on the page.

Vocabulary differences are pinned to token ids by `harness.golden.records.diff_vocab`
and shown with both sides' text, score and attribute by `harness.compare.findings`. All
comparisons are on exact ids and bytes;
`visible()` and `errors="replace"` are for display only.

Every step is linear in the length of the id lists, and what is built for display is bounded:
an engine may answer with millions of ids (a flood of BOS, a document whose ids part late), and
its comparison must stay within seconds (tests/compare/test_long_replies.py). The aligned rows
stop `ALIGNED_ROWS` after the first difference (the segments `SPAN_TOKENS` tokens into each
side's differing span); a differing span's pieces are spelled up to
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
PIECE_SHOWN = 64  # bytes of one token's text or piece drawn in an aligned segment
SPAN_TOKENS = 32  # tokens of each side's differing span drawn as segments

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


# --- the sides aligned by bytes ----------------------------------------------------------------

def token_view(table: TokenTable, token: int) -> dict:
    """An id for display: its text made visible, and where its piece differs from the text (a byte-level
    BPE token `Ġto`, `à¤ķ`; an SPM `▁word`) the piece as the text it stands for (`piece`), with its
    bytes when they are not ASCII (`bytes`)."""
    text, piece = table.text(token), table.piece(token)
    out: dict[str, Any] = {"id": token, "text": visible(text[:PIECE_SHOWN])}
    if piece and piece != text:  # a token of no bytes (a BOS) is shown by its text
        out["piece"] = visible(piece[:PIECE_SHOWN])
        if not piece.isascii():
            out["bytes"] = piece[:PIECE_SHOWN].hex(" ")
    return out


def byte_aligned(expected: Sequence[int], got: Sequence[int], table: TokenTable,
                 *, got_table: TokenTable | None = None) -> dict:
    """Both id lists around their first difference as segments that cover the same bytes on both sides:
    `{"segments": [{"expected": [token_view...], "got": [...], "differs"}], "before", "after"}`.

    Each side is spelled with its own pieces. Before the first difference and after the differing span
    the ids agree, one token a segment (`CONTEXT` of them either side); inside the span a segment ends
    where both sides have a token boundary at the same byte, so a split shows as a split (`048` beside
    `04` `8`) and the rows after it line up again. At most `SPAN_TOKENS` tokens of each side's span are
    drawn; `before` counts the tokens left out before the first segment, `after` each side's after the last.
    """
    got_table = got_table or table
    start, end_e, end_g = differing_span(expected, got)
    lo = max(start - CONTEXT, 0)
    segments = [_segment([t], [t], table, got_table) for t in expected[lo:start]]
    stop_e, stop_g = min(end_e, start + SPAN_TOKENS), min(end_g, start + SPAN_TOKENS)
    i, j = start, start
    while i < stop_e or j < stop_g:
        i, j, segment = _next_segment(expected, got, (i, j), (stop_e, stop_g), (table, got_table))
        segments.append(segment)
    if (i, j) == (end_e, end_g):  # the whole span drawn: the ids after it, which agree again
        tail = expected[end_e:end_e + CONTEXT]
        segments += [_segment([t], [t], table, got_table) for t in tail]
        i, j = i + len(tail), j + len(tail)
    return {"segments": segments, "before": lo, "after": [len(expected) - i, len(got) - j]}


def _next_segment(expected: Sequence[int], got: Sequence[int], at: tuple[int, int], stop: tuple[int, int],
                  tables: tuple[TokenTable, TokenTable]) -> tuple[int, int, dict]:
    """The segment starting at `at` (an index into each side): one token of each side that has one left,
    then tokens of the side behind in bytes until both reach the same byte (or run out). A token of no
    bytes (a BOS, an EOS) facing one that has some is a segment of its own."""
    (i, j), (stop_e, stop_g) = at, stop
    empty_e = i < stop_e and not tables[0].piece(expected[i])
    empty_g = j < stop_g and not tables[1].piece(got[j])
    if empty_e and not empty_g:
        return i + 1, j, _segment([expected[i]], [], *tables)
    if empty_g and not empty_e:
        return i, j + 1, _segment([], [got[j]], *tables)
    seg_e, seg_g, size_e, size_g = [], [], 0, 0
    if i < stop_e:
        seg_e.append(expected[i])
        size_e, i = size_e + len(tables[0].piece(expected[i])), i + 1
    if j < stop_g:
        seg_g.append(got[j])
        size_g, j = size_g + len(tables[1].piece(got[j])), j + 1
    while size_e != size_g:
        if size_e < size_g and i < stop_e:
            seg_e.append(expected[i])
            size_e, i = size_e + len(tables[0].piece(expected[i])), i + 1
        elif size_g < size_e and j < stop_g:
            seg_g.append(got[j])
            size_g, j = size_g + len(tables[1].piece(got[j])), j + 1
        else:
            break
    return i, j, _segment(seg_e, seg_g, *tables)


def _segment(expected: Sequence[int], got: Sequence[int], table: TokenTable, got_table: TokenTable) -> dict:
    return {"expected": [token_view(table, t) for t in expected], "got": [token_view(got_table, t) for t in got],
            "differs": list(expected) != list(got)}


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
        by_bytes=byte_aligned(expected_ids, got_ids, table, got_table=got_table),
        expected_piece=visible(pieces[0]), got_piece=visible(pieces[1]),
        expected_piece_hex=pieces[0].hex(), got_piece_hex=pieces[1].hex(),
    )
    return out
