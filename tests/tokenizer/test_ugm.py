"""UGM (t5) engine: token-identical to llama.cpp on nomic-bert-moe and on cut-down variants.

Every expected value comes from llama.cpp through the live oracle
(`harness.oracle.llama.LlamaOracle`), never from our engine. nomic-bert-moe ships no
`.inp/.out` vectors, so the seeded differential run is the conformance test:
100 inputs by default, 2,000 nightly (`--nightly`), each under all four
tokenize flag combinations and all four detokenize flag combinations.

The variants keep nomic's first 6,000 pieces and its charsmap and change one
thing each: the space flags, user-defined tokens (whose *partial* prefixes
bypass the charsmap in llama.cpp), no charsmap, scores that make the lattice
sums inexact (so the word cache must be off), and tokens that end inside the
space symbol or inside a code point.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harness.models import gguf_writer
from tests.conformance import (
    DETOK,
    ENCODER_GETTERS,
    FLAGS,
    SPECIAL,
    TOKEN_FIELDS,
    assert_same_detokenize,
    assert_same_field,
    assert_same_getter,
    assert_same_pieces,
    assert_same_tokens,
    choice_of,
    code_points,
    differential,
    mixed_inputs,
    random_bytes,
    sample_pieces,
    shipped_or_skip,
    write_variants,
)
from tokenizer import Tokenizer, UnsupportedVocab
from tokenizer.attrs import TokenType
from tokenizer.gguf import reader as gguf
from tokenizer.gguf.constants import Keys, ValueType

oracle_mod = pytest.importorskip("harness.oracle.llama")
pytestmark = pytest.mark.oracle

CORPUS = [
    b"", b" ", b"  ", b"\t", b"\n", b"\n\n", b" \n ", b"Hello world", b" Hello world ",
    b"  leading and   inner   spaces  ", "Äpfel über naïve Straße".encode(),
    "ça va? Ωμέγα — 日本語のテキスト, 한국어".encode(), "🦙🦙 👨‍👩‍👧 🇯🇵".encode(),
    "ＦＵＬＬ ｗｉｄｔｈ ｱｲｳ ①②③ ﬁﬂ ㍿".encode(), "e\u0301 a\u0308 \u1100\u1161\u11a8".encode(),
    "\u2581 \u2581\u2581x".encode(), b"<s>", b"</s>x<s>", b"<mask> <unk>", b"[PAD250001]",
    b"\x00a\x00", b"\x01\x02\x7f", b"\xff\xfe", b"abc\x80def", b"\xe3\x81", b"\xed\xa0\x80",
    b"\xc0\x80\xc1\x81", b"\xf4\x90\x80\x80", b"\xef\xbb\xbfBOM", b"x" * 300, b" " * 64,
    "\ufffd".encode(), b"3.14159 1,000,000 $5",
]


def _nomic():
    return shipped_or_skip("nomic-bert-moe")


# --- inputs ----------------------------------------------------------------------------------

ATOMS = [t for t in CORPUS if t] + [
    "\u3000".encode(), "\u00a0".encode(), b"\r\n", "\u0301".encode(), "Ⅻ".encode(), b"<extra",
    "\u2028".encode(), "İ".encode(), "ǅ".encode(), "\ufeff".encode(),
]


def _piece_as_text(pieces):
    return lambda rng: rng.choice(pieces).replace("\u2581".encode(), b" ")


def random_inputs(seed: int, count: int, pieces: list[bytes]):
    """Vocabulary pieces, spaces, charsmap-relevant characters, random code points, bad bytes."""
    return mixed_inputs(seed, count, max_parts=10, kinds=[
        (0.35, _piece_as_text(pieces)),
        (0.6, choice_of(ATOMS)),
        (0.7, lambda rng: b" " * rng.randint(1, 3)),
        (0.9, code_points([(0x20, 0x7E), (0xA0, 0x33FF), (0xF900, 0xFFEF), (0x10000, 0x2FFFF)], 5)),
        (1.0, random_bytes(3)),
    ])


# --- nomic-bert-moe --------------------------------------------------------------------------

@pytest.fixture
def nomic(pair_for):
    return pair_for(_nomic())


@pytest.mark.parametrize("add_special, parse_special", FLAGS)
def test_tokenize_corpus(nomic, add_special, parse_special):
    assert_same_tokens(*nomic, CORPUS, add_special=add_special, parse_special=parse_special)


@pytest.mark.parametrize("remove_special, unparse_special", DETOK)
def test_detokenize_corpus(nomic, remove_special, unparse_special):
    assert_same_detokenize(*nomic, CORPUS, remove_special=remove_special,
                           unparse_special=unparse_special)


@pytest.mark.parametrize("special", SPECIAL)
def test_every_piece(nomic, special):
    assert_same_pieces(*nomic, special=special)


# Text, score and attribute only: is_eog and is_control are not compared for nomic.
@pytest.mark.parametrize("field", TOKEN_FIELDS[:3])
def test_every_token_field(nomic, field):
    assert_same_field(*nomic, field)


@pytest.mark.parametrize("name", ENCODER_GETTERS)
def test_getters(nomic, name):
    assert_same_getter(*nomic, name)


# inputs per differential run (default, nightly) and their (input, piece) seeds
BUDGETS = [100, pytest.param(2000, marks=pytest.mark.nightly)]
SEEDS = {100: (1, 0), 2000: (2, 2)}


@pytest.mark.parametrize("budget", BUDGETS)
def test_differential(nomic, budget):
    ours, llama = nomic
    input_seed, piece_seed = SEEDS[budget]
    assert differential(ours, llama, random_inputs(input_seed, budget, sample_pieces(ours, seed=piece_seed))) == []


def test_long_input_uses_word_cache_exactly(nomic):
    ours, llama = nomic
    text = b" ".join(random_inputs(3, 400, sample_pieces(ours, seed=3)))
    assert_same_tokens(ours, llama, [text], add_special=False, parse_special=False)


# --- variants --------------------------------------------------------------------------------

KEEP = 6000
EXTRA_USER = ["<extra_id_0>", "<x>", "éé", "\u2581\u2581", "zx", "ｱｲ"]


def variant(*, tokens=(), types=(), scores=(), drop_charsmap=False, **keys) -> bytes:
    """nomic's first KEEP pieces (and its charsmap), plus `tokens`, with `keys` overridden."""
    src = gguf.read(_nomic())
    meta = dict(src.metadata)
    meta[Keys.TOKENS] = list(meta[Keys.TOKENS][:KEEP]) + list(tokens)
    meta[Keys.TOKEN_TYPE] = np.concatenate([meta[Keys.TOKEN_TYPE][:KEEP],
                                            np.asarray(types, dtype="<i4")])
    meta[Keys.SCORES] = np.concatenate([meta[Keys.SCORES][:KEEP], np.asarray(scores, dtype="<f4")])
    meta.pop(Keys.MASK_ID, None)
    if drop_charsmap:
        meta.pop(Keys.PRECOMPILED_CHARSMAP)
    for key, value in keys.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    return gguf_writer.build(meta, types=src.types)


