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
    if len(ids) <= LONG_IDS and all(len(d.get("llama_text") or "") <= LONG_TEXT for d in decodes):
        return entry
    out = {**entry, "decode": [_cut_decode(d) for d in decodes]}
    if len(ids) > LONG_IDS:
        index = _token_at(ids, table, _first_byte_diff(decodes[0]) if decodes else 0)
        lo, hi = max(index - ID_WINDOW, 0), index + ID_WINDOW
        out.update(ids=list(ids[lo:hi]), ids_window=[lo, hi], ids_n=len(ids), decode_at=index)
    text = entry.get("text") or ""
    if len(text) > LONG_TEXT:
        at = _first_char_diff(decodes[0].get("llama_text") or "", decodes[0].get("original_text") or "") \
            if decodes else 0
        start = max(at - TEXT_WINDOW, 0)
        out["text"] = text[start:at + TEXT_WINDOW]
        out["text_window"] = [start, min(at + TEXT_WINDOW, len(text)), len(text)]
    return out


def _first_byte_diff(decode: Mapping[str, Any]) -> int:
    a, b = bytes.fromhex(decode.get("llama_hex") or ""), bytes.fromhex(decode.get("original_hex") or "")
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _first_char_diff(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


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
    """One differing decode (`decoding.shown`) with both texts and both hex spellings cut around their
    first difference; the full lengths kept."""
    e, g = decode.get("llama_text") or "", decode.get("original_text") or ""
    if max(len(e), len(g)) <= LONG_TEXT:
        return decode
    at, hex_at = _first_char_diff(e, g), 2 * _first_byte_diff(decode)
    lo, hex_lo = max(at - TEXT_WINDOW, 0), max(hex_at - 2 * TEXT_WINDOW, 0)
    out = {**decode, "llama_text": e[lo:at + TEXT_WINDOW], "original_text": g[lo:at + TEXT_WINDOW],
           "window": [lo, at + TEXT_WINDOW], "llama_chars": len(e), "original_chars": len(g),
           "llama_hex": (decode.get("llama_hex") or "")[hex_lo:hex_at + 2 * TEXT_WINDOW],
           "original_hex": (decode.get("original_hex") or "")[hex_lo:hex_at + 2 * TEXT_WINDOW],
           "hex_window": [hex_lo // 2, (hex_at + 2 * TEXT_WINDOW) // 2]}
    for key in ("original_raw", "original_cleaned"):
        if isinstance(decode.get(key), str) and len(decode[key]) > LONG_TEXT:
            out[key] = decode[key][lo:at + TEXT_WINDOW]
    return out


def _cut_output(diff: dict[str, Any]) -> dict[str, Any]:
    """One detokenize difference with both sides cut around their first differing character."""
    e, g = diff.get("expected") or "", diff.get("got") or ""
    if max(len(e), len(g)) <= LONG_TEXT:
        return diff
    at = next((i for i, (a, b) in enumerate(zip(e, g)) if a != b), min(len(e), len(g)))
    lo = max(at - TEXT_WINDOW, 0)
    out = {**diff, "expected": e[lo:at + TEXT_WINDOW], "got": g[lo:at + TEXT_WINDOW], "window": [lo, at + TEXT_WINDOW],
           "expected_chars": len(e), "got_chars": len(g)}
    for key in ("expected_hex", "got_hex"):
        value = diff.get(key) or ""
        hex_at = next((i for i, (a, b) in enumerate(zip(diff.get("expected_hex") or "", diff.get("got_hex") or ""))
                       if a != b), 0) // 2 * 2
        out[key] = value[max(hex_at - 2 * TEXT_WINDOW, 0):hex_at + 2 * TEXT_WINDOW]
    return out
