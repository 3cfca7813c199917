"""Findings on long inputs kept readable: a window around the first difference, not the whole document.

A document case (`harness.inputs.documents`) has tens of thousands of ids per
side and hundreds of KB of text; a finding about it keeps the ids and text
around the first difference (`trimmed`), with the window's place and both
lengths, so report.json stays small and the difference is still shown exactly.
A golden replay of a document knows llama.cpp's ids only as a digest per block
(`harness.golden.digest`): `digest_mismatch` names the first differing block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .diff import TokenTable, diff_detok, first_diff, spelled

LONG_IDS = 1024      # id lists longer than this are cut to a window
LONG_TEXT = 4096     # inputs and outputs longer than this (characters) are cut too
ID_WINDOW = 48       # ids kept on either side of the first difference
TEXT_WINDOW = 300    # characters kept on either side


def digest_mismatch(expected: dict, got_ids: Sequence[int], expected_detok: Mapping | None,
                    got_detok: Mapping | None) -> dict[str, Any]:
    """A mismatch against a digest record: where the first differing block of ids starts."""
    where = expected.get("digest_diff") or {}
    return {"expected": None, "got": list(got_ids), "first_diff": where.get("start"), "category": "long document",
            "digest_diff": where, "detokenize": diff_detok(expected_detok or {}, got_detok or {})}


def trimmed(entry: dict[str, Any], got_table: TokenTable) -> dict[str, Any]:
    """`entry` with long id lists, input text and outputs cut to a window around the first difference."""
    got, expected = entry.get("got") or [], entry.get("expected") or []
    text = entry.get("text") or ""
    if max(len(got), len(expected)) <= LONG_IDS and len(text) <= LONG_TEXT:
        return entry
    index = entry.get("first_diff") or 0
    lo, hi = max(index - ID_WINDOW, 0), index + ID_WINDOW
    out = {**entry, "ids_window": [lo, hi], "expected_n": None if entry.get("expected") is None else len(expected),
           "got_n": len(got), "got": list(got[lo:hi])}
    if entry.get("expected") is not None:
        out["expected"] = list(expected[lo:hi])
    if len(text) > LONG_TEXT:  # about where the difference is: the engine's pieces up to it
        offset = len(spelled(got[:index], got_table).decode("utf-8", "replace"))
        start = max(offset - TEXT_WINDOW, 0)
        out["text"] = text[start:offset + TEXT_WINDOW]
        out["text_window"] = [start, min(offset + TEXT_WINDOW, len(text)), len(text)]
    out["detokenize"] = [_cut_output(d) for d in entry.get("detokenize") or []]
    for key in ("expected_piece", "got_piece", "expected_piece_hex", "got_piece_hex"):
        if len(entry.get(key) or "") > 2 * TEXT_WINDOW:  # a differing span may run for the rest of the document
            out[key] = entry[key][:2 * TEXT_WINDOW] + "..."
    return out


def rows_window(lists: Sequence[Sequence[int] | None], at: int | None = None) -> tuple[int, int] | None:
    """The ids `[lo, hi)` a card's rows of tokens keep when any side is longer than `2 * ID_WINDOW`:
    `ID_WINDOW` either side of the first index where two sides differ (a card draws fewer still), or of
    `at` when no two differ (a decode finding: the same ids, decoded otherwise); None when every side is
    short enough to keep whole. The finding's own id lists are cut by `trimmed`."""
    present = [list(ids) for ids in lists if ids is not None]
    if not present or max(len(ids) for ids in present) <= 2 * ID_WINDOW:
        return None
    diffs = [d for i, a in enumerate(present) for b in present[i + 1:] if (d := first_diff(a, b)) is not None]
    index = min(diffs, default=min(len(ids) for ids in present) if at is None else at)
    return max(index - ID_WINDOW, 0), index + ID_WINDOW


