"""Parity with llama.cpp's own tokenizer test vectors (`ggml-vocab-*.gguf.inp/.out`).

The expected ids come only from the `.out` files that ship with llama.cpp
(its tests/test-tokenizer-0 reads them the same way: inputs split on
"\\n__ggml_vocab_test__\\n", add_special=False, parse_special=False). Every
shipped vocabulary with vectors is listed; one whose engine is not registered
yet skips, naming the missing engine. The files are never edited by hand.
"""

from __future__ import annotations

from functools import cache

import pytest

from harness.inputs.corpus import split_inp
from harness.models.shipped import FETCH_COMMAND, SHIPPED, vocab_path
from tokenizer import Tokenizer
from tokenizer.engines import ENGINES
from tokenizer.gguf import reader as gguf
from tokenizer.vocab import MODELS


def read_vectors(name: str) -> list[tuple[bytes, list[int]]]:
    """(input bytes, expected ids) pairs, the `.inp` split as test-tokenizer-0.cpp splits it."""
    path = vocab_path(name)
    inputs = split_inp(path.with_name(path.name + ".inp").read_bytes())
    lines = path.with_name(path.name + ".out").read_text().splitlines()
    if len(lines) != len(inputs):
        raise ValueError(f"{name}: {len(inputs)} inputs but {len(lines)} outputs")
    return [(inp, [int(x) for x in line.split()]) for inp, line in zip(inputs, lines)]


def _cases() -> list:
    params = []
    for name in SHIPPED:
        path = vocab_path(name)
        if not path.with_name(path.name + ".inp").is_file():
            continue
        for i, (inp, ids) in enumerate(read_vectors(name)):
            params.append(pytest.param(name, inp, ids, id=f"{name}-{i:02d}"))
    if not params:
        params.append(pytest.param(None, b"", [], id="no-vocabularies",
                                   marks=pytest.mark.skip(reason=f"run: {FETCH_COMMAND}")))
    return params


@cache
def _tokenizer(name: str) -> Tokenizer:
    return Tokenizer.from_gguf(vocab_path(name))


@cache
def _vocab_type(name: str) -> str:
    model = gguf.read(vocab_path(name)).metadata["tokenizer.ggml.model"]
    return MODELS.get(model, ("?",))[0]


def _skip_without_engine(name: str) -> None:
    vocab_type = _vocab_type(name)
    if vocab_type not in ENGINES:
        pytest.skip(f"no {vocab_type} engine registered yet")


@pytest.mark.vocab
@pytest.mark.parametrize(("name", "text", "expected"), _cases())
def test_ids_match_llama_cpp_vectors(name, text, expected):
    _skip_without_engine(name)
    got = _tokenizer(name).tokenize(text, add_special=False, parse_special=False)
    assert got == expected
