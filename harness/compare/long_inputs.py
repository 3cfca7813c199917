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

from .diff import TokenTable, diff_detok, spelled

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
