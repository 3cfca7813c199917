"""WPM (bert) engine: token-identical to llama.cpp on bert-bge and on normaliser variants.

Expected ids come only from llama.cpp: the shipped `.inp/.out` vectors (no
oracle needed) and the live oracle (`harness.oracle.LlamaOracle`). The seeded
differential run uses 100 inputs by default and 2,000 nightly (`--nightly`),
each under all four tokenize and all four detokenize flag combinations.

Variants switch `tokenizer.ggml.normalizer.lowercase` / `strip_accents` and
add tokens that only a byte-offset (not character) longest match can find.
Inputs never contain code points above U+10FFFF: llama.cpp aborts on those
(`test_codepoint_beyond_unicode_is_refused` pins our refusal instead).
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest

from harness.models import FETCH_COMMAND, SetupError, resolve
from tokenizer import Tokenizer, UnsupportedVocab, gguf, gguf_writer
from tokenizer.attrs import TokenType
from tokenizer.constants import Keys
from tokenizer.unicode import UnencodableCodepoint

VECTORS = Path("/tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/models")
SEP = b"\n__ggml_vocab_test__\n"

FLAGS = [pytest.param(a, p, id=f"add_special={a}-parse_special={p}")
         for a, p in itertools.product((False, True), repeat=2)]
DETOK = [pytest.param(r, u, id=f"remove_special={r}-unparse_special={u}")
         for r, u in itertools.product((False, True), repeat=2)]

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
    try:
        return resolve("bert-bge")
    except SetupError as exc:
        pytest.skip(f"{exc} (fetch with: {FETCH_COMMAND})")


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

oracle = pytest.importorskip("harness.oracle")


@pytest.fixture(scope="module")
def pair(bge):
    with oracle.LlamaOracle(_bge()) as llama:
        yield bge, llama


@pytest.mark.oracle
@pytest.mark.parametrize("add_special, parse_special", FLAGS)
def test_tokenize_corpus(pair, add_special, parse_special):
    ours, llama = pair
    wrong = [t for t in CORPUS
             if ours.tokenize(t, add_special=add_special, parse_special=parse_special)
             != llama.tokenize(t, add_special=add_special, parse_special=parse_special)]
    assert not wrong


@pytest.mark.oracle
@pytest.mark.parametrize("remove_special, unparse_special", DETOK)
def test_detokenize_corpus(pair, remove_special, unparse_special):
    ours, llama = pair
    for text in CORPUS:
        ids = llama.tokenize(text, add_special=True, parse_special=True)
        assert ours.detokenize(ids, remove_special=remove_special, unparse_special=unparse_special) \
            == llama.detokenize(ids, remove_special=remove_special, unparse_special=unparse_special), text


@pytest.mark.oracle
@pytest.mark.parametrize("special", [pytest.param(s, id=f"special={s}") for s in (False, True)])
@pytest.mark.parametrize("lstrip", [pytest.param(n, id=f"lstrip={n}") for n in (0, 1)])
def test_every_piece(pair, special, lstrip):
    ours, llama = pair
    wrong = [t for t in range(llama.n_tokens)
             if ours.token_to_piece(t, lstrip=lstrip, special=special)
             != llama.token_to_piece(t, lstrip=lstrip, special=special)]
    assert not wrong, f"{len(wrong)} pieces differ, first ids {wrong[:10]}"


@pytest.mark.oracle
@pytest.mark.parametrize("field", ["token_text", "token_score", "token_attr", "is_eog", "is_control"])
def test_every_token_field(pair, field):
    ours, llama = pair
    wrong = [t for t in range(llama.n_tokens) if getattr(ours, field)(t) != getattr(llama, field)(t)]
    assert not wrong, f"{field} differs for ids {wrong[:10]}"


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["bos", "eos", "sep", "nl", "pad", "mask", "add_bos", "add_eos",
                                  "add_sep", "n_tokens", "vocab_type"])
def test_getters(pair, name):
    ours, llama = pair
    assert getattr(ours, name) == getattr(llama, name)


# --- seeded differential run -----------------------------------------------------------------

ATOMS = [t for t in CORPUS if t] + [
    b" ", b"  ", b"\r\n", b".", b",", b"'", b"-", b"(", b")", "\u0301".encode(), "Ⅻ".encode(),
    "\U0002b820\U0002b920\U0002ceaf".encode(), "\u4e00\u9fff\u3400".encode(), "ß".encode(),
]


def random_inputs(seed: int, count: int, pieces: list[bytes]):
    """Vocabulary pieces, punctuation, CJK, accents and case, random code points, bad bytes."""
    rng = random.Random(seed)
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 10)):
            roll = rng.random()
            if roll < 0.35:
                piece = rng.choice(pieces).replace("\u2581".encode(), b" ")
                parts.append(piece.upper() if rng.random() < 0.2 else piece)
            elif roll < 0.6:
                parts.append(rng.choice(ATOMS))
            elif roll < 0.85:
                parts.append("".join(chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x33FF),
                                                     rng.randint(0xF900, 0xFFEF), rng.randint(0x10000, 0x2FFFF)]))
                                     for _ in range(rng.randint(1, 5))).encode("utf-8", "surrogatepass"))
            else:
                raw = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 3)))
                parts.append(raw.replace(b"\xf4", b"\xf3").replace(b"\xf5", b"\xf3")
                             .replace(b"\xf6", b"\xf3").replace(b"\xf7", b"\xf3"))
        yield b"".join(parts)


def differential(ours, llama, inputs) -> list:
    failures = []
    for text in inputs:
        for add, parse in itertools.product((False, True), repeat=2):
            ids = llama.tokenize(text, add_special=add, parse_special=parse)
            if ours.tokenize(text, add_special=add, parse_special=parse) != ids:
                failures.append((text, "tokenize", add, parse))
                continue
            for rm, un in itertools.product((False, True), repeat=2):
                if ours.detokenize(ids, remove_special=rm, unparse_special=un) != \
                        llama.detokenize(ids, remove_special=rm, unparse_special=un):
                    failures.append((text, "detokenize", ids, rm, un))
    return failures[:10]


def sample_pieces(ours, n: int = 3000, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [ours.token_text(rng.randrange(ours.n_tokens)) for _ in range(n)]


@pytest.mark.oracle
def test_differential_100(pair):
    ours, llama = pair
    assert differential(ours, llama, random_inputs(1, 100, sample_pieces(ours))) == []


@pytest.mark.oracle
@pytest.mark.nightly
def test_differential_2000(pair):
    ours, llama = pair
    assert differential(ours, llama, random_inputs(2, 2000, sample_pieces(ours, seed=2))) == []


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
    folder = tmp_path_factory.mktemp("wpm")
    paths = {}
    for name, build in VARIANTS.items():
        paths[name] = folder / f"{name}.gguf"
        paths[name].write_bytes(build())
    return paths


@pytest.mark.oracle
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in VARIANTS])
def test_variant_differential(variants, name):
    path = variants[name]
    ours = Tokenizer.from_gguf(path)
    with oracle.LlamaOracle(path) as llama:
        inputs = list(itertools.chain(CORPUS, random_inputs(4, 60, sample_pieces(ours, 500))))
        assert differential(ours, llama, inputs) == []


@pytest.mark.oracle
@pytest.mark.nightly
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in VARIANTS])
def test_variant_differential_500(variants, name):
    path = variants[name]
    ours = Tokenizer.from_gguf(path)
    with oracle.LlamaOracle(path) as llama:
        assert differential(ours, llama, random_inputs(5, 500, sample_pieces(ours, 2000, 5))) == []


@pytest.mark.oracle
def test_missing_sep_with_add_special_is_refused(tmp_path):
    """WPM adds BOS and SEP on add_special whatever add_bos/add_sep say; without a SEP id
    (bert's default 102 is dropped in a small vocabulary) llama.cpp aborts, so we refuse."""
    from harness import synth
    path = tmp_path / "small.gguf"
    path.write_bytes(synth.custom(["[PAD]", "\u2581hi"], model="bert",
                                  extra={Keys.BOS_ID: 0, Keys.UNK_ID: 0}))
    ours = Tokenizer.from_gguf(path)
    with oracle.LlamaOracle(path) as llama:
        assert ours.sep is None and llama.sep is None
        assert ours.tokenize(b"hi x", add_special=False, parse_special=False) == \
            llama.tokenize(b"hi x", add_special=False, parse_special=False)
    with pytest.raises(UnsupportedVocab, match="SEP"):
        ours.tokenize(b"hi", add_special=True, parse_special=False)