def _flags(prefix: bool, merge: bool) -> dict:
    return {Keys.ADD_SPACE_PREFIX: prefix, Keys.REMOVE_EXTRA_WS: merge}


VARIANTS = {
    "prefix-merge": lambda: variant(),
    "no-prefix-merge": lambda: variant(**_flags(False, True)),
    "prefix-no-merge": lambda: variant(**_flags(True, False)),
    "no-prefix-no-merge": lambda: variant(**_flags(False, False)),
    "user-defined": lambda: variant(tokens=EXTRA_USER, types=[TokenType.USER_DEFINED] * 6,
                                    scores=[-5.0] * 6, **_flags(True, False)),
    "no-charsmap": lambda: variant(drop_charsmap=True),
    "inexact-scores": lambda: variant(tokens=["\u2581tiny"], types=[TokenType.NORMAL],
                                      scores=[-1e-30]),
    "odd-tokens": lambda: variant(tokens=[b"\xe2", b"a\xe2", b"\xe2\x96", "x\u2581y", b"\xc3"],
                                  types=[TokenType.NORMAL] * 5, scores=[-1.0] * 5),
    "no-unk-key": lambda: variant(**{Keys.UNK_ID: None}),
    # exact ties: "▁ꙮꙮꙮ" is ▁ꙮꙮ+ꙮ, ▁ꙮ+ꙮꙮ or ▁ꙮ+ꙮ+ꙮ, all -6.5 (llama.cpp keeps the earliest start)
    "ties": lambda: variant(tokens=["\u2581\ua66e\ua66e", "\u2581\ua66e", "\ua66e", "\ua66e\ua66e"],
                            types=[TokenType.NORMAL] * 4, scores=[-4.0, -1.5, -2.5, -5.0]),
}


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    return write_variants(tmp_path_factory.mktemp("ugm"), VARIANTS)


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in VARIANTS])
def test_variant_differential(pair_for, variants, name):
    ours, llama = pair_for(variants[name])
    pieces = sample_pieces(ours, 500) + [t.encode() for t in EXTRA_USER]
    inputs = list(itertools.chain(CORPUS, random_inputs(4, 60, pieces)))
    assert differential(ours, llama, inputs) == []


