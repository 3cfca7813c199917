"""RWKV engine: token-identical to llama.cpp on rwkv-world and on small hand-made vocabularies.

Every expected value comes from llama.cpp through the live oracle
(`harness.oracle.llama.LlamaOracle`), never from our engine. The synthetic
rwkv-world vocabulary is built from the shipped gpt-2 one (skipped, with the
fetch command, when that is missing). The seeded 2,000-input differential run
is nightly.
"""

from __future__ import annotations

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
from tokenizer.engines.rwkv import unescape
from tokenizer.gguf.constants import Keys

pytest.importorskip("harness.oracle.llama")
pytestmark = pytest.mark.oracle

CORPUS = [
    b"", b" ", b"\n", b"\n\n", b"\n\n\n", b"Hello world", b"  leading and trailing  ",
    "ça va? Ωμέγα — 日本語のテキスト, 한국어".encode(), "🦙🦙 👨‍👩‍👧 🇯🇵".encode(),
    b"<s>", b"<s><s>x<s> ", b"a<s>b", b"[PAD50290]", b"[PAD50303]x[PAD5", b"\\x41\\n\\\\",
    b"'quoted' \"double\" \\backslash\\", b"\t\r\n\x0b\x0c\x00\x01\x7f", b"1234567890",
    b"\xff\xfe\xfd", b"abc\x80def", b"\xe3\x81", b"\xed\xa0\x80", b"\xc0\x80", b"\xef\xbb\xbfBOM",
    b"x" * 300, b" " * 64, "\u2581\u2581".encode(), "e\u0301 é".encode(),
]


pair = synthetic_pair("rwkv-world")


def test_build_is_deterministic():
    synthetic_or_skip("rwkv-world")
    assert synth.build("rwkv-world") == synth.build("rwkv-world")


# --- small vocabularies that reach the quirks ------------------------------------------------

ESCAPES = [
    pytest.param(r"\x4A", id="uppercase-hex"),       # llama.cpp folds 'A' as c - '0'
    pytest.param(r"\x4", id="hex-cut-short"),
    pytest.param("\\", id="lone-backslash"),
    pytest.param(r"ab\q", id="unknown-escape"),
    pytest.param("\\é", id="backslash-before-utf8"),
    pytest.param(r"\t\n\r\\\'", id="named-escapes"),
    pytest.param(r"\xzz\x00", id="non-hex-digits"),
]


def _bytes_vocab(extra_tokens, **meta):
    """Every single byte (escaped like a world vocabulary) plus `extra_tokens`."""
    tokens = ["<s>"] + [synth.rwkv_escape(bytes([b])) for b in range(256)] + list(extra_tokens)
    types = [TokenType.CONTROL] + [TokenType.NORMAL] * (len(tokens) - 1)
    return synth.custom(tokens, model="rwkv", types=types, extra=meta)


def _write(tmp_path, data: bytes):
    path = tmp_path / "v.gguf"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("text", ESCAPES)
def test_unescape_quirks(pair_for, tmp_path, text):
    ours, llama = pair_for(_write(tmp_path, _bytes_vocab([text])))
    assert_same_pieces(ours, llama, special=True, ids=[llama.n_tokens - 1])
    piece = unescape(text.encode())
    if piece:
        assert_same_tokens(ours, llama, [piece + b"z"], add_special=False, parse_special=False)


def test_duplicate_texts_last_id_wins(pair_for, tmp_path):
    ours, llama = pair_for(_write(tmp_path, _bytes_vocab(["ab", r"\x61b", "abc"])))
    assert_same_tokens(ours, llama, [b"ab", b"abab", b"abcab"], add_special=False,
                       parse_special=False)


@pytest.mark.parametrize("unk", [pytest.param(None, id="no-unk"), pytest.param(1, id="unk=1")])
def test_unknown_byte(pair_for, tmp_path, unk):
    tokens = ["<s>", "\\n", "a", "b", "ab"]
    meta = {} if unk is None else {Keys.UNK_ID: unk}
    data = synth.custom(tokens, model="rwkv", types=[TokenType.CONTROL] + [TokenType.NORMAL] * 4,
                        extra=meta)
    ours, llama = pair_for(_write(tmp_path, data))
    assert_same_tokens(ours, llama, [b"abz", b"zzz", "é".encode(), b"a\nb"], add_special=False,
                       parse_special=False)


def test_prefix_without_token_is_refused(tmp_path):
    """llama.cpp restarts its fragment forever when a byte starts tokens but none matches.

    That loop never ends (its output grows without bound), so llama.cpp is not
    run here; we refuse the input instead (see `tokenizer.engines.rwkv`).
    """
    path = tmp_path / "v.gguf"
    path.write_bytes(synth.custom(["\\n", "xy", "q"], model="rwkv"))
    ours = Tokenizer.from_gguf(path)
    assert ours.tokenize(b"xyq", add_special=False, parse_special=False) == [1, 2]
    with pytest.raises(UnsupportedVocab, match="byte offset 1"):
        ours.tokenize(b"qxz", add_special=False, parse_special=False)


@pytest.mark.parametrize("flag", [pytest.param(k, id=k.rsplit(".", 1)[1])
                                  for k in (Keys.ADD_BOS, Keys.ADD_EOS)])
def test_add_flags_only_reach_detokenize(pair_for, tmp_path, flag):
    """RWKV's tokenize never inserts BOS/EOS, but detokenize still strips them when asked."""
    data = _bytes_vocab(["ab"], **{flag: True, Keys.BOS_ID: 0, Keys.EOS_ID: 0})
    ours, llama = pair_for(_write(tmp_path, data))
    assert (ours.add_bos, ours.add_eos) == (llama.add_bos, llama.add_eos)
    assert_same_round_trip(ours, llama, [b"<s>ab<s>", b"ab", b"<s>"])


# --- seeded differential run -----------------------------------------------------------------

ATOMS = [t for t in CORPUS if t] + [b"<s>", b"[PAD50300]", b"\\", b"\n\n"]
RANDOM_PARTS = [
    (0.4, choice_of(ATOMS)),
    (0.8, code_points([(0x20, 0x7E), (0xA0, 0x2FFF), (0x3000, 0x1FFFF)], 6)),
    (1.0, random_bytes(4)),
]


def random_inputs(seed: int, count: int):
    """Text mixing vocabulary pieces, specials, random code points and invalid bytes."""
    return mixed_inputs(seed, count, max_parts=8, kinds=RANDOM_PARTS)


# The flag-matched differential run on random_inputs (tests/conformance.py).
from tests.conformance import test_differential  # noqa: E402,F401
