"""RWKV engine: token-identical to llama.cpp on rwkv-world and on small hand-made vocabularies.

Every expected value comes from llama.cpp through the live oracle
(`harness.oracle.LlamaOracle`), never from our engine. The synthetic
rwkv-world vocabulary is built from the shipped gpt-2 one (skipped, with the
fetch command, when that is missing). The seeded 2,000-input differential run
is nightly.
"""

from __future__ import annotations

import itertools
import random

import pytest

from harness import synth
from harness.models import FETCH_COMMAND, SetupError
from tokenizer import Tokenizer, UnsupportedVocab
from tokenizer.attrs import TokenType
from tokenizer.constants import Keys
from tokenizer.engines.rwkv import unescape

oracle_mod = pytest.importorskip("harness.oracle")
pytestmark = pytest.mark.oracle

FLAGS = [pytest.param(a, p, id=f"add_special={a}-parse_special={p}")
         for a, p in itertools.product((False, True), repeat=2)]
DETOK = [pytest.param(r, u, id=f"remove_special={r}-unparse_special={u}")
         for r, u in itertools.product((False, True), repeat=2)]

CORPUS = [
    b"", b" ", b"\n", b"\n\n", b"\n\n\n", b"Hello world", b"  leading and trailing  ",
    "ça va? Ωμέγα — 日本語のテキスト, 한국어".encode(), "🦙🦙 👨‍👩‍👧 🇯🇵".encode(),
    b"<s>", b"<s><s>x<s> ", b"a<s>b", b"[PAD50290]", b"[PAD50303]x[PAD5", b"\\x41\\n\\\\",
    b"'quoted' \"double\" \\backslash\\", b"\t\r\n\x0b\x0c\x00\x01\x7f", b"1234567890",
    b"\xff\xfe\xfd", b"abc\x80def", b"\xe3\x81", b"\xed\xa0\x80", b"\xc0\x80", b"\xef\xbb\xbfBOM",
    b"x" * 300, b" " * 64, "\u2581\u2581".encode(), "e\u0301 é".encode(),
]


def _world():
    try:
        return synth.ensure("rwkv-world")
    except SetupError as exc:
        pytest.skip(f"{exc} (fetch with: {FETCH_COMMAND})")


@pytest.fixture(scope="module")
def pair():
    path = _world()
    with oracle_mod.LlamaOracle(path) as oracle:
        yield Tokenizer.from_gguf(path), oracle


@pytest.mark.parametrize("add_special, parse_special", FLAGS)
def test_tokenize(pair, add_special, parse_special):
    ours, llama = pair
    for text in CORPUS:
        expected = llama.tokenize(text, add_special=add_special, parse_special=parse_special)
        assert ours.tokenize(text, add_special=add_special, parse_special=parse_special) == expected, text


@pytest.mark.parametrize("remove_special, unparse_special", DETOK)
def test_detokenize(pair, remove_special, unparse_special):
    ours, llama = pair
    for text in CORPUS:
        ids = llama.tokenize(text, add_special=True, parse_special=True)
        expected = llama.detokenize(ids, remove_special=remove_special, unparse_special=unparse_special)
        got = ours.detokenize(ids, remove_special=remove_special, unparse_special=unparse_special)
        assert got == expected, text


@pytest.mark.parametrize("special", [pytest.param(s, id=f"special={s}") for s in (False, True)])
@pytest.mark.parametrize("lstrip", [pytest.param(n, id=f"lstrip={n}") for n in (0, 1)])
def test_pieces(pair, special, lstrip):
    ours, llama = pair
    wrong = [t for t in range(llama.n_tokens)
             if ours.token_to_piece(t, lstrip=lstrip, special=special)
             != llama.token_to_piece(t, lstrip=lstrip, special=special)]
    assert not wrong, f"{len(wrong)} pieces differ, first ids {wrong[:10]}"


@pytest.mark.parametrize("field", ["token_text", "token_score", "token_attr", "is_eog", "is_control"])
def test_vocab_entries(pair, field):
    ours, llama = pair
    wrong = [t for t in range(llama.n_tokens)
             if getattr(ours, field)(t) != getattr(llama, field)(t)]
    assert not wrong, f"{field} differs for ids {wrong[:10]}"


SPECIALS = ["bos", "eos", "eot", "eom", "sep", "nl", "pad", "mask", "fim_pre", "fim_suf",
            "fim_mid", "fim_pad", "fim_rep", "fim_sep", "add_bos", "add_eos", "add_sep", "n_tokens",
            "vocab_type", "pre"]


