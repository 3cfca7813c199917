"""llama.cpp's `test` vocabulary type: ids are hashes of 5-byte chunks.

`tokenizer.ggml.model = "test"` makes llama.cpp (`LLAMA_VOCAB_TYPE_TEST`)
cut each raw fragment into chunks of 5 bytes (the last may be shorter), hash
each chunk as ``h = h * 31 + byte`` in 64-bit arithmetic, and emit
``h % n_tokens``. Specials split out by the partitioner pass through; there is
no BOS/EOS. A token's piece is its id in lowercase hex (``"%x"``).

A vocabulary without tokens is refused: llama.cpp divides by zero while
loading it (it tokenizes "\\n" to find the newline id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import UnsupportedVocab
from .base import Engine

if TYPE_CHECKING:
    from ..vocab import Vocab

CHUNK = 5
_MASK64 = (1 << 64) - 1


class HashingEngine(Engine):
    """Chunk hashes modulo the vocabulary size, as llama.cpp's test tokenizer."""

    vocab_type = "test"

    def __init__(self, vocab: Vocab) -> None:
        super().__init__(vocab)
        self._n = len(vocab.texts)
        if not self._n:
            raise UnsupportedVocab("tokenizer.ggml.model 'test' with no tokens: llama.cpp "
                                   "divides by zero while loading it")

    def encode_into(self, text: bytes, out: list[int]) -> None:
        for start in range(0, len(text), CHUNK):
            h = 0
            for b in text[start:start + CHUNK]:
                h = (h * 31 + b) & _MASK64
            out.append(h % self._n)

    def piece(self, token: int) -> bytes:
        return b"%x" % token
