"""A default `run --reference` names the class of each difference (issue 42, section 2), on planted twins.

The twins are tests/reference_files.py's tiny originals and the GGUFs the converter would write for
them (tests/references/test_class_experiments.py checks each class case by case). Here the run is
the default one, its cases derived from the original's own rules (`bnd-orig-...`, with the default
corpora), selected with -k so that report.json lists every finding looked at; each conversion
finding's cause names its class, and `summary.reference.cause_classes` counts them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import reference_files as rf

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.oracle


def default_run(tmp_path: Path, gguf: Path, spec: str, keyword: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--reference", spec,
                           "--fuzz", "0", "--jobs", "1", "--report", str(report), "--quiet", "--long-docs", "0",
                           "--calls", "0", "-k", keyword],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, "GGUF_PARITY_DOCUMENTS": "off"})
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done, json.loads((report / "report.json").read_text())


def conversion_causes(report: dict) -> dict[str, dict]:
    return {e["case_id"]: e["cause"] for e in report["reference_findings"] if e["class"] == "conversion"}


def test_a_default_run_names_the_unicode_version_and_the_loader_retyping(tmp_path):
    """A Gemma-style non-special `</s>` (llama.cpp's loader makes it CONTROL: its end-of-generation list) and
    Unicode 16 letters before 's (unassigned in llama.cpp's Unicode 15.1 tables) on a byte-level BPE twin."""
    original = rf.with_added(rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=False, bos=False),
                             ("</s>",))
    gguf = rf.bpe_gguf(original, tmp_path / "twin.gguf", pre="gpt-2", add_bos=False)
    done, report = default_run(tmp_path, gguf, f"hf:{original.parent}", "bnd-orig-uni or bnd-orig-added")
    found = conversion_causes(report)
    assert done.returncode == 1 and found, done.stdout + done.stderr
    added = {case: c for case, c in found.items() if case.startswith("bnd-orig-added")}
    uni = {case: c for case, c in found.items() if case.startswith("bnd-orig-uni")}
    assert added and {c["class"] for c in added.values()} == {"loader-retyping"}, added
    assert uni and {c["class"] for c in uni.values()} == {"unicode-version"}, uni
    assert any(s["code_point"] == "U+10D50" for c in uni.values() for s in c["detail"]["substituted"])
    block = report["summary"]["reference"]  # every conversion case counted (report.json lists 40 findings)
    assert block["cause_classes"] == {"loader-retyping": block["causes"]["loader-retyping"],
                                      "unicode-version": block["causes"]["unicode-version"]}
    assert sum(block["cause_classes"].values()) == block["classes"]["conversion"]["differ"]
    assert "classes: unicode-version" in done.stdout
    page = (tmp_path / "r" / "report.html").read_text()
    assert 'data-cause-class="loader-retyping"' in page and 'data-kind="unicode-version"' in page


def test_a_default_run_names_the_model_type_and_the_normalizer(tmp_path):
    """A SentencePiece Unigram model (nmt_nfkc) written `llama`: the corpora's compatibility forms
    (fullwidth digits, ligatures) differ by the normalizer no key carries; prose by the model type (the same
    text merged by score, not searched); each named, nothing left unexplained."""
    model = rf.unigram_model(tmp_path / "o" / "tokenizer.model")
    gguf = rf.spm_gguf(model, tmp_path / "twin.gguf")
    done, report = default_run(tmp_path, gguf, f"spm:{model}",
                               "edge-digits-08 or edge-combining-12 or prose-en-1 or prose-en-2")
    found = conversion_causes(report)
    assert done.returncode == 1, done.stdout + done.stderr
    assert found["edge-digits-08"]["class"] == "normalizer" and found["edge-combining-12"]["class"] == "normalizer"
    assert found["edge-digits-08"]["cause"] == "original-normalized"  # both sides fed sentencepiece's normalize
    assert found["prose-en-1"]["class"] == "model-type" and found["prose-en-2"]["class"] == "model-type", found
    block = report["summary"]["reference"]
    assert block["cause_classes"] == {"normalizer": 2, "model-type": 2}, block

