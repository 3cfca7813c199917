"""Comparisons linear in the size of an engine's reply (harness/compare/diff.py, issue 47).

An engine may answer with millions of ids: a flood of BOS ids, or a document's ids that part from
llama.cpp's only near the end. Each is judged as a case is (`diff_encoding`, then `trimmed` for
report.json) within seconds of CPU, and what is kept for display is bounded. Before, the edge stripping
popped from the front of a list: 100k BOS ids took 4.9 s, 400k 45 s, 2 million were unfinished at 120 s.
"""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager

import pytest

from harness.compare import diff, long_inputs
from tokenizer.attrs import Attr

N_VOCAB = 1000
BOS, EOS = 0, 1
TEXTS = [b"<s>", b"</s>"] + [f"\u2581w{i}".encode() for i in range(2, N_VOCAB - 3)] + [b"ab", b"a", b"b"]
AB, A, B = N_VOCAB - 3, N_VOCAB - 2, N_VOCAB - 1
PIECES = [b"<s>", b"</s>"] + [t.removeprefix("\u2581".encode()) for t in TEXTS[2:]]
TABLE = diff.TokenTable(texts=TEXTS, attrs=[int(Attr.CONTROL)] * 2 + [int(Attr.NORMAL)] * (N_VOCAB - 2),
                        pieces=PIECES, edge_ids=frozenset({BOS, EOS}))
MILLIONS = 2_000_000
# A complexity guard, not a speed measurement (bench/ measures speed): CPU seconds of this process for one
# judgement of 2 million ids (about 0.5 s here, whatever else the machine runs); a quadratic path takes hours.
BUDGET = 20.0
HANG = 300.0  # wall seconds before a runaway judgement ends the test


class TooSlow(Exception):
    pass


@contextmanager
def within(seconds: float):
    """Raise `TooSlow` in this thread when the block runs past `seconds` (a quadratic path ends the test)."""
    def stop(signum, frame):
        raise TooSlow(f"over {seconds:g} s")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def judged(expected: list[int], got: list[int]) -> dict:
    found = diff.diff_encoding(expected, got, TABLE, got_table=TABLE)
    assert found is not None
    return long_inputs.trimmed({"text": "case", **found}, TABLE)


def ordinary(n: int) -> list[int]:
    return [2 + i % (N_VOCAB - 5) for i in range(n)]


@pytest.mark.parametrize(("expected", "got", "category"), [
    pytest.param([BOS, 5, 6, 7], [BOS] * MILLIONS, "special-token partition", id="2M-bos"),
    pytest.param([BOS, 5, 6, 7], [BOS] * MILLIONS + [5, 6, 7], "BOS/EOS", id="2M-bos-then-the-text"),
    pytest.param(ordinary(MILLIONS), ordinary(MILLIONS - 3) + [999, 2, 3], "normalisation", id="2M-ids-late"),
    pytest.param(ordinary(MILLIONS), ordinary(MILLIONS)[::-1], "normalisation", id="2M-ids-all-differ"),
    pytest.param([AB] * (MILLIONS // 2), [A, B] * (MILLIONS // 2), "merge order", id="2M-ids-split-otherwise"),
])
def test_millions_of_ids_are_judged_within_seconds(expected, got, category):
    start = time.process_time()
    with within(HANG):
        entry = judged(expected, got)
    assert time.process_time() - start < BUDGET
    assert entry["category"] == category
    assert len(entry["aligned"]) <= diff.ALIGNED_ROWS + diff.CONTEXT  # display is bounded too
    assert len(entry["got"]) <= 2 * long_inputs.ID_WINDOW and entry["got_n"] == len(got)
    assert len(entry["got_piece"]) <= 2 * long_inputs.TEXT_WINDOW + 3


def test_first_diff_and_the_span_find_a_late_difference_exactly():
    ids = ordinary(100_000)
    late = ids[:99_990] + [999] + ids[99_991:]
    assert diff.first_diff(ids, late) == 99_990
    assert diff.differing_span(ids, late) == (99_990, 99_991, 99_991)
    assert diff.differing_span(ids, ids + [5]) == (100_000, 100_000, 100_001)
    assert diff.first_diff("ab" * 5000 + "x", "ab" * 5000 + "y") == 10_000  # strings too (long_inputs)


def test_a_short_difference_keeps_its_whole_pieces():
    """The bounds only touch spans longer than LONG_SPAN tokens: an ordinary finding is unchanged."""
    found = diff.diff_encoding([BOS, *range(2, 300)], [BOS, *range(2, 150), *range(151, 301)], TABLE)
    assert found["expected_piece"] == diff.visible(diff.spelled(range(150, 300), TABLE))
    assert len(found["aligned"]) == diff.ALIGNED_ROWS + diff.CONTEXT