@pytest.mark.nightly
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in VARIANTS])
def test_variant_differential_500(pair_for, variants, name):
    ours, llama = pair_for(variants[name])
    pieces = sample_pieces(ours, 2000, seed=5) + [t.encode() for t in EXTRA_USER]
    assert differential(ours, llama, random_inputs(5, 500, pieces)) == []


def test_variant_shortcuts_are_where_expected(variants):
    """The cases above reach the code paths they are meant to (not a parity check)."""
    lattice = Tokenizer.from_gguf(variants["inexact-scores"]).engine.lattice
    assert lattice.exact_below < 10
    odd = Tokenizer.from_gguf(variants["odd-tokens"]).engine.lattice
    assert not odd.can_split and odd.firsts is None  # tokens shorter than their lead byte claims
    user = Tokenizer.from_gguf(variants["user-defined"]).engine.prefix_normalizer
    assert user.candidates


def test_missing_eos_with_add_special_is_refused(tmp_path):
    """t5's default EOS id 1 is dropped in a one-token vocabulary while add_eos stays on:
    llama.cpp aborts (GGML_ASSERT) on tokenize with add_special, so we refuse that call."""
    from harness.models import synth
    path = tmp_path / "one.gguf"
    path.write_bytes(synth.custom(["\n"], model="t5", scores=[-1.0]))
    ours = Tokenizer.from_gguf(path)
    assert ours.eos is None and ours.add_eos
    with oracle_mod.LlamaOracle(path) as llama:
        assert ours.nl == llama.nl
        assert_same_tokens(ours, llama, [b"\n", b"\n\n", b"x\n"], add_special=False, parse_special=False)
    with pytest.raises(UnsupportedVocab, match="EOS"):
        ours.tokenize(b"hi", add_special=True, parse_special=False)


def test_unknown_newline_beyond_vocabulary_is_refused_like_llama(tmp_path):
    """Loading tokenizes "\\n" with t5's default unknown id 2 before the ids are checked:
    in a two-token vocabulary llama.cpp's load fails, and so does ours."""
    from harness.models import synth
    path = tmp_path / "two.gguf"
    path.write_bytes(synth.custom(["\u2581hi", "x"], model="t5", scores=[-1.0, -2.0]))
    with pytest.raises(oracle_mod.OracleError, match="range"):
        oracle_mod.LlamaOracle(path)
    with pytest.raises(UnsupportedVocab, match="default unknown id 2"):
        Tokenizer.from_gguf(path)


def test_variant_vocab_written_with_reader_types(variants):
    f = gguf.read(variants["prefix-merge"])
    assert f.types[Keys.PRECOMPILED_CHARSMAP] == (ValueType.ARRAY, ValueType.UINT8)


# --- the batched Viterbi (engines.ugm_batch) -------------------------------------------------

BATCHED = ["nomic", "prefix-no-merge", "user-defined", "no-charsmap", "odd-tokens", "ties", "no-unk-key"]
TIES = [("\ua66e" * n) for n in range(1, 8)] + ["x\ua66e\ua66e", "\ua66e\ua66ex"]


def _batch_path(variants, name):
    return _nomic() if name == "nomic" else variants[name]


@pytest.fixture(scope="module")
def batch_inputs() -> list[bytes]:
    """The boundary slice of nomic-bert-moe and the first 20,000 bytes of the diverse corpus."""
    from harness.inputs.boundaries import cases
    from harness.inputs.documents import DIVERSE

    probes = [bytes.fromhex(c["bytes"]) if "bytes" in c else c["text"].encode("utf-8", "surrogatepass")
              for c in cases(_nomic())]
    ties = " ".join(TIES).encode()
    return probes + [ties, DIVERSE.read_bytes()[:20_000]]


@pytest.fixture
def batch_runs(monkeypatch):
    """How many words each `BatchViterbi.run` segmented itself (the batch built at once)."""
    from tokenizer.engines import ugm, ugm_batch

    monkeypatch.setattr(ugm, "BUILD_AFTER", 0)
    counts: list[int] = []
    run = ugm_batch.BatchViterbi.run

    def counted(self, words):
        out = run(self, words)
        counts.append(len(out[1]))
        return out

    monkeypatch.setattr(ugm_batch.BatchViterbi, "run", counted)
    return counts


