"""The comparator: first difference, alignment, readable pieces, classification.

A toy token table stands in for a vocabulary; the ids here are not tokenizer
outputs but hand-made sequences that exercise one comparator rule each.
"""

from __future__ import annotations

import pytest

from harness.compare import diff

NORMAL, CONTROL, USER, BYTE = 4, 8, 16, 32
# id: text, attr, piece
TOKENS = [
    (b"<s>", CONTROL, b""), (b"</s>", CONTROL, b""), (b"\xe2\x96\x81he", NORMAL, b" he"),
    (b"llo", NORMAL, b"llo"), (b"\xe2\x96\x81hel", NORMAL, b" hel"), (b"lo", NORMAL, b"lo"),
    (b"<0x0A>", BYTE, b"\n"), (b"<user>", USER, b"<user>"), (b"\xe2\x96\x81", NORMAL, b" "),
    (b"1", NORMAL, b"1"), (b"23", NORMAL, b"23"), (b"12", NORMAL, b"12"), (b"3", NORMAL, b"3"),
    (b"a1", NORMAL, b"a1"), (b"a", NORMAL, b"a"), (b"\xc3\xa9", NORMAL, "é".encode()),
    (b"e\xcc\x81", NORMAL, "e\u0301".encode()),
]
TABLE = diff.TokenTable(texts=[t for t, _, _ in TOKENS], attrs=[a for _, a, _ in TOKENS],
                           pieces=[p for _, _, p in TOKENS], edge_ids=frozenset({0, 1}))


@pytest.mark.parametrize(("expected", "got", "index"), [
    pytest.param([1, 2, 3], [1, 2, 3], None, id="equal"),
    pytest.param([1, 2, 3], [1, 4, 3], 1, id="middle"),
    pytest.param([1, 2], [1, 2, 3], 2, id="got-longer"),
    pytest.param([1, 2, 3], [1, 2], 2, id="expected-longer"),
    pytest.param([], [5], 0, id="empty"),
])
def test_first_diff(expected, got, index):
    assert diff.first_diff(expected, got) == index


def test_differing_span_skips_common_suffix():
    assert diff.differing_span([0, 2, 3, 6], [0, 4, 5, 3, 6]) == (1, 2, 3)


def test_aligned_rows_mark_differences_with_readable_text():
    rows = diff.aligned([0, 2, 3], [0, 4, 5], TABLE)
    assert [r["differs"] for r in rows] == [False, True, True]
    assert rows[1]["expected_text"] == "▁he" and rows[1]["got_text"] == "▁hel"


@pytest.mark.parametrize(("expected", "got", "category"), [
    pytest.param([0, 2, 3], [2, 3], "BOS/EOS", id="missing-bos"),
    pytest.param([2, 3, 1], [2, 3], "BOS/EOS", id="missing-eos"),
    pytest.param([8, 7, 8], [8, 8], "special-token partition", id="user-token"),
    pytest.param([14, 6], [14, 8], "byte fallback", id="byte-token"),
    pytest.param([15], [16], "normalisation", id="nfc-vs-nfd"),
    pytest.param([2, 3], [4, 5], "merge order", id="merge"),
    pytest.param([13, 10], [14, 11, 12], "pre-tokenizer split", id="letter-digit-split"),
])
def test_classify(expected, got, category):
    assert diff.classify(expected, got, TABLE) == category


def test_diff_encoding_none_when_all_agree():
    detok = {(False, False): b" hello"}
    assert diff.diff_encoding([2, 3], [2, 3], TABLE, expected_detok=detok, got_detok=dict(detok)) is None


def test_diff_encoding_reports_pieces_as_bytes():
    found = diff.diff_encoding([0, 2, 3], [0, 4, 5], TABLE)
    assert found["first_diff"] == 1
    assert found["expected_piece_hex"] == b" hello".hex()
    assert found["got_piece_hex"] == b" hello".hex()
    assert found["category"] == "merge order"


def test_detokenize_only_difference():
    found = diff.diff_encoding([2, 3], [2, 3], TABLE, expected_detok={(True, False): b"hello"},
                                  got_detok={(True, False): b" hello"})
    assert found["category"] == "detokenize" and found["first_diff"] is None
    assert found["detokenize"] == [{"remove_special": True, "unparse_special": False,
                                    "expected": "hello", "got": "␣hello",
                                    "expected_hex": b"hello".hex(), "got_hex": b" hello".hex()}]


@pytest.mark.parametrize(("raw", "shown"), [
    pytest.param(b"a b", "a␣b", id="space"),
    pytest.param(b"\r\n\t", "␍↵⇥", id="crlf-tab"),
    pytest.param("\u200d\u2028".encode(), "\\u{200D}\\u{2028}", id="zwj-ls"),
    pytest.param(b"\xff", "\\xff", id="invalid-utf8"),
    pytest.param(b"<b>", "<b>", id="html-left-for-the-template"),
])
def test_visible(raw, shown):
    assert diff.visible(raw) == shown


def test_unknown_ids_do_not_raise():
    assert diff.TokenTable().text(99) == b"<id 99?>"
    assert diff.aligned([99], [100], diff.TokenTable())[0]["got_text"] == "<id␣100?>"
