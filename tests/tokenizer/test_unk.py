"""The unknown-token id is part of what "identical" means.

`harness.golden.records.SPECIALS` once lacked `unk`, so an engine that reported a
wrong unk id passed every comparison. These tests plant exactly that fault,
in a wrapper around our own tokenizer, and check that the vocabulary diff
(the one `run` and `compare` judge) names it; the expected record comes from
llama.cpp.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.golden.records import SPECIALS, diff_vocab, vocab_record
from harness.models.gguf_writer import write
from tokenizer import Tokenizer

pytestmark = pytest.mark.oracle


class WrongUnk:
    """Our `Tokenizer`, except that it reports `unk` one id too high."""

    def __init__(self, inner: Tokenizer) -> None:
        self._inner = inner

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    @property
    def unk(self) -> int:
        return self._inner.unk + 1


@pytest.fixture(scope="module")
def tiny_spm(tmp_path_factory) -> object:
    """A 262-token SPM vocabulary: <unk> <s> </s>, 256 byte tokens, three words."""
    words = ["\u2581the", "he", "llo"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + words
    path = tmp_path_factory.mktemp("unk") / "tiny.gguf"
    write(path, {
        "general.architecture": "llama",
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": np.array([0.0] * 259 + [-1.0, -2.0, -3.0], dtype=np.float32),
        "tokenizer.ggml.token_type": np.array([2, 3, 3] + [6] * 256 + [1] * 3, dtype=np.int32),
    })
    return path


def test_unk_is_a_compared_special():
    assert "unk" in SPECIALS


def test_a_wrong_unk_id_fails_the_vocabulary_comparison(tiny_spm):
    from harness.oracle.llama import LlamaOracle

    with LlamaOracle(tiny_spm) as oracle:
        expected = vocab_record(oracle)
    ours = Tokenizer.from_gguf(tiny_spm)
    assert expected["specials"]["unk"] == 0
    assert diff_vocab(expected, vocab_record(ours)) == []
    rows = diff_vocab(expected, vocab_record(WrongUnk(ours)))
    assert [row["field"] for row in rows] == ["specials"]
    assert (rows[0]["expected"]["unk"], rows[0]["got"]["unk"]) == (0, 1)


def load_wrong_unk(path) -> WrongUnk:
    """`--engine tests.tokenizer.test_unk:load_wrong_unk`: our tokenizer with the unk id off by one."""
    return WrongUnk(Tokenizer.from_gguf(path))


@pytest.mark.vocab
def test_compare_through_a_contained_engine_names_a_wrong_unk(require_vocab, tmp_path):
    """The path `run` and `compare` really take (harness.subjects.records in a child) compares unk too."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    require_vocab("llama-spm")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "harness", "compare", "--golden", str(root / "golden"), "--model", "llama-spm",
         "--engine", "tests.tokenizer.test_unk:load_wrong_unk", "--quiet", "--report", str(tmp_path / "r")],
        cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    rows = [v for v in report["vocab_mismatches"] if v["field"] == "specials"]
    assert [(r["expected"]["unk"], r["got"]["unk"]) for r in rows] == [(0, 1)]
