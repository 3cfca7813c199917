"""Boundary inputs from inside llama.cpp's Unicode tables (harness.inputs.unicode_probes).

The slice must reach the interior of every UnicodeData First/Last range and every
block whose code points llama.cpp's tables class differently from Python's
`unicodedata`; the fuzzer's character strategies must draw by llama.cpp's classes.
The differences are recomputed here code point by code point, not taken from the
module under test.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import find, settings

from harness.inputs import boundaries, strategies, unicode_probes
from harness.inputs.corpus import case_input
from tokenizer import unicode as uni


def _slice_codepoints() -> set[int]:
    """Every code point in the boundary slice, surrogates read as llama.cpp's lenient decoder reads them."""
    data = b"\n".join(case_input(c) for c in boundaries.cases(None, "slice"))
    return {ord(ch) for ch in uni.decode_lenient(data)}


@pytest.fixture(scope="module")
def in_slice() -> set[int]:
    return _slice_codepoints()


@pytest.mark.parametrize(("name", "first", "last"), unicode_probes.FIRST_LAST_RANGES,
                         ids=[r[0] for r in unicode_probes.FIRST_LAST_RANGES])
def test_every_first_last_range_interior_is_in_the_slice(in_slice, name, first, last):
    assert {first, last, (first + last) // 2} <= in_slice, name
    interior = {c for c in in_slice if first < c < last}
    assert len(interior) >= 2, f"{name}: only {sorted(map(hex, interior))} inside"


@pytest.mark.parametrize(("name", "first", "last"), unicode_probes.FIRST_LAST_RANGES,
                         ids=[r[0] for r in unicode_probes.FIRST_LAST_RANGES])
def test_first_last_ranges_are_whole_runs_of_llama_cpps_table(name, first, last):
    """The listed pairs are UnicodeData's: one class throughout, and Python agrees wherever it names them."""
    flags = uni.flags_array()[first:last + 1] & uni.MASK_CATEGORIES
    assert len(set(flags.tolist())) == 1, name
    known = [c for c in (first, (first + last) // 2) if unicodedata.category(chr(c)) != "Cn"]
    assert len({unicodedata.category(chr(c)) for c in known}) <= 1, name


_PY_FLAG = {"C": uni.CONTROL, "L": uni.LETTER, "M": uni.ACCENT_MARK, "N": uni.NUMBER, "P": uni.PUNCTUATION,
            "S": uni.SYMBOL, "Z": uni.SEPARATOR}


def _differs(cpt: int) -> bool:
    """Does llama.cpp's table class `cpt` (category flag, whitespace, lower case) unlike Python?"""
    ch, flags = chr(cpt), uni.cpt_flags(cpt)
    cat = unicodedata.category(ch)
    theirs = uni.UNDEFINED if cat == "Cn" else _PY_FLAG[cat[0]]
    lower = ch.lower()
    return ((flags & uni.MASK_CATEGORIES) != theirs or bool(flags & uni.WHITESPACE) != ch.isspace()
            or uni.tolower(cpt) != (ord(lower) if len(lower) == 1 else -1))


@pytest.fixture(scope="module")
def differing_blocks() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for cpt in range(uni.MAX_CODEPOINTS):
        if not 0xD800 <= cpt < 0xE000 and _differs(cpt):
            found.setdefault(cpt >> 7, []).append(cpt)
    return found


def test_every_differing_block_is_in_the_slice(in_slice, differing_blocks):
    assert differing_blocks, "llama.cpp's tables and Python's unicodedata agree everywhere?"
    missing = {}
    for block, cpts in differing_blocks.items():
        hit = in_slice.intersection(cpts)
        if len(hit) < min(len(cpts), unicode_probes.PER_BLOCK) or cpts[0] not in hit or cpts[-1] not in hit:
            missing[hex(block << 7)] = (len(hit), len(cpts))
    assert missing == {}


def test_the_newest_code_points_are_in_the_slice(in_slice):
    """Unicode 15.1's additions, which no Python before 3.13 names: CJK Extension I, U+2FFC..2FFF, U+31EF."""
    assert {0x2EBF0, 0x2EE5D, 0x2FFC, 0x2FFF, 0x31EF} <= in_slice
    assert uni.cpt_flags(0x2EBF0) & uni.LETTER


def test_differing_codepoints_match_the_independent_count(differing_blocks):
    assert sorted(unicode_probes.differing_codepoints()) == sorted(c for cs in differing_blocks.values() for c in cs)


def test_table_characters_follow_llama_cpps_classes():
    letters = unicode_probes.table_codepoints(("Lu", "Ll", "Lt", "Lm", "Lo"))
    assert 0x2EBF0 in letters and 0x31350 in letters and ord("a") in letters and ord("1") not in letters
    digits = unicode_probes.table_codepoints(("Nd",))
    assert 0x11F50 in digits and ord("7") in digits and ord("²") not in digits   # Kawi digit zero (15.0)
    with pytest.raises(ValueError, match="one major class"):
        unicode_probes.table_codepoints(("Nd", "Lo"))


@pytest.mark.parametrize("strategy", [strategies.weighted_categories(), strategies.digits_of_many_scripts(),
                                      strategies.combining_marks()], ids=repr)
def test_fuzzer_draws_what_python_cannot_name(strategy):
    """Each character strategy reaches code points Python's unicodedata calls unassigned and llama.cpp does not."""
    def unnamed(text):
        return any(unicodedata.category(ch) == "Cn" and uni.cpt_flags(ord(ch)) != uni.UNDEFINED for ch in text)

    assert unnamed(find(strategy, unnamed, settings=settings(max_examples=5000, database=None)))
