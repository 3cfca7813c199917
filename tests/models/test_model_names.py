"""The other `tokenizer.ggml.model` names: each reproduced, or refused exactly where llama.cpp refuses.

Pinned here, on synthetic files from `harness.models.synth` (built from the shipped
gpt-2 and gemma-4 vocabularies; skipped with the fetch command without them):

| model          | llama.cpp                                 | we                              |
|----------------|-------------------------------------------|---------------------------------|
| `none`         | loads (no tokens), aborts on tokenize     | `UnsupportedVocab` at load      |
| `no_vocab`     | same as `none`                            | `UnsupportedVocab` at load      |
| `hybriddna`    | BPE, DNA k-mers inside `<dna>...</dna>`   | reproduced (BPE engine)         |
| `whitespace`   | BPE per whitespace-separated word         | reproduced (BPE engine)         |
| `gemma4`       | BPE, pre forced to `gemma4`               | reproduced (BPE engine)         |
| `test`         | hashes 5-byte chunks                      | reproduced (`engines.hashing`)  |
| anything else  | refuses to load ("unknown tokenizer")     | `UnsupportedVocab` at load      |

Expected values come only from llama.cpp, run in a crash-isolated worker
(`harness.oracle.session.OracleSession`); an input on which llama.cpp itself crashes is
left out of the comparison and must stay rare.
"""

from __future__ import annotations

import pytest

from harness.errors import SetupError
from harness.golden.records import diff_vocab, evaluate_case, vocab_record
from harness.models import synth
from harness.models.shipped import FETCH_COMMAND
from tokenizer import Tokenizer, UnsupportedVocab

live = pytest.importorskip("harness.oracle.session")
pytestmark = pytest.mark.oracle

REPRODUCED = ["model-gemma4", "model-hybriddna", "model-test", "model-whitespace"]
NO_VOCAB = ["model-none", "model-no_vocab"]

CORPUS = [
    "", " ", "Hello world", "  two  spaces\tand\ttabs\n\nnew lines ", "ça va? Ωμέγα 日本語",
    "<dna>ACGTACGTTA</dna>", "x<dna>acgtnnACG</dna>y<dna>AC", "<dna></dna><dna>TTTTTT",
    "<|endoftext|>hi<|endoftext|>", "<eos><bos> tokens", "1234567 89", "🦙 👨‍👩‍👧",
    "\u00a0\u3000\u2028 odd spaces", "UPPER lower MiXeD",
]


def _built(name: str):
    try:
        return synth.ensure(name)
    except SetupError as exc:
        pytest.skip(f"{exc} (fetch with: {FETCH_COMMAND})")


def _cases():
    return [{"id": f"c{i}", "text": text} for i, text in enumerate(CORPUS)] + [
        {"id": "invalid-utf8", "bytes": "61ff62c3"}]


@pytest.mark.parametrize("name", REPRODUCED)
def test_reproduced_encodings(name):
    path = _built(name)
    ours = Tokenizer.from_gguf(path)
    crashed = []
    with live.OracleSession(path, timeout=60) as oracle:
        for case in _cases():
            try:
                expected = oracle.evaluate(case)
            except live.OracleCrash:
                crashed.append(case["id"])
                continue
            assert evaluate_case(ours, case) == expected, case
    assert len(crashed) <= 2, f"llama.cpp crashed on {crashed}"


@pytest.mark.parametrize("name", REPRODUCED)
def test_reproduced_vocabulary(name):
    path = _built(name)
    ours = Tokenizer.from_gguf(path)
    with live.OracleSession(path, timeout=120) as oracle:
        expected = oracle.call("vocab")
    got = vocab_record(ours)
    assert got == expected, f"vocabulary fields differ: {diff_vocab(expected, got)[:5]}"


@pytest.mark.parametrize("name", NO_VOCAB)
def test_no_vocab_refused_at_load(name):
    path = _built(name)
    with pytest.raises(UnsupportedVocab, match=r"none|no_vocab"):
        Tokenizer.from_gguf(path)
    with live.OracleSession(path, timeout=60) as oracle:
        assert oracle.call("ping") == 0  # llama.cpp loads it, with no tokens ...
        with pytest.raises(live.OracleCrash):  # ... and aborts as soon as it is asked to tokenize
            oracle.evaluate({"id": "x", "text": "hello"})


def test_unknown_model_refused_by_both():
    path = _built("model-bogus")
    with pytest.raises(UnsupportedVocab, match="bogus"):
        Tokenizer.from_gguf(path)
    with live.OracleSession(path, timeout=60) as oracle, pytest.raises(live.OracleRefusal):
        oracle.call("ping")


def test_gemma4_model_forces_its_pre():
    path = _built("model-gemma4")
    with live.OracleSession(path, timeout=60) as oracle:
        pre = oracle.call("vocab")["pre"]
    assert pre == "gemma4" == Tokenizer.from_gguf(path).pre


def test_empty_test_model_refused_where_llama_cpp_crashes(tmp_path):
    path = tmp_path / "empty-test.gguf"
    path.write_bytes(synth.custom([], model="test"))
    with pytest.raises(UnsupportedVocab, match="no tokens"):
        Tokenizer.from_gguf(path)
    with live.OracleSession(path, timeout=60) as oracle, pytest.raises(live.OracleCrash, match="SIGFPE"):
        oracle.call("ping")
