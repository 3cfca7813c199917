"""Our `Tokenizer` and llama.cpp's (`harness.oracle.LlamaOracle`) on one shipped vocabulary.

A small cache keeps only the most recent pairs, so a module that runs all of its
checks for one vocabulary before moving to the next loads each vocabulary once
and never holds all 19 in memory (tests are parametrized with the vocabulary
varying slowest for that reason).
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from harness.models import FETCH_COMMAND, vocab_path
from tokenizer import Tokenizer, UnsupportedVocab


@lru_cache(maxsize=2)
def pair(name: str):
    """(ours, oracle) for a shipped vocabulary; skips when it is not fetched or has no engine."""
    oracle_mod = pytest.importorskip("harness.oracle")
    path = vocab_path(name)
    if not path.is_file():
        pytest.skip(f"{name} is not fetched: run {FETCH_COMMAND}")
    try:
        ours = Tokenizer.from_gguf(path)
    except UnsupportedVocab as e:
        pytest.skip(f"engine not available: {e}")
    return ours, oracle_mod.LlamaOracle(path)
