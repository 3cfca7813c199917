"""A golden replay spells tokens from the GGUF as llama.cpp's `token_to_piece` does (expected: llama.cpp's own).

Both paths, live (llama.cpp's pieces) and golden replay (`harness.compare.spelling`), must draw the same
pieces, so that one difference has one signature whichever path found it.
"""

from __future__ import annotations

import pytest

from harness.compare.spelling import spelled_pieces
from harness.models.shipped import SHIPPED
from tokenizer.gguf import reader

pytestmark = pytest.mark.oracle


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_spelled_pieces_are_llama_cpps(name, pair_for):
    _, oracle = pair_for(name)
    texts = [reader.as_bytes(t) for t in reader.read(oracle.path, metadata_only=True).metadata["tokenizer.ggml.tokens"]]
    attrs = [oracle.token_attr(t) for t in range(oracle.n_tokens)]
    ours = spelled_pieces(texts, attrs, oracle.vocab_type, oracle.pre)
    wrong = [t for t in range(oracle.n_tokens) if ours[t] != oracle.token_to_piece(t, special=True)]
    assert not wrong, [(t, texts[t], ours[t], oracle.token_to_piece(t, special=True)) for t in wrong[:5]]