def trimmed_decode(entry: dict[str, Any], table: TokenTable) -> dict[str, Any]:
    """A `decode` finding (llama.cpp's `ids`, the differing decodes in `decode`) cut like `trimmed`: the
    ids around the token where llama.cpp's and the original's first decode part, each decode around its
    first differing character."""
    ids, decodes = entry.get("ids") or [], entry.get("decode") or []
    texts = [len(d.get(key) or "") for d in decodes for key in ("llama_text", "original_text")]
    if len(ids) <= LONG_IDS and max(texts, default=0) <= LONG_TEXT:
        return entry
    out = {**entry, "decode": [_cut_decode(d) for d in decodes]}
    first = decodes[0] if decodes else {}
    if len(ids) > LONG_IDS:
        index = _token_at(ids, table, _parting(first.get("llama_hex") or "", first.get("original_hex") or "") // 2)
        lo, hi = max(index - ID_WINDOW, 0), index + ID_WINDOW
        out.update(ids=list(ids[lo:hi]), ids_window=[lo, hi], ids_n=len(ids), decode_at=index)
    text = entry.get("text") or ""
    if len(text) > LONG_TEXT:
        at = _parting(first.get("llama_text") or "", first.get("original_text") or "")
        start = max(at - TEXT_WINDOW, 0)
        out["text"] = text[start:at + TEXT_WINDOW]
        out["text_window"] = [start, min(at + TEXT_WINDOW, len(text)), len(text)]
    return out


def _parting(a: Sequence, b: Sequence) -> int:
    """Where `a` and `b` part: their first differing index, or the shorter length."""
    at = first_diff(a, b)
    return min(len(a), len(b)) if at is None else at


def _token_at(ids: Sequence[int], table: TokenTable, at: int) -> int:
    """The index of the token whose piece holds byte `at` of the ids' spelling (the last token past it)."""
    seen = 0
    for index, token in enumerate(ids):
        try:
            seen += len(table.piece(token))
        except Exception:  # noqa: BLE001 - an id the table lacks: a window is display only
            seen += 1
        if seen > at:
            return index
    return max(len(ids) - 1, 0)


def _cut_decode(decode: dict[str, Any]) -> dict[str, Any]:
    """One differing decode (`decoding.shown`) cut by `_cut_pair`; the original's raw and cleaned texts
    to the same window."""
    return _cut_pair(decode, ("llama_text", "original_text"), ("llama_hex", "original_hex"),
                     ("llama_chars", "original_chars"), also=("original_raw", "original_cleaned"))


def _cut_output(diff: dict[str, Any]) -> dict[str, Any]:
    """One detokenize difference cut by `_cut_pair`."""
    return _cut_pair(diff, ("expected", "got"), ("expected_hex", "got_hex"), ("expected_chars", "got_chars"))


def _cut_pair(diff: dict[str, Any], texts: tuple[str, str], hexes: tuple[str, str], counts: tuple[str, str],
              also: tuple[str, ...] = ()) -> dict[str, Any]:
    """`diff` with its two texts (keys `texts`) cut around their first differing character and its two hex
    spellings (`hexes`) around their first differing byte, when a text is longer than `LONG_TEXT`; the
    whole lengths under `counts`, the windows under `window` (characters) and `hex_window` (bytes). The
    texts under `also` are cut to the characters' window."""
    a, b = (diff.get(key) or "" for key in texts)
    if max(len(a), len(b)) <= LONG_TEXT:
        return diff
    at = _parting(a, b)
    lo, hi = max(at - TEXT_WINDOW, 0), at + TEXT_WINDOW
    out = {**diff, texts[0]: a[lo:hi], texts[1]: b[lo:hi], "window": [lo, hi], counts[0]: len(a), counts[1]: len(b)}
    spelled_a, spelled_b = (diff.get(key) or "" for key in hexes)
    hex_at = _parting(spelled_a, spelled_b) // 2 * 2
    hex_lo, hex_hi = max(hex_at - 2 * TEXT_WINDOW, 0), hex_at + 2 * TEXT_WINDOW
    out.update({hexes[0]: spelled_a[hex_lo:hex_hi], hexes[1]: spelled_b[hex_lo:hex_hi],
                "hex_window": [hex_lo // 2, hex_hi // 2]})
    for key in also:
        if isinstance(diff.get(key), str) and len(diff[key]) > LONG_TEXT:
            out[key] = diff[key][lo:hi]
    return out
