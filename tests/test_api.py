"""The public `Tokenizer` API at its edges, against the live oracle on every shipped vocabulary.

Expected values come from llama.cpp (`harness.oracle.LlamaOracle`) at test
time. The cells: the empty input, whitespace only, invalid UTF-8, NUL bytes,
BOS/EOS texts at the start and end (double-BOS), special texts surrounded by
whitespace (LSTRIP/RSTRIP), all four tokenize flag combinations; detokenize of
BOS/EOS-only sequences with all four flag combinations; `lstrip` of
`token_to_piece`; llama.cpp's clean_spaces passes; and our own errors for ids
outside the vocabulary (where llama.cpp would throw out_of_range).
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from harness.models import SHIPPED, vocab_path
from tokenizer import InvalidToken, Tokenizer, UnsupportedVocab
from tokenizer.pieces import clean_spaces

oracle_mod = pytest.importorskip("harness.oracle")

VOCABS = [pytest.param(n, id=n) for n in SHIPPED]
TOK_FLAGS = [pytest.param(a, b, id=f"{'add' if a else 'noadd'}-{'parse' if b else 'noparse'}")
             for a in (False, True) for b in (False, True)]
DETOK_FLAGS = [pytest.param(a, b, id=f"{'rm' if a else 'keep'}-{'unparse' if b else 'plain'}")
               for a in (False, True) for b in (False, True)]
EDGE_INPUTS = [b"", b" ", b"  ", b"\n", b" \n\t ", b"\xff", b"\xc3", b"\xe2\x96", b"a\x00b",
               b"Hello", b" Hello", b"Hello  world ", "\u2581x\u2581".encode(), "ä ö ü".encode()]


@lru_cache(maxsize=None)
def _pair(name: str):
    path = vocab_path(name)
    if not path.is_file():
        pytest.skip(f"{name} is not fetched: run python -m harness fetch")
    try:
        ours = Tokenizer.from_gguf(path)
    except UnsupportedVocab as e:
        pytest.skip(f"engine not available: {e}")
    return ours, oracle_mod.LlamaOracle(path)


def _special_inputs(ours: Tokenizer) -> list[bytes]:
    """BOS/EOS and the longest special texts, alone, doubled, and wrapped in whitespace."""
    v = ours.vocab
    ids = [i for i in (ours.bos, ours.eos, ours.eot) if i is not None] + list(v.special_tokens[:3])
    out = []
    for i in ids:
        t = v.texts[i]
        out += [t, t + t, b" " + t + b" x", b"x  " + t + b"  y", b"\n" + t + b"\n", t + b"Hello"]
    return out


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize(("add_special", "parse_special"), TOK_FLAGS)
@pytest.mark.parametrize("name", VOCABS)
def test_tokenize_edges(name, add_special, parse_special):
    ours, oracle = _pair(name)
    kw = {"add_special": add_special, "parse_special": parse_special}
    for text in EDGE_INPUTS + _special_inputs(ours):
        assert ours.tokenize(text, **kw) == oracle.tokenize(text, **kw), text


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize(("remove_special", "unparse_special"), DETOK_FLAGS)
@pytest.mark.parametrize("name", VOCABS)
def test_detokenize_edges(name, remove_special, unparse_special):
    ours, oracle = _pair(name)
    kw = {"remove_special": remove_special, "unparse_special": unparse_special}
    b, e = ours.bos, ours.eos
    hello = oracle.tokenize(" Hello world", add_special=False, parse_special=False)
    seqs = [[], hello, hello[::-1]]
    if b is not None:
        seqs += [[b], [b, b], [b] + hello, [b, b] + hello]
    if e is not None:
        seqs += [[e], hello + [e], hello + [e, e]]
    if b is not None and e is not None:
        seqs += [[b, e], [b] + hello + [e]]
    for ids in seqs:
        assert ours.detokenize(ids, **kw) == oracle.detokenize(ids, **kw), ids


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize("name", VOCABS)
def test_piece_lstrip(name):
    ours, oracle = _pair(name)
    spaced = [t for t in range(ours.n_tokens) if ours.token_to_piece(t, special=True)[:1] == b" "]
    for t in spaced[:200] + list(ours.vocab.special_tokens[:20]):
        for lstrip in (1, 2, 5):
            for special in (False, True):
                assert ours.token_to_piece(t, lstrip=lstrip, special=special) == \
                    oracle.token_to_piece(t, lstrip=lstrip, special=special), (t, lstrip, special)


CLEAN_CASES = ["a ' b", "a ' ' b ' c", "x ?", "x !y .z ,", "he 's", "we 're", "they 've", "I 'm",
               "don 't", "it 'd", "we 'll", "' ' '", " 'x", "end '"]


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize("text", [pytest.param(t, id=f"case{i}") for i, t in enumerate(CLEAN_CASES)])
def test_clean_spaces_like_llama_cpp(text):
    ours, oracle = _pair("gpt-2")  # a clean_spaces vocabulary with one token per byte available
    assert ours.vocab.clean_spaces
    ids = oracle.tokenize(text, add_special=False, parse_special=False)
    assert clean_spaces(text.encode()) == oracle.detokenize(ids, remove_special=False,
                                                            unparse_special=False)


@pytest.mark.vocab
@pytest.mark.parametrize("bad", [-1, 32000, 10**9])
def test_ids_outside_the_vocabulary_raise(bad):
    ours, _ = _pair("llama-spm")
    with pytest.raises(InvalidToken, match="outside the vocabulary"):
        ours.token_to_piece(bad, special=True)
    with pytest.raises(InvalidToken):
        ours.detokenize([5, bad], remove_special=False, unparse_special=False)
    with pytest.raises(InvalidToken):
        ours.token_attr(bad)


@pytest.mark.oracle
@pytest.mark.vocab
def test_str_and_bytes_input_agree():
    ours, oracle = _pair("llama-spm")
    text = "Grüße, 世界 🦙"
    kw = {"add_special": True, "parse_special": False}
    assert ours.tokenize(text, **kw) == ours.tokenize(text.encode(), **kw) == oracle.tokenize(text, **kw)