@pytest.mark.parametrize("name", BATCHED)
def test_batched_viterbi_gives_llama_ids(pair_for, variants, batch_inputs, batch_runs, name):
    """One call on the boundary slice and a diverse sample, long enough for the batch:
    llama.cpp's ids, and the batch did segment most words."""
    path = _batch_path(variants, name)
    ours, llama = Tokenizer.from_gguf(path), pair_for(path)[1]  # ours with an empty cache
    text = b"\n".join(batch_inputs)
    assert_same_tokens(ours, llama, [text], add_special=False, parse_special=False)
    if ours.engine.lattice.can_split:
        assert sum(batch_runs) > 2000
    else:
        assert not batch_runs  # a token spans a space symbol: no word cache, no batch


def _words(tok, texts):
    """The words `Lattice.by_words` gets for `texts` (merged spaces)."""
    found = []
    for text in texts:
        data, _ = tok.engine.prefix_normalizer(text)
        found += data.split(b" ")
    return list(dict.fromkeys(found))


@pytest.mark.parametrize("name", BATCHED)
def test_batched_viterbi_gives_the_per_word_ids(variants, batch_inputs, name):
    """Every word of the inputs, every token's text as a word (and cut one byte short,
    so inside a code point), segmented by the batch: the per-word Python pass's ids.
    The words it leaves to the caller are the ones whose bytes are not whole code points
    and at most the three longest."""
    tok = Tokenizer.from_gguf(_batch_path(variants, name))
    lattice = tok.engine.lattice
    space = lattice.space
    texts = list(tok.vocab.texts)
    if name == "nomic":
        texts = texts[::25]  # 10,000 of them
    bare = [t[len(space):] if t.startswith(space) else t for t in texts]
    words = _words(tok, batch_inputs) + bare + [t[:-1] for t in bare]
    words = list(dict.fromkeys(words + [w + space + w for w in bare[:500]]))  # with the symbol inside
    words += [b"ab" * 300, ("\u65e5\u672c" * 200).encode()]  # far longer than the rest: left out
    batch = lattice.batch()
    assert batch is not None
    ids, batched, left = batch.run(words)
    assert len(batched) + len(left) == len(words) and len(batched) > len(words) // 2
    assert ids == [lattice.viterbi(space + w) for w in batched]
    lead = lambda b: 1 if b < 0xC0 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4  # noqa: E731
    def whole(word):
        i = 0
        while i < len(word):
            n = lead(word[i])
            if 0x80 <= word[i] < 0xC0 or i + n > len(word) or any(not 0x80 <= b < 0xC0 for b in word[i + 1:i + n]):
                return False
            i += n
        return True
    broken = {w for w in words if not whole(w)}
    assert broken <= set(left) and len(set(left) - broken) <= 3
    assert set(words[-2:]) <= set(left)


def test_batched_viterbi_with_a_crowded_table(monkeypatch, variants, batch_inputs):
    """A table of 16 slots: every token shares a slot, so every hit goes through the
    sorted search of the shared keys, past its last key too: the same ids."""
    from tokenizer.engines import ugm_batch

    monkeypatch.setattr(ugm_batch, "_BITS", 4)
    monkeypatch.setattr(ugm_batch, "_SHIFT", np.uint64(60))
    tok = Tokenizer.from_gguf(variants["ties"])
    lattice = tok.engine.lattice
    batch = lattice.batch()
    assert batch is not None and len(batch.shared_row) == len(lattice.entries)
    words = _words(tok, batch_inputs) + [t[1:] for t in tok.vocab.texts]
    ids, batched, _ = batch.run(list(dict.fromkeys(words)))
    assert len(batched) > 3000
    assert ids == [lattice.viterbi(lattice.space + w) for w in batched]


def test_batch_off_when_two_tokens_share_a_key(monkeypatch, variants):
    """A hash that collides (here: every long token's) turns the batch off; the
    per-word pass still segments a long call."""
    from tokenizer.engines import ugm, ugm_batch

    monkeypatch.setattr(ugm_batch, "_chunk_hash", lambda view, start, size, first: np.zeros(len(start), np.uint64))
    monkeypatch.setattr(ugm, "BUILD_AFTER", 0)
    tok = Tokenizer.from_gguf(variants["ties"])
    lattice = tok.engine.lattice
    assert lattice.batch() is None
    words = sorted({t[1:] for t in tok.vocab.texts if t.startswith(lattice.space)})
    assert lattice.by_words(words) == [i for w in words for i in lattice.viterbi(lattice.space + w)]
