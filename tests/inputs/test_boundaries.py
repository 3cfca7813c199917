"""The boundary inputs derived from the tokenizer's rules (harness.inputs.boundaries)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from harness.inputs import boundaries
from harness.inputs.corpus import case_input


def _all_input() -> bytes:
    return b"\n".join(case_input(c) for c in boundaries.cases(None, "slice"))


def test_every_printable_ascii_character_is_probed_in_the_slice():
    data = _all_input()
    for c in boundaries.PRINTABLE_ASCII:
        assert f"a{c}".encode() in data and f"{c}a".encode() in data, repr(c)


def test_every_contraction_tail_in_every_case_mix_follows_ascii_and_non_ascii_letters():
    data = _all_input().decode("utf-8", "replace")
    for tail in boundaries.CONTRACTION_TAILS:
        mixes = boundaries.case_mixes(tail)
        assert len(mixes) == 2 ** len(tail)
        for mix in mixes:
            assert f"I'{mix}" in data and f"é'{mix}" in data, mix


def test_digit_runs_of_one_to_five_in_every_script():
    probes = boundaries.digit_probes()
    for zero in boundaries.DIGIT_ZEROS:
        for n in range(1, 6):
            assert any(len(p) == n and all(zero <= ord(ch) <= zero + 9 for ch in p) for p in probes), (hex(zero), n)


def test_one_character_of_every_general_category_and_the_cjk_edges():
    data = _all_input().decode("utf-8", "replace")
    for cat, ch in boundaries.CATEGORIES.items():
        assert ch in data, cat
    for cp in boundaries.CJK_EDGES:
        assert chr(cp) in data, hex(cp)


def test_slice_is_small_deterministic_and_avoids_known_crashes():
    first, second = boundaries.cases(None, "slice"), boundaries.cases(None, "slice")
    assert first == second
    assert 20 <= len(first) <= 60
    assert len({c["id"] for c in first}) == len(first)
    assert all(b"\xf4\x90\x80\x80" not in case_input(c) for c in first)  # llama.cpp's known abort


def test_full_set_hits_every_table_row():
    full = b"".join(case_input(c) for c in boundaries.cases(None, "full")).decode("utf-8", "replace")
    rows = boundaries.nfd_rows() + boundaries.lowercase_rows()
    assert all(ch in full for ch in rows)
    assert boundaries.cases(None, "off") == []


@pytest.mark.vocab
def test_vocab_probes_hold_every_special_token(require_vocab):
    probes = boundaries.vocab_probes(require_vocab("command-r"))
    assert "<|START_OF_TURN_TOKEN|>" in probes[0] and "<PAD>" in probes[0]
    assert any("\t<|END_OF_TURN_TOKEN|>\n" in p for p in probes)


@pytest.mark.vocab
def test_spelled_undoes_the_byte_level_and_spm_spellings():
    assert boundaries.spelled("Ġthe".encode()) == " the"
    assert boundaries.spelled("▁the".encode()) == " the"


@settings(max_examples=25, deadline=None)
@given(boundaries.boundary_inputs())
def test_boundary_strategy_gives_text(text):
    assert isinstance(text, str) and text


def test_numeric_tokens_reach_the_digit_rule(require_vocab):
    """qwen2 splits digits one per piece, so its only multi-digit tokens (fullwidth １０, ２０)
    are the inputs on which a digit-run bug shows (the mutant pre-qwen2-digit-runs)."""
    probes = boundaries.vocab_probes(require_vocab("qwen2"))
    assert "１０" in probes and "２０" in probes
    texts, kinds = boundaries._token_lists(require_vocab("gpt-2"))
    numeric = boundaries.numeric_tokens(texts, kinds, most=12)
    assert len(numeric) == 12 and all(s.isdigit() and len(s) >= 2 for s in numeric)
