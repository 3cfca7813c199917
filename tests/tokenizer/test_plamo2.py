"""PLaMo-2 engine: token-identical to llama.cpp on the synthetic plamo2 vocabulary and on quirk vocabularies.

Every expected value comes from llama.cpp through the live oracle
(`harness.oracle.llama.LlamaOracle`), never from our engine. The synthetic plamo2
vocabulary is built from the shipped llama-spm one (skipped, with the fetch
command, when that is missing). The seeded 2,000-input differential run is
nightly.
"""

from __future__ import annotations

import math

import pytest

from harness.models import synth

# The conformance matrix (tokenize, detokenize, pieces, per-token fields, getters) runs on
# this module's `pair` and CORPUS: pytest collects these imported tests as this module's own.
from tests.conformance import (  # noqa: F401
    assert_same_pieces,
    assert_same_round_trip,
    assert_same_tokens,
    choice_of,
    code_points,
    mixed_inputs,
    random_bytes,
    synthetic_or_skip,
    synthetic_pair,
    test_detokenize,
    test_pieces,
    test_special_ids_and_flags,
    test_tokenize,
    test_vocab_entries,
)
from tokenizer import Tokenizer, UnsupportedVocab
from tokenizer.attrs import TokenType
from tokenizer.gguf.constants import Keys

oracle_mod = pytest.importorskip("harness.oracle.llama")
pytestmark = pytest.mark.oracle

CORPUS = [
    b"", b" ", b"\n", b"Hello world", b"  leading and trailing  ", b"The quick brown fox.",
    "ça va? Ωμέγα — 日本語のテキストです。東京", "한국어 🦙🦙 👨‍👩‍👧 🇯🇵", "\ufeffBOM at start",
    "x\ufeff inside", "<|plamo:bos|>hi<|plamo:eos|>", "<|plamo:bos|>\ufeffafter special",
    "<|plamo:unk|><|plamo:op|> <|plamo:pad|>", "[PAD32100]", "[PAD32002]x[PAD3", "<0x41><0x0A>",
    "\t\r\n\x0b\x0c\x00\x01\x7f", "1234567890", "\u2581\u2581 spaces", "e\u0301 é", "\U0010FFFF\U0001F600",
    b"\xff\xfe\xfd", b"abc\x80def", b"\xe3\x81", b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80",
    b"\xf7\xbf\xbf\xbf", b"\xef\xbb\xbf\xef\xbb\xbfdouble BOM", "x" * 300, " " * 64,
]
CORPUS = [t if isinstance(t, bytes) else t.encode("utf-8", "surrogatepass") for t in CORPUS]


pair = synthetic_pair("plamo2")


def test_build_is_deterministic():
    synthetic_or_skip("plamo2")
    assert synth.build("plamo2") == synth.build("plamo2")


# --- small vocabularies that reach the quirks ------------------------------------------------

HEAD = [("<|plamo:unk|>", TokenType.UNKNOWN, 0.0), ("<|plamo:bos|>", TokenType.CONTROL, 0.0),
        ("<|plamo:eos|>", TokenType.CONTROL, 0.0), ("<|plamo:pad|>", TokenType.CONTROL, 0.0)]


def plamo2_vocab(pieces, *, byte_text="<0x{:02X}>", drop_byte=None, head=HEAD, extra=None) -> bytes:
    """Specials, the 256 byte tokens, then `pieces` as (text, score[, type])."""
    rows = list(head)
    rows += [(byte_text.format(b), TokenType.BYTE, 0.0) for b in range(256) if b != drop_byte]
    rows += [(p[0], p[2] if len(p) > 2 else TokenType.NORMAL, p[1]) for p in pieces]
    return synth.custom([r[0] for r in rows], model="plamo2", types=[r[1] for r in rows],
                        scores=[r[2] for r in rows], extra=extra)


# Each vocabulary aims at one rule of llama.cpp's suffix-table Viterbi.
QUIRKS = {
    "ties-prefer-longest": ([("ab", -2.0), ("a", -1.0), ("b", -1.0), ("abc", -3.0), ("c", -1.0)],
                            ["ab", "abc", "abab", "cab", "bca"]),
    "unknown-score-ends-candidates": (
        [("xyz", -1000.0), ("xy", -1.0), ("x", -1.0), ("y", -1.0), ("z", -1.0), ("wxy", -0.5),
         ("w", -1.0)],
        ["xyz", "wxyz", "xxyz", "wxy", "xyzxyz", "zwxyz"]),
    "near-unknown-rounding": ([("pq", -999.99996), ("p", -1.0), ("q", -1.0), ("rpq", -0.1),
                               ("r", -0.2)], ["pq", "rpq", "ppq"]),
    "invalid-scores": ([("na", math.nan), ("n", -1.0), ("a", -1.0), ("in", math.inf),
                        ("i", -1.0), ("mo", -2000.0), ("m", -1.0), ("o", -1.0), ("big", 1e6),
                        ("b", -1.0), ("g", -1.0), ("ng", -1e7)],
                       ["na", "in", "mo", "big", "bing", "nang"]),
    "rounding-half": ([("h1", -0.00005), ("h", 0.0), ("1", 0.0), ("h2", -0.00015), ("2", 0.0),
                       ("h3", 0.00005), ("3", -0.0001)], ["h1", "h2", "h3", "h1h2h3"]),
    "suffix-only-strings": ([("long", -1.0), ("ong", math.nan), ("l", -1.0), ("o", -1.0),
                             ("n", -1.0), ("g", -1.0)], ["long", "ong", "along", "longong"]),
    "byte-typed-piece": ([("zz", -0.1, TokenType.BYTE), ("z", -1.0), ("<0x4", -0.1)],
                         ["zz", "<0x41>", "A"]),
    "cjk-and-astral": ([("日本", -1.0), ("日", -2.0), ("本語", -1.5), ("語", -2.0),
                        ("\U0001F999", -1.0)], ["日本語", "本語日本", "\U0001F999\U0001F99A", "語"]),
    "specials-as-pieces": ([("<|", -1.0), ("|>", -1.0)],   # CONTROL texts score 0.0 here
                           ["<|plamo:bos|>", "<|x|>", "<|plamo:unk|>x<|plamo:pad|>"]),
}


