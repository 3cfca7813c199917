"""WPM (bert) engine: token-identical to llama.cpp on bert-bge and on normaliser variants.

Expected ids come only from llama.cpp: the shipped `.inp/.out` vectors (no
oracle needed) and the live oracle (`harness.oracle.llama.LlamaOracle`). The seeded
differential run uses 100 inputs by default and 2,000 nightly (`--nightly`),
each under all four tokenize and all four detokenize flag combinations.

Variants switch `tokenizer.ggml.normalizer.lowercase` / `strip_accents` and
add tokens that only a byte-offset (not character) longest match can find.
Inputs never contain code points above U+10FFFF: llama.cpp aborts on those
(`test_codepoint_beyond_unicode_is_refused` pins our refusal instead).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harness.models import gguf_writer
from harness.models.shipped import models_dir
from tests.conformance import (
    DETOK,
    ENCODER_GETTERS,
    FLAGS,
    LSTRIP,
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
from tokenizer.engines import wpm, wpm_batch
from tokenizer.gguf import reader as gguf
from tokenizer.gguf.constants import Keys
from tokenizer.unicode import UnencodableCodepoint, decode_lenient

VECTORS = models_dir()
SEP = b"\n__ggml_vocab_test__\n"

CORPUS = [
    b"", b" ", b"\t", b"\n\n", b"Hello world", b" Hello World ", b"HELLO. world!!",
    "Äpfel über naïve Straße ÉCOLE".encode(), "ça va? Ωμέγα — 日本語のテキスト, 한국어".encode(),
    "🦙🦙 👨‍👩‍👧 🇯🇵 𠀀𠀁".encode(), "ＦＵＬＬ ｗｉｄｔｈ ｱｲｳ ① ﬁ".encode(), "e\u0301 a\u0308 ǅ İ".encode(),
    "\u2581 \u2581x".encode(), b"[CLS] [SEP] [MASK] [UNK] [PAD]", b"x[SEP]y", b"#hash ##tag",
    b"\x00a\x00b", b"\x01\x7f\x1f", b"\xff\xfe", b"abc\x80def", b"\xe3\x81", b"\xed\xa0\x80x",
    b"\xc0\x80\xc1\x81B", b"\xef\xbb\xbfBOM", b"x" * 300, b"supercalifragilisticexpialidocious",
    "\u200b\u00ad\ufeff\u2028\u3000\u00a0".encode(), b"3.14159 1,000,000 $5 #1 @me",
    "\ue000\U000f0000".encode(), "\u0378\u0e3f\U0001f9ff".encode(),
]


def _bge():
    return shipped_or_skip("bert-bge")


# --- llama.cpp's own test vectors (no oracle) ------------------------------------------------

def _vectors():
    inp, out = VECTORS / "ggml-vocab-bert-bge.gguf.inp", VECTORS / "ggml-vocab-bert-bge.gguf.out"
    if not inp.is_file():
        return []
    texts = inp.read_bytes().split(SEP)
    ids = [[int(x) for x in line.split()] for line in out.read_text().split("\n")]
    return [pytest.param(t, e, id=f"line-{i}") for i, (t, e) in enumerate(zip(texts, ids))]


@pytest.fixture(scope="module")
def bge():
    return Tokenizer.from_gguf(_bge())


@pytest.mark.parametrize("text, expected", _vectors() or [pytest.param(
    None, None, marks=pytest.mark.skip(reason=f"no .inp/.out vectors under {VECTORS}"))])
def test_shipped_vectors(bge, text, expected):
    assert bge.tokenize(text, add_special=False, parse_special=False) == expected


def test_codepoint_beyond_unicode_is_refused(bge):
    """F4 90 80 80 decodes (leniently) to 0x110000; llama.cpp aborts re-encoding it."""
    with pytest.raises(UnencodableCodepoint, match="0x110000"):
        bge.tokenize(b"ok \xf4\x90\x80\x80", add_special=False, parse_special=False)


# --- the live oracle -------------------------------------------------------------------------

oracle = pytest.importorskip("harness.oracle.llama")


@pytest.fixture
def pair(pair_for):
    return pair_for(_bge())


@pytest.mark.oracle
@pytest.mark.parametrize("add_special, parse_special", FLAGS)
def test_tokenize_corpus(pair, add_special, parse_special):
    assert_same_tokens(*pair, CORPUS, add_special=add_special, parse_special=parse_special)


@pytest.mark.oracle
@pytest.mark.parametrize("remove_special, unparse_special", DETOK)
def test_detokenize_corpus(pair, remove_special, unparse_special):
    assert_same_detokenize(*pair, CORPUS, remove_special=remove_special,
                           unparse_special=unparse_special)


@pytest.mark.oracle
@pytest.mark.parametrize("special", SPECIAL)
@pytest.mark.parametrize("lstrip", LSTRIP)
def test_every_piece(pair, special, lstrip):
    assert_same_pieces(*pair, special=special, lstrip=lstrip)


@pytest.mark.oracle
@pytest.mark.parametrize("field", TOKEN_FIELDS)
def test_every_token_field(pair, field):
    assert_same_field(*pair, field)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ENCODER_GETTERS)
def test_getters(pair, name):
    assert_same_getter(*pair, name)


# --- seeded differential run -----------------------------------------------------------------

ATOMS = [t for t in CORPUS if t] + [
    b" ", b"  ", b"\r\n", b".", b",", b"'", b"-", b"(", b")", "\u0301".encode(), "Ⅻ".encode(),
    "\U0002b820\U0002b920\U0002ceaf".encode(), "\u4e00\u9fff\u3400".encode(), "ß".encode(),
]


def _piece_in_any_case(pieces):
    def make(rng):
        piece = rng.choice(pieces).replace("\u2581".encode(), b" ")
        return piece.upper() if rng.random() < 0.2 else piece
    return make


def _bytes_below_f4(rng) -> bytes:
    """1..3 random bytes, lead bytes F4..F7 (which could decode above U+10FFFF) made F3."""
    raw = random_bytes(3)(rng)
    return (raw.replace(b"\xf4", b"\xf3").replace(b"\xf5", b"\xf3")
            .replace(b"\xf6", b"\xf3").replace(b"\xf7", b"\xf3"))


def random_inputs(seed: int, count: int, pieces: list[bytes]):
    """Vocabulary pieces, punctuation, CJK, accents and case, random code points, bad bytes."""
    return mixed_inputs(seed, count, max_parts=10, kinds=[
        (0.35, _piece_in_any_case(pieces)),
        (0.6, choice_of(ATOMS)),
        (0.85, code_points([(0x20, 0x7E), (0xA0, 0x33FF), (0xF900, 0xFFEF), (0x10000, 0x2FFFF)], 5)),
        (1.0, _bytes_below_f4),
    ])


# inputs per differential run (default, nightly) and their (input, piece) seeds
BUDGETS = [100, pytest.param(2000, marks=pytest.mark.nightly)]
SEEDS = {100: (1, 0), 2000: (2, 2)}


@pytest.mark.oracle
@pytest.mark.parametrize("budget", BUDGETS)
def test_differential(pair, budget):
    ours, llama = pair
    input_seed, piece_seed = SEEDS[budget]
    assert differential(ours, llama, random_inputs(input_seed, budget, sample_pieces(ours, seed=piece_seed))) == []


# --- variants --------------------------------------------------------------------------------

def variant(*, tokens=(), **keys) -> bytes:
    src = gguf.read(_bge())
    meta = dict(src.metadata)
    meta[Keys.TOKENS] = list(meta[Keys.TOKENS]) + list(tokens)
    meta[Keys.TOKEN_TYPE] = np.concatenate([meta[Keys.TOKEN_TYPE],
                                            np.full(len(tokens), TokenType.NORMAL, dtype="<i4")])
    if Keys.SCORES in meta:
        meta[Keys.SCORES] = np.concatenate([meta[Keys.SCORES], np.zeros(len(tokens), "<f4")])
    return gguf_writer.build(meta | keys, types=src.types)


LOWER, STRIP = Keys.NORMALIZER_LOWERCASE, Keys.NORMALIZER_STRIP_ACCENTS
VARIANTS = {
    "keep-case-keep-accents": lambda: variant(**{LOWER: False}),
    "keep-case-strip-accents": lambda: variant(**{LOWER: False, STRIP: True}),
    "lower-keep-accents": lambda: variant(**{LOWER: True, STRIP: False}),
    "byte-offset-tokens": lambda: variant(tokens=[b"\xc3", b"\xa9t\xc3", "\u2581\u00e9".encode()[:4]],
                                          **{LOWER: False, STRIP: False}),
}


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    return write_variants(tmp_path_factory.mktemp("wpm"), VARIANTS)


@pytest.mark.oracle
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in VARIANTS])
def test_variant_differential(pair_for, variants, name):
    ours, llama = pair_for(variants[name])
    inputs = list(itertools.chain(CORPUS, random_inputs(4, 60, sample_pieces(ours, 500))))
    assert differential(ours, llama, inputs) == []


@pytest.mark.oracle
@pytest.mark.nightly
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in VARIANTS])
def test_variant_differential_500(pair_for, variants, name):
    ours, llama = pair_for(variants[name])
    assert differential(ours, llama, random_inputs(5, 500, sample_pieces(ours, 2000, 5))) == []


@pytest.mark.oracle
def test_missing_sep_with_add_special_is_refused(tmp_path):
    """WPM adds BOS and SEP on add_special whatever add_bos/add_sep say; without a SEP id
    (bert's default 102 is dropped in a small vocabulary) llama.cpp aborts, so we refuse."""
    from harness.models import synth
    path = tmp_path / "small.gguf"
    path.write_bytes(synth.custom(["[PAD]", "\u2581hi"], model="bert",
                                  extra={Keys.BOS_ID: 0, Keys.UNK_ID: 0}))
    ours = Tokenizer.from_gguf(path)
    with oracle.LlamaOracle(path) as llama:
        assert ours.sep is None and llama.sep is None
        assert_same_tokens(ours, llama, [b"hi x"], add_special=False, parse_special=False)
    with pytest.raises(UnsupportedVocab, match="SEP"):
        ours.tokenize(b"hi", add_special=True, parse_special=False)


# --- the fast paths against the literal greedy match (no oracle) ----------------------------

def literal_match(tok: Tokenizer, data: bytes) -> list[int]:
    """llama.cpp's loop as written: from each byte offset, every length from the
    longest token's down; [UNK] for the whole word if an offset has no token."""
    to_id, longest, ids, i, n = tok.vocab.token_to_id, tok.vocab.max_token_len, [], 0, len(data)
    while i < n:
        for j in range(min(n, i + longest + 1), i, -1):
            if data[i:j] in to_id:
                ids.append(to_id[data[i:j]])
                i = j
                break
        else:
            return [tok.vocab.special["unk"]]
    return ids


@pytest.fixture(scope="module")
def shortcut_inputs(bge) -> list[bytes]:
    """The boundary slice, every token's text as a word (and cut one byte short),
    and the first lines of the diverse corpus."""
    from harness.inputs.boundaries import cases
    from harness.inputs.documents import DIVERSE

    probes = [bytes.fromhex(c["bytes"]) if "bytes" in c else c["text"].encode("utf-8", "surrogatepass")
              for c in cases(_bge())]
    diverse = DIVERSE.read_bytes()[:20_000]
    return probes + [diverse]


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def split_valid(texts: list[bytes]) -> list[bytes]:
    """`texts` joined by newlines: the valid UTF-8 ones, then the others."""
    return [b"\n".join(t for t in texts if is_utf8(t)), b"\n".join(t for t in texts if not is_utf8(t))]


def slow_words(tok: Tokenizer, text: bytes) -> list[bytes]:
    """The slow path's words, as the engine did them one chunk at a time: dropped
    characters removed from the whole text first, each word translated on its
    own; empty words skipped (llama.cpp skips them too)."""
    splitter = tok.engine.words
    decoded = decode_lenient(text)
    if splitter.skip is not None:
        decoded = splitter.skip.sub("", decoded)
    return ["\u2581".encode() + splitter.normalize(w).encode("utf-8", "surrogatepass")
            for w in splitter.words(decoded)]


@pytest.fixture
def batch_runs(monkeypatch):
    """How many words each `BatchGreedy.run` matched itself (the batch built at once,
    and used from 100 missing words: the test inputs have fewer than MIN_WORDS)."""
    monkeypatch.setattr(wpm, "BUILD_AFTER", 0)
    monkeypatch.setattr(wpm, "MIN_WORDS", 100)
    counts: list[int] = []
    run = wpm_batch.BatchGreedy.run

    def counted(self, words):
        out = run(self, words)
        counts.append(len(words) - len(out[1]))
        return out

    monkeypatch.setattr(wpm_batch.BatchGreedy, "run", counted)
    return counts


@pytest.mark.parametrize("name", ["bert-bge", "byte-offset-tokens"])
def test_fast_paths_give_the_literal_greedy_ids(variants, shortcut_inputs, batch_runs, name):
    """The whole-text split with dropped characters removed per distinct word,
    the whole-word lookup, the candidate-length tables and the batched match
    (`engines.wpm_batch`, built at once) give the ids of the slow path: words as
    split before, llama.cpp's literal loop on each."""
    tok = Tokenizer.from_gguf(_bge() if name == "bert-bge" else variants[name])
    words = [t.replace("\u2581".encode(), b" ") for t in tok.vocab.texts]
    spelled = []
    # the bad bytes apart: a text with one takes decode_lenient's slow path all through
    for text in split_valid(shortcut_inputs + words + [w[:-1] for w in words] + [MARKS]):
        found = slow_words(tok, text)
        expected = [i for data in found for i in literal_match(tok, data)]
        assert tok.tokenize(text, add_special=False, parse_special=False) == expected
        spelled += found
    distinct = sorted(d for d in set(spelled) if d not in tok.vocab.token_to_id)  # match's domain
    expected = [literal_match(tok, d) for d in distinct]
    assert [tok.engine.match(d) for d in distinct] == expected
    assert sum(batch_runs) > 1000  # the tokenize calls above went through the batch
    # every word at once, through the batch (the words it leaves are its last few)
    found, left = wpm_batch.BatchGreedy(tok.vocab.token_to_id, unk=tok.vocab.special["unk"]).run(distinct)
    assert len(left) < wpm_batch.FEW
    assert [ids for i, ids in enumerate(found) if i not in left] == \
        [ids for i, ids in enumerate(expected) if i not in left]


@pytest.mark.oracle
def test_batched_match_gives_llama_ids(pair_for, shortcut_inputs, batch_runs):
    """One call on the boundary slice and a diverse sample, long enough for the batch:
    llama.cpp's ids, and the batch did match most words."""
    ours, llama = Tokenizer.from_gguf(_bge()), pair_for(_bge())[1]  # ours with an empty cache
    assert_same_tokens(ours, llama, [b"\n".join(shortcut_inputs)], add_special=False, parse_special=False)
    assert sum(batch_runs) > 1000


def test_a_token_past_the_batch_lengths_turns_it_off(tmp_path, shortcut_inputs, batch_runs):
    """A token longer than the batch's length bits hold (62 bytes) turns the batch off:
    the per-word match then, with the literal loop's ids for the words that hold it."""
    path = tmp_path / "long.gguf"
    path.write_bytes(variant(tokens=[("\u2581" + "abc" * 22).encode(), ("abc" * 22).encode()]))
    tok = Tokenizer.from_gguf(path)
    assert not wpm_batch.BatchGreedy(tok.vocab.token_to_id, unk=tok.vocab.special["unk"]).usable
    # many words from the long token on: enough to keep the batch busy until they end
    words = [b"abc" * 22 + bytes(p) for p in itertools.product(b"abcdefghijklmnopqrstuvwxyz", repeat=2)]
    for text in split_valid(shortcut_inputs + [b" ".join(words)]):
        expected = [i for data in slow_words(tok, text) for i in literal_match(tok, data)]
        assert tok.tokenize(text, add_special=False, parse_special=False) == expected
    assert not batch_runs


# dropped characters alone, between one-character words, inside and around words; NUL too
MARKS = "\u0301 .\u0301, \u0301\u0301 a\u0301b \u0301x \x00 a\x00b .\x00. \u200b\u200b é\u0301".encode()
