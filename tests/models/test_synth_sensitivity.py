"""The `sensitivity` family: each vocabulary holds what a former blind spot of the self-test needs.

Each test reads the built file (and, where the property is llama.cpp's, its
golden, recorded from llama.cpp with `python -m harness record --model NAME`)
and checks that the thing a curated mutant needs to show is there: an LSTRIP
token where BPE keeps the space, nested and overlapping specials, an EOT id
that names another token than `<|im_end|>`, reachable tab+letter and
multi-digit tokens, user-defined tokens with a file score, and a character no
piece spells or starts that lies inside pieces. The golden replay of the
family is in tests/models/test_synth.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import SetupError
from harness.golden.files import GOLDEN_DIR, load_golden
from harness.golden.records import unpack_array
from harness.models import synth
from harness.models import synth_sensitivity as sens
from harness.models.families import FAMILIES
from harness.models.paths import resolve
from harness.models.shipped import FETCH_COMMAND
from harness.selftest.mutants import load
from tokenizer.attrs import Attr, TokenType
from tokenizer.engines.bpe import Merger
from tokenizer.gguf import reader as gguf
from tokenizer.gguf.constants import Keys

NAMES = synth.names("sens-")


def _meta(name: str) -> dict:
    try:
        resolve(synth.recipe_for(name).source)
    except SetupError as exc:
        pytest.skip(f"{exc} (fetch with: {FETCH_COMMAND})")
    return dict(gguf.parse(synth.build(name), name=name).metadata)


def _golden_vocab(name: str) -> dict:
    path = GOLDEN_DIR / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"no golden for {name}; record with: python -m harness record --model {name}")
    return load_golden(path)["vocab"]


def _ids(meta: dict) -> dict[str, int]:
    return {t: i for i, t in enumerate(meta[Keys.TOKENS])}


def _kind(meta: dict, text: str) -> int:
    return int(np.asarray(meta[Keys.TOKEN_TYPE])[_ids(meta)[text]])


@pytest.mark.parametrize("name", NAMES)
def test_family_lists_every_recipe_with_its_engine(name):
    assert NAMES == sorted(sens.ENGINES) == sorted(FAMILIES[sens.FAMILY])
    model = {"bpe": "gpt2", "ugm": "t5"}[sens.ENGINES[name]]
    assert _meta(name)[Keys.MODEL] == model


def test_every_former_blind_spot_tries_a_sensitivity_vocabulary_first():
    wanted = {"special-lstrip-ignored", "special-id-order", "defaults-eog-no-im-end",
              "pre-gpt2-letters-any-space", "pre-starcoder-digit-runs", "ugm-user-defined-scored",
              "ugm-unk-score-from-max"}
    firsts = {m.id: m.vocabs[0] for m in load() if m.id in wanted}
    assert set(firsts) == wanted and set(firsts.values()) <= set(NAMES), firsts


@pytest.mark.parametrize("name", NAMES)
def test_build_is_byte_identical(name):
    _meta(name)
    assert synth.build(name) == synth.build(name)


# --- sens-bpe-specials -----------------------------------------------------------------------

def test_lstrip_mask_where_bpe_keeps_the_space():
    """special-lstrip-ignored: llama.cpp sets LSTRIP on <mask> (pre jina-v2-de), and the model is
    BPE, whose pre-tokenizer keeps a space as a token of its own (UGM's normaliser drops it)."""
    meta = _meta("sens-bpe-specials")
    assert (meta[Keys.MODEL], meta[Keys.PRE]) == ("gpt2", "jina-v2-de")
    assert _kind(meta, "<mask>") == TokenType.CONTROL
    assert "\u0120" in meta[Keys.TOKENS]  # GPT-2's byte-level space: " " alone is a token
    attrs = unpack_array(_golden_vocab("sens-bpe-specials")["attrs"], "<i4")
    assert attrs[_ids(meta)["<mask>"]] & Attr.LSTRIP  # as llama.cpp reports it


def test_nested_and_overlapping_specials_shorter_first_by_id():
    """special-id-order: one special inside another, and a suffix of one that is a prefix of
    another, the shorter with the lower id (so id order is not longest-first order)."""
    meta = _meta("sens-bpe-specials")
    ids = _ids(meta)
    for short, long in (("<probe>", "<<probe>>"), ("[tool", "tool]]")):
        assert _kind(meta, short) == _kind(meta, long) == TokenType.USER_DEFINED
        assert ids[short] < ids[long] and len(short) < len(long)
    assert "<probe>" in "<<probe>>"
    assert "[tool".endswith("tool") and "tool]]".startswith("tool")


def test_eot_id_names_another_token_than_im_end():
    """defaults-eog-no-im-end: the file's EOT id is <|endoftext|>, so <|im_end|> is
    end-of-generation by its text alone (llama.cpp's eog list in the golden says so)."""
    meta = _meta("sens-bpe-specials")
    ids = _ids(meta)
    assert meta[Keys.EOT_ID] == ids["<|endoftext|>"] != ids["<|im_end|>"]
    assert ids["<|im_end|>"] in _golden_vocab("sens-bpe-specials")["eog"]


def _merger(meta: dict) -> Merger:
    return Merger([tuple(m.encode().split(b" ")) for m in meta[Keys.MERGES]])


def test_tab_and_newline_letter_tokens_are_reachable():
    """pre-gpt2-letters-any-space: tokens joining a tab or newline to a letter, which BPE makes from
    the piece if the split ever lets the whitespace join the word (GPT-2's split does not)."""
    meta = _meta("sens-bpe-specials")
    merger = _merger(meta)
    for ws, word in sens.LETTER_JOINS:
        assert ws + word in meta[Keys.TOKENS]
        assert merger.merge([c.encode() for c in ws + word]) == [(ws + word).encode()]
    raw = [synth.gpt2_bytes(t) for t in gguf.read(resolve("gpt-2")).metadata[Keys.TOKENS] if "<" not in t]
    assert not any(b[:1] in b"\t\n" and b[1:2].isalpha() for b in raw)  # why the shipped one cannot show it


# --- sens-starcoder-digits -------------------------------------------------------------------

def test_multi_digit_tokens_are_reachable_under_starcoder_split():
    """pre-starcoder-digit-runs: two-digit (and longer) tokens, made by merges from single digits,
    on starcoder's pre-tokenizer (one digit per piece); the shipped starcoder has none."""
    meta = _meta("sens-starcoder-digits")
    assert (meta[Keys.MODEL], meta[Keys.PRE]) == ("gpt2", "starcoder")
    merger = _merger(meta)
    for number in ("00", "42", "99", "000", "100"):
        assert merger.merge([c.encode() for c in number]) == [number.encode()], number
    shipped = gguf.read(resolve("starcoder")).metadata[Keys.TOKENS]
    assert not any(len(t) > 1 and t.isdigit() for t in shipped)


# --- sens-ugm-lattice ------------------------------------------------------------------------

def test_user_defined_tokens_have_a_file_score_and_reach_the_lattice():
    """ugm-user-defined-scored: user-defined whitespace runs, scored -1000 in the file (llama.cpp
    scores them 0.0 in the lattice), with extra whitespace kept so that runs of spaces reach them."""
    meta = _meta("sens-ugm-lattice")
    assert meta[Keys.MODEL] == "t5" and meta[Keys.REMOVE_EXTRA_WS] is False
    scores = np.asarray(meta[Keys.SCORES])
    for text in sens.UGM_USER:
        assert _kind(meta, text) == TokenType.USER_DEFINED
        assert scores[_ids(meta)[text]] == sens.ADDED_TOKEN_SCORE


@pytest.mark.parametrize("hole", sens.UGM_HOLES)
def test_a_character_that_starts_no_piece_lies_inside_pieces(hole):
    """ugm-unk-score-from-max: no piece spells or starts with the hole, pieces hold it, and
    `▁` + hole scores between `▁` + unknown at min-10 (llama.cpp's) and at max-10, so the
    unknown score decides how a lone hole (`Ä`, `é`: boundary probes) is cut."""
    meta = _meta("sens-ugm-lattice")
    texts = meta[Keys.TOKENS]
    assert not any(t.startswith(hole) for t in texts)
    assert sum(hole in t for t in texts) > 10
    ids, scores = _ids(meta), np.asarray(meta[Keys.SCORES])
    normal = scores[np.asarray(meta[Keys.TOKEN_TYPE]) == TokenType.NORMAL]
    space, piece = scores[ids["\u2581"]], scores[ids["\u2581" + hole]]
    assert space + normal.min() - 10 < piece < space + normal.max() - 10


def test_selftest_judges_each_on_its_engine_in_the_main_scope():
    """The self-test's main scope (what the main job runs) holds the family, and a mutant of one
    engine's file runs on the sensitivity vocabularies of that engine only."""
    from harness.selftest.run import reachable, scope_vocabs

    main = scope_vocabs("main")
    assert set(NAMES) <= set(main)
    by_id = {m.id: m for m in load()}
    assert reachable(by_id["ugm-unk-score-from-max"], NAMES) == ["sens-ugm-lattice"]
    assert reachable(by_id["pre-gpt2-letters-any-space"], NAMES) == ["sens-bpe-specials",
                                                                     "sens-starcoder-digits"]
    assert reachable(by_id["special-id-order"], NAMES) == NAMES   # a shared module: every engine