@pytest.mark.parametrize("name", sorted(QUIRKS))
@pytest.mark.parametrize("parse_special", [pytest.param(p, id=f"parse_special={p}") for p in (False, True)])
def test_quirk_vocabularies(pair_for, tmp_path, name, parse_special):
    pieces, texts = QUIRKS[name]
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(plamo2_vocab(pieces))
    ours, llama = pair_for(path)
    inputs = [t.encode() for t in texts] + [b"\xef\xbb\xbf" + texts[0].encode(), b"\xff" + texts[-1].encode()]
    assert_same_tokens(ours, llama, inputs, add_special=True, parse_special=parse_special)
    assert_same_pieces(ours, llama, special=True)


def test_lowercase_byte_tokens(pair_for, tmp_path):
    path = tmp_path / "lower.gguf"
    path.write_bytes(plamo2_vocab([("a", -1.0)], byte_text="<0x{:02x}>"))
    ours, llama = pair_for(path)
    assert_same_tokens(ours, llama, [b"a\xc3\xa9b", b"\xff"], add_special=False, parse_special=False)
    assert_same_pieces(ours, llama, special=True)


@pytest.mark.parametrize("flags", [pytest.param({Keys.ADD_BOS: True}, id="add_bos"),
                                   pytest.param({Keys.ADD_EOS: True}, id="add_eos"),
                                   pytest.param({Keys.ADD_SPACE_PREFIX: True}, id="add_space_prefix")])
def test_flags_only_reach_detokenize(pair_for, tmp_path, flags):
    """PLaMo-2's tokenize ignores add_special; detokenize still honours the flags."""
    path = tmp_path / "flags.gguf"
    path.write_bytes(plamo2_vocab([("a", -1.0), (" a", -1.5)],
                                  extra={Keys.BOS_ID: 1, Keys.EOS_ID: 2, **flags}))
    ours, llama = pair_for(path)
    assert_same_round_trip(ours, llama, [b"<|plamo:bos|> a a<|plamo:eos|>", b" a", b"<|plamo:bos|>"])


REFUSED = {
    "missing-byte-token": {"pieces": [("a", -1.0)], "drop_byte": 0x41},
    "byte-token-at-id-0": {"pieces": [("a", -1.0)], "head": []},
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_like_llama_cpp(tmp_path, name):
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(plamo2_vocab(**REFUSED[name]))
    with pytest.raises(oracle_mod.OracleError):
        oracle_mod.LlamaOracle(path)
    with pytest.raises(UnsupportedVocab, match="byte token"):
        Tokenizer.from_gguf(path)


def test_non_utf8_piece_is_refused(tmp_path):
    """llama.cpp loads it but matches a re-encoded text; we refuse, naming the token id."""
    path = tmp_path / "latin1.gguf"
    path.write_bytes(plamo2_vocab([("ok", -1.0), ("caf\udce9", -1.0)],
                                  extra={Keys.NAME: "non-utf8"}))
    with pytest.raises(UnsupportedVocab, match="token 261"):
        Tokenizer.from_gguf(path)


# --- seeded differential run -----------------------------------------------------------------

ATOMS = [t for t in CORPUS if t] + [b"<|plamo:bos|>", b"[PAD32127]", b"\xef\xbb\xbf", b" "]
RANDOM_PARTS = [
    (0.4, choice_of(ATOMS)),
    (0.85, code_points([(0x20, 0x7E), (0xA0, 0x2FFF), (0x3000, 0x9FFF), (0x10000, 0x1FFFF)], 6)),
    (1.0, random_bytes(4)),
]


def random_inputs(seed: int, count: int):
    """Text mixing vocabulary pieces, specials, BOMs, random code points and invalid bytes."""
    return mixed_inputs(seed, count, max_parts=8, kinds=RANDOM_PARTS)


# The flag-matched differential run on random_inputs (tests/conformance.py).
from tests.conformance import test_differential  # noqa: E402,F401
