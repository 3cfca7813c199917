"""The sweeps' inputs (harness/inputs/sweeps.py): what each enumerates, how a size keeps a spread, `--sweeps` read."""

from __future__ import annotations

import unicodedata

import pytest

from harness.inputs import sweeps


def test_added_forms_hold_every_whitespace_pair_around_the_token_in_four_contexts():
    forms = sweeps.added_forms("<t>")
    assert len(forms) == sweeps.FORMS_PER_TOKEN == 256
    for before in sweeps.AROUND:
        for after in sweeps.AROUND:
            core = f"{before}<t>{after}"
            assert {core, f"a{core}", f"{core}z", f"a{core}z"} <= set(forms)
    assert "a\r\n<t>\t\tz" in forms and "<t>" in forms


def test_added_inputs_number_each_token_s_forms_in_a_block_of_their_own():
    items = sweeps.added_inputs(["<a>", "<b>", "<a>", "", "x" * (sweeps.MAX_TOKEN_BYTES + 1)])
    assert len(items) == 2 * 256  # repeats, empty and over-long tokens left out
    assert items[0] == (0, "<a>") and items[256] == (256, "<b>")
    assert [i for i, _ in items] == list(range(512))


def test_vocab_inputs_are_the_pieces_that_are_text_indexed_by_token_id():
    pieces = [b"<s>", b" hello", b"\xe4\xb8", b"", "é".encode(), b"x"]
    assert sweeps.vocab_inputs(pieces, skip=[0]) == [(1, " hello"), (4, "é"), (5, "x")]


def test_unicode_points_leave_out_surrogates_private_use_and_noncharacters():
    flags = [1] * 0x110000  # llama.cpp's table: every code point undefined
    flags[0x0378] = 0  # unassigned to Python, assigned in llama.cpp's table: kept
    points = set(sweeps.unicode_points(flags, extra=[0x1FAE9]))
    assert {0x41, 0x0378, 0x1FAE9, 0x10FFFF - 2} & points == {0x41, 0x0378, 0x1FAE9}
    assert not {0xD800, 0xDFFF, 0xE000, 0xF0000, 0x10FFFD, 0xFFFE, 0x1FFFF, 0xFDD0} & points
    unassigned = next(cp for cp in range(0x0378, 0x1000) if unicodedata.category(chr(cp)) == "Cn" and cp != 0x0378)
    assert unassigned not in points
    assert sweeps.unicode_inputs([0x41]) == [(0x41, "aA A's")]


def test_ascii_inputs_are_unique_texts_of_two_characters_and_spaces():
    items = sweeps.ascii_inputs()
    texts = [text for _, text in items]
    assert len(texts) == len(set(texts)) > 100_000
    assert {" a b", "a b ", "a  b", "\x01\x7f", "  ", "ab  "} <= set(texts)
    assert "" not in texts and max(len(t) for t in texts) == 6


def test_the_screen_order_is_spread_so_that_a_cut_keeps_the_whole_covered():
    assert sweeps.spread_order(8) == [0, 4, 2, 6, 1, 5, 3, 7]
    for n in (0, 1, 5, 1000):
        assert sorted(sweeps.spread_order(n)) == list(range(n))
    items = [(i, str(i)) for i in range(1000)]
    first = sweeps.sized(sweeps.screen_order(items), 10)
    assert len(first) == 10 and max(i for i, _ in first) > 850 and min(i for i, _ in first) == 0
    assert sweeps.sized(items, None) == items
    assert sweeps.screen_order(items, ordered=True) == items  # the added sweep: its tokens' own priority


def test_the_option_reads_all_none_default_and_sized_names():
    assert sweeps.parse("all") == dict.fromkeys(sweeps.NAMES)
    assert sweeps.parse("none") == {}
    assert sweeps.parse("default") == sweeps.DEFAULT_SIZES
    assert sweeps.parse("vocab, unicode=5000") == {"vocab": None, "unicode": 5000}
    assert sweeps.describe({"vocab": None, "unicode": 5000}) == "vocab,unicode=5000"
    for bad, says in (("vocab,bogus", "unknown sweep 'bogus'"), ("vocab=0", "whole number"),
                      ("vocab=x", "whole number"), ("vocab,vocab", "named twice"), ("", "unknown sweep")):
        with pytest.raises(ValueError, match=says):
            sweeps.parse(bad)