@pytest.mark.parametrize("name", SPECIALS)
def test_special_ids_and_flags(pair, name):
    ours, llama = pair
    assert getattr(ours, name) == getattr(llama, name)


def test_build_is_deterministic():
    _world()
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


def _load_both(tmp_path, data: bytes):
    path = tmp_path / "v.gguf"
    path.write_bytes(data)
    return Tokenizer.from_gguf(path), oracle_mod.LlamaOracle(path)


@pytest.mark.parametrize("text", ESCAPES)
def test_unescape_quirks(tmp_path, text):
    ours, llama = _load_both(tmp_path, _bytes_vocab([text]))
    with llama:
        token = llama.n_tokens - 1
        assert ours.token_to_piece(token, special=True) == llama.token_to_piece(token, special=True)
        piece = unescape(text.encode())
        if piece:
            assert ours.tokenize(piece + b"z", add_special=False, parse_special=False) == \
                llama.tokenize(piece + b"z", add_special=False, parse_special=False)


def test_duplicate_texts_last_id_wins(tmp_path):
    ours, llama = _load_both(tmp_path, _bytes_vocab(["ab", r"\x61b", "abc"]))
    with llama:
        for text in (b"ab", b"abab", b"abcab"):
            assert ours.tokenize(text, add_special=False, parse_special=False) == \
                llama.tokenize(text, add_special=False, parse_special=False)


@pytest.mark.parametrize("unk", [pytest.param(None, id="no-unk"), pytest.param(1, id="unk=1")])
def test_unknown_byte(tmp_path, unk):
    tokens = ["<s>", "\\n", "a", "b", "ab"]
    meta = {} if unk is None else {Keys.UNK_ID: unk}
    ours, llama = _load_both(tmp_path, synth.custom(
        tokens, model="rwkv", types=[TokenType.CONTROL] + [TokenType.NORMAL] * 4, extra=meta))
    with llama:
        for text in (b"abz", b"zzz", "é".encode(), b"a\nb"):
            assert ours.tokenize(text, add_special=False, parse_special=False) == \
                llama.tokenize(text, add_special=False, parse_special=False)


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
def test_add_flags_only_reach_detokenize(tmp_path, flag):
    """RWKV's tokenize never inserts BOS/EOS, but detokenize still strips them when asked."""
    ours, llama = _load_both(tmp_path, _bytes_vocab(["ab"], **{flag: True, Keys.BOS_ID: 0,
                                                                Keys.EOS_ID: 0}))
    with llama:
        assert (ours.add_bos, ours.add_eos) == (llama.add_bos, llama.add_eos)
        for text in (b"<s>ab<s>", b"ab", b"<s>"):
            ids = llama.tokenize(text, add_special=True, parse_special=True)
            assert ours.tokenize(text, add_special=True, parse_special=True) == ids
            for remove, unparse in itertools.product((False, True), repeat=2):
                assert ours.detokenize(ids, remove_special=remove, unparse_special=unparse) == \
                    llama.detokenize(ids, remove_special=remove, unparse_special=unparse)


# --- seeded differential run -----------------------------------------------------------------

def random_inputs(seed: int, count: int):
    """Text mixing vocabulary pieces, specials, random code points and invalid bytes."""
    rng = random.Random(seed)
    atoms = [t for t in CORPUS if t] + [b"<s>", b"[PAD50300]", b"\\", b"\n\n"]
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 8)):
            roll = rng.random()
            if roll < 0.4:
                parts.append(rng.choice(atoms))
            elif roll < 0.8:
                parts.append("".join(chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x2FFF),
                                                     rng.randint(0x3000, 0x1FFFF)]))
                                     for _ in range(rng.randint(1, 6))).encode("utf-8", "surrogatepass"))
            else:
                parts.append(bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 4))))
        yield b"".join(parts)


def differential(pair, seed: int, count: int) -> list:
    ours, llama = pair
    failures = []
    for text in random_inputs(seed, count):
        for add, parse in itertools.product((False, True), repeat=2):
            ids = llama.tokenize(text, add_special=add, parse_special=parse)
            if ours.tokenize(text, add_special=add, parse_special=parse) != ids:
                failures.append((text, add, parse))
            elif ours.detokenize(ids, remove_special=add, unparse_special=parse) != \
                    llama.detokenize(ids, remove_special=add, unparse_special=parse):
                failures.append((text, "detokenize", add, parse))
    return failures


def test_differential_small(pair):
    assert differential(pair, seed=1, count=150) == []


@pytest.mark.nightly
def test_differential_2000(pair):
    assert differential(pair, seed=2, count=2000) == []
