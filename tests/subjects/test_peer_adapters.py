"""The built-in peers against llama.cpp: `--engine transformers` and `--engine llama.cpp@VERSION`.

Skipped where the peer is not installed here: transformers needs the
`[transformers]` extra, an older llama.cpp its venv (built once by
`python -m harness peers --engine llama.cpp@VERSION` or nox `peers`). Expected
ids come from llama.cpp, never from the peer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.subjects import llama_release

ROOT = Path(__file__).resolve().parents[2]
OLDER = os.environ.get("GGUF_PARITY_PEER_RELEASE", "0.3.16")


def _run(tmp_path: Path, engine: str, model: str, texts: list[str]) -> dict:
    corpus = tmp_path / "cases.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n" for i, t in enumerate(texts)),
                      encoding="utf-8")
    out = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", model, "--engine", engine,
                           "--no-default-corpora", "--corpus", str(corpus), "--report", str(out), "--quiet",
                           "--engine-timeout", "300"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.mark.oracle
@pytest.mark.vocab
def test_transformers_is_checked_on_what_it_offers_only(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from harness.models.paths import resolve
    from harness.oracle.llama import LlamaOracle
    from harness.subjects.transformers_peer import TransformersEngine

    engine = TransformersEngine(resolve("llama-spm"))
    assert set(engine.capabilities) == {"tokenize", "detokenize", "token_text"}
    with pytest.raises(TypeError):
        engine.tokenize(b"bytes", add_special=False, parse_special=False)
    with LlamaOracle(resolve("llama-spm")) as oracle:  # the expected ids are llama.cpp's
        for parse in (False, True):
            want = oracle.tokenize("Hello world", add_special=False, parse_special=parse)
            assert engine.tokenize("Hello world", add_special=False, parse_special=parse) == want
        # docs/peers.md, divergence 1: transformers 5.18 adds no BOS from a GGUF's add_bos_token
        with_bos = oracle.tokenize("Hello world", add_special=True, parse_special=False)
        assert with_bos[0] == oracle.bos
        assert engine.tokenize("Hello world", add_special=True, parse_special=False) == with_bos[1:]
        assert engine.tokenize("<s>", add_special=False, parse_special=True) == \
            oracle.tokenize("<s>", add_special=False, parse_special=True) == [oracle.bos]
        assert engine.tokenize("<s>", add_special=False, parse_special=False) == \
            oracle.tokenize("<s>", add_special=False, parse_special=False)

    report = _run(tmp_path, "transformers", "llama-spm", ["Hello world", " x"])
    tally = report["summary"]["capabilities"]
    assert tally["ids"]["status"] == "checked" and tally["ids"]["checked"] == 2
    for check in ("score", "attr", "pieces", "specials", "eog", "control", "vocab_info"):
        assert tally[check]["status"] == "not offered", check
    assert tally["text"]["status"] == "checked"


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.skipif(not llama_release.is_ready(OLDER), reason=f"llama-cpp-python {OLDER} venv not built")
def test_an_older_llama_cpp_is_checked_on_everything(tmp_path):
    report = _run(tmp_path, f"llama.cpp@{OLDER}", "llama-spm", ["Hello world", " <s>x</s>"])
    tally = report["summary"]["capabilities"]
    assert report["meta"]["engine"] == f"llama.cpp@{OLDER}"
    assert all(row["status"] == "checked" for row in tally.values()), tally
    assert tally["ids"]["checked"] == 2 and tally["detokenize"]["checked"] == 2
