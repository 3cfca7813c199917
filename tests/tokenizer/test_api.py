"""The public `Tokenizer` API at its edges, against the live oracle on every shipped vocabulary.

Expected values come from llama.cpp (`harness.oracle.llama.LlamaOracle`) at test
time. The cells: the empty input, whitespace only, invalid UTF-8, NUL bytes,
BOS/EOS texts at the start and end (double-BOS), special texts surrounded by
whitespace (LSTRIP/RSTRIP), all four tokenize flag combinations; detokenize of
BOS/EOS-only sequences with all four flag combinations; `lstrip` of
`token_to_piece`; llama.cpp's clean_spaces passes; and our own errors for ids
outside the vocabulary (where llama.cpp would throw out_of_range).
"""

from __future__ import annotations

import pytest

from harness.models.shipped import SHIPPED
from tokenizer import InvalidToken, Tokenizer
from tokenizer.pieces import clean_spaces

VOCABS = [pytest.param(n, id=n) for n in SHIPPED]
EDGE_INPUTS = [b"", b" ", b"  ", b"\n", b" \n\t ", b"\xff", b"\xc3", b"\xe2\x96", b"a\x00b",
               b"Hello", b" Hello", b"Hello  world ", "\u2581x\u2581".encode(), "ä ö ü".encode()]


def _special_inputs(ours: Tokenizer) -> list[bytes]:
    """BOS/EOS and the longest special texts, alone, doubled, and wrapped in whitespace."""
    v = ours.vocab
    ids = [i for i in (ours.bos, ours.eos, ours.eot) if i is not None] + list(v.special_tokens[:3])
    out = []
    for i in ids:
        t = v.texts[i]
        out += [t, t + t, b" " + t + b" x", b"x  " + t + b"  y", b"\n" + t + b"\n", t + b"Hello"]
    return out


def _tokenize_edges(ours, oracle, add_special, parse_special):
    kw = {"add_special": add_special, "parse_special": parse_special}
    for text in EDGE_INPUTS + _special_inputs(ours):
        assert ours.tokenize(text, **kw) == oracle.tokenize(text, **kw), text


def _detokenize_edges(ours, oracle, remove_special, unparse_special):
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


def _piece_lstrip(ours, oracle, *_):
    spaced = [t for t in range(ours.n_tokens) if ours.token_to_piece(t, special=True)[:1] == b" "]
    for t in spaced[:200] + list(ours.vocab.special_tokens[:20]):
        for lstrip in (1, 2, 5):
            for special in (False, True):
                assert ours.token_to_piece(t, lstrip=lstrip, special=special) == \
                    oracle.token_to_piece(t, lstrip=lstrip, special=special), (t, lstrip, special)


def _flag_id(a: bool, b: bool, yes: tuple[str, str], no: tuple[str, str]) -> str:
    return f"{yes[0] if a else no[0]}-{yes[1] if b else no[1]}"


CELLS = (
    [pytest.param(_tokenize_edges, a, b, id="tokenize-" + _flag_id(a, b, ("add", "parse"), ("noadd", "noparse")))
     for a in (False, True) for b in (False, True)]
    + [pytest.param(_detokenize_edges, a, b, id="detokenize-" + _flag_id(a, b, ("rm", "unparse"), ("keep", "plain")))
       for a in (False, True) for b in (False, True)]
    + [pytest.param(_piece_lstrip, None, None, id="piece-lstrip")]
)


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize(("check", "flag_a", "flag_b"), CELLS)
@pytest.mark.parametrize("name", VOCABS)
def test_edges(pair_for, name, check, flag_a, flag_b):
    """One cell per vocabulary and per tokenize/detokenize flag combination (and lstrip)."""
    ours, oracle = pair_for(name)
    check(ours, oracle, flag_a, flag_b)


CLEAN_CASES = ["a ' b", "a ' ' b ' c", "x ?", "x !y .z ,", "he 's", "we 're", "they 've", "I 'm",
               "don 't", "it 'd", "we 'll", "' ' '", " 'x", "end '"]


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize("text", [pytest.param(t, id=f"case{i}") for i, t in enumerate(CLEAN_CASES)])
def test_clean_spaces_like_llama_cpp(pair_for, text):
    ours, oracle = pair_for("gpt-2")  # a clean_spaces vocabulary with one token per byte available
    assert ours.vocab.clean_spaces
    ids = oracle.tokenize(text, add_special=False, parse_special=False)
    assert clean_spaces(text.encode()) == oracle.detokenize(ids, remove_special=False,
                                                            unparse_special=False)


@pytest.mark.vocab
@pytest.mark.parametrize("bad", [-1, 32000, 10**9])
def test_ids_outside_the_vocabulary_raise(pair_for, bad):
    ours, _ = pair_for("llama-spm")
    with pytest.raises(InvalidToken, match="outside the vocabulary"):
        ours.token_to_piece(bad, special=True)
    with pytest.raises(InvalidToken):
        ours.detokenize([5, bad], remove_special=False, unparse_special=False)
    with pytest.raises(InvalidToken):
        ours.token_attr(bad)


@pytest.mark.oracle
@pytest.mark.vocab
def test_str_and_bytes_input_agree(pair_for):
    ours, oracle = pair_for("llama-spm")
    text = "Grüße, 世界 🦙"
    kw = {"add_special": True, "parse_special": False}
    assert ours.tokenize(text, **kw) == ours.tokenize(text.encode(), **kw) == oracle.tokenize(text, **kw)


LONG_SPECIAL_VOCABS = [pytest.param(n, id=n) for n in ("command-r", "deepseek-llm", "llama-bpe", "phi-3")]


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize("parse_special", [pytest.param(p, id=f"parse={p}") for p in (False, True)])
@pytest.mark.parametrize("name", LONG_SPECIAL_VOCABS)
def test_long_input_with_special_tokens(pair_for, name, parse_special):
    # Long enough for the partitioner's byte-pair prefilter to switch on
    # (input bytes x special tokens >= 2**20), with special texts at both ends,
    # glued to words, and split across what the prefilter looks at.
    ours, oracle = pair_for(name)
    specials = [ours.vocab.texts[i] for i in ours.vocab.special_tokens[:40]]
    body = "Prose with ünïcödé, digits 12345 and  spaces.\n".encode() * 40
    text = specials[0] + body + b"x".join(specials) + body + specials[-1][:1] + specials[-1]
    assert len(text) * len(ours.vocab.special_tokens) >= 1 << 20 or len(text) > 4000
    kw = {"add_special": True, "parse_special": parse_special}
    assert ours.tokenize(text, **kw) == oracle.tokenize(text, **kw)


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in ("command-r", "gemma-4", "phi-3")])
def test_every_special_token_in_one_input(pair_for, name):
    # Hundreds to thousands of special tokens present at once: the partition keeps
    # an index of its raw ranges (each token splits only the ranges it occurs in) and
    # a vectorised 4-byte prefix filter; texts overlap, nest (`<x>` inside `<x>y`),
    # are glued together and sit between tabs and newlines (LSTRIP/RSTRIP).
    ours, oracle = pair_for(name)
    specials = [ours.vocab.texts[i] for i in ours.vocab.special_tokens]
    forms = [b"".join(specials), b" ".join(reversed(specials)),
             b"".join(b"x \t" + t + b"\n y" for t in specials), b"".join(t[:-1] + t + b"  z\n\n" for t in specials)]
    for parse_special in (False, True):
        kw = {"add_special": False, "parse_special": parse_special}
        for text in forms:
            assert ours.tokenize(text, **kw) == oracle.tokenize(text, **kw), (parse_special, text[:80])
