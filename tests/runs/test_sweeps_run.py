"""The sweeps of a three-way run (`run --reference --sweeps`, harness/runs/sweeps.py).

Tiny originals and their GGUF twins come from tests/reference_files.py. What the sides answer is
checked against llama.cpp and `tokenizers` directly, never against our engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.errors import SetupError
from harness.inputs import boundaries, derived
from harness.inputs import sweeps as generators
from harness.models.model import open_model
from harness.references import original as original_rules
from harness.runs import sweeps
from harness.runs.config import SWEEPS_ENV, sweep_fields
from tests import reference_files as rf

ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, gguf: Path, original: Path, *extra: str, corpus: list[str] | None = None,
        env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """`run --reference hf:` on the twin (`corpus`: only these texts, else the default cases without documents)."""
    words = []
    if corpus is not None:
        path = tmp_path / "c.jsonl"
        path.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n" for i, t in enumerate(corpus)))
        words = ["--no-default-corpora", "--corpus", str(path)]
    report = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--reference",
                           f"hf:{original.parent}", *words, "--fuzz", "0", "--long-docs", "0", "--calls", "0",
                           "--jobs", "1", "--no-messages", "--report", str(report), *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, "GGUF_PARITY_DOCUMENTS": "off", **(env or {})})
    assert (report / "report.json").is_file(), f"exit {done.returncode}: {done.stderr[-3000:]}"
    return done, json.loads((report / "report.json").read_text())


def library_ids(path: Path, text: str) -> list[int]:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(path))
    tok.encode_special_tokens = True
    return tok.encode(text, add_special_tokens=False).ids


def llama_ids(gguf: Path, text: str) -> list[int]:
    from harness.oracle.session import OracleSession
    with OracleSession(gguf, timeout=60) as oracle:
        return oracle.evaluate({"id": "x", "text": text})["encode"][0]["ids"]


@pytest.mark.oracle
def test_each_sweep_is_a_case_family_screened_three_ways(tmp_path):
    """The tiny BPE twin written with pre `llama-bpe` (digits in runs of 1 to 3) of an original that splits with
    GPT-2's rule (a run of digits whole): the vocab sweep meets its " 67" and judges it as a case."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json")
    gguf = rf.bpe_gguf(original, tmp_path / "tiny.gguf")
    done, report = run(tmp_path, gguf, original, "--sweeps", "added,vocab,unicode=3000,ascii=2000",
                       corpus=["the cat sat"])
    assert done.returncode == 1, done.stdout + done.stderr
    blocks = report["summary"]["per_model"]["tiny"]["reference"]["sweeps"]
    assert list(blocks) == ["added", "vocab", "unicode", "ascii"]
    asked = {"added": 2 * 256, "unicode": 3000, "ascii": 2000}
    for name, block in blocks.items():
        assert block["asked"] == asked.get(name, block["of"]) and block["not_checked"] == 0
        assert block["inputs"] == block["agree"] + block["differ"] + block["not_applicable"] == block["asked"]
        assert block["llama_cpp_calls"] == block["inputs"] * len(block["flag_pairs"])
        assert block["llama_cpp_us_per_call"] > 0
    assert len(blocks["added"]["flag_pairs"]) == 4 and blocks["vocab"]["flag_pairs"] == [[False, False]]
    assert blocks["unicode"]["of"] > 140_000 and blocks["ascii"]["of"] > 300_000
    entries = [e for e in report["reference_findings"] if e["case_id"].startswith("sweep-")]
    judged = {e["case_id"] for e in entries}
    assert sum(block["cases"] for block in blocks.values()) >= len(judged) > 0
    vocab = [e for e in entries if e["case_id"].startswith("sweep-vocab-") and e["class"] == "conversion"]
    assert vocab and all(e["signature"] for e in vocab)
    text = vocab[0]["text"]
    assert llama_ids(gguf, text) != library_ids(original, text)  # both sides asked directly
    token = int(vocab[0]["case_id"].rsplit("-", 1)[1])  # the index of a vocab input is its token id
    by_id = {i: t for t, i in json.loads(original.read_text())["model"]["vocab"].items()}
    assert by_id[token] == rf.byte_level(text)
    cases = [json.loads(line) for line in (tmp_path / "r" / "cases" / "tiny.jsonl").read_text().splitlines()]
    assert {c["id"] for c in cases} >= set(judged)  # every reproduce line finds its input
    assert any(line.startswith("tiny: sweep vocab:") for line in report["summary"]["per_model"]["tiny"]["notes"])


def planted_twin(tmp_path: Path) -> tuple[Path, Path, str]:
    """An original with 130 plain added tokens, one of them lstrip, and its GGUF twin (every added token
    USER_DEFINED, which llama.cpp does not lstrip; pre gpt-2, the original's own split). The planted one is a
    token no default case holds: the GGUF's special probes and the original's added-token probes each take a
    spread of the list, and both miss it."""
    from tokenizers import AddedToken, Tokenizer

    def build(lstrip: str | None) -> Path:
        path = rf.bpe_json(tmp_path / "o" / "tokenizer.json")
        tok = Tokenizer.from_file(str(path))
        tok.add_tokens([AddedToken(f"<t{i}>", special=False, normalized=False, lstrip=f"<t{i}>" == lstrip)
                        for i in range(130)])
        tok.save(str(path))
        return path

    original = build(None)
    gguf = rf.bpe_gguf(original, tmp_path / "twin.gguf", pre="gpt-2")
    probes = boundaries.vocab_probes(gguf) + derived.added_probes(original_rules.read(f"hf:{original.parent}").added)
    missed = [f"<t{i}>" for i in range(130) if not any(f"<t{i}>" in p for p in probes)]
    order = sweeps._added_tokens(f"hf:{original.parent}", open_model(str(gguf)))
    planted = min(missed, key=order.index)  # the first the added sweep reaches
    return build(planted), gguf, planted


@pytest.mark.oracle
def test_a_planted_lstrip_difference_is_found_by_the_added_sweep_and_not_by_the_default_cases(tmp_path):
    original, gguf, planted = planted_twin(tmp_path)
    assert library_ids(original, f"a {planted}") != llama_ids(gguf, f"a {planted}")  # the plant, asked directly
    order = sweeps._added_tokens(f"hf:{original.parent}", open_model(str(gguf)))
    size = generators.FORMS_PER_TOKEN * (order.index(planted) + 1)  # the sweep up to the planted token
    done, report = run(tmp_path, gguf, original, "--sweeps", f"added={size}")
    holding = [e for kind in ("mismatches", "reference_findings") for e in report[kind]
               if planted in str(e.get("text"))]
    assert holding, done.stdout + done.stderr
    assert all(e["case_id"].startswith("sweep-added-") for e in holding)  # no default case reached it
    conversion = [e for e in holding if e["class"] == "conversion"]
    assert conversion and all(e["signature"] for e in conversion)
    assert any(f" {planted}" in e["text"] or f"\n{planted}" in e["text"] or f"\t{planted}" in e["text"]
               for e in conversion)  # whitespace before it: the lstrip case
    assert report["summary"]["per_model"]["twin"]["cases"] > 200  # the default cases ran beside it


def config_of(*words: str, env: str | None = None, monkeypatch=None) -> dict:
    if monkeypatch is not None:
        if env is None:
            monkeypatch.delenv(SWEEPS_ENV, raising=False)
        else:
            monkeypatch.setenv(SWEEPS_ENV, env)
    return sweep_fields(build_parser().parse_args(["run", "--model", "m.gguf", *words]))


def test_the_sweeps_run_by_default_in_a_three_way_run_over_the_default_corpora_only(monkeypatch):
    default = config_of("--reference", "hf:o", monkeypatch=monkeypatch)["sweeps"]
    assert default.sizes == generators.DEFAULT_SIZES and default.seconds == generators.DEFAULT_SECONDS
    assert config_of(monkeypatch=monkeypatch) == {}  # two ways: none
    for narrowed in (["--no-default-corpora"], ["--case", "x"], ["-k", "bnd"]):
        assert config_of("--reference", "hf:o", *narrowed, monkeypatch=monkeypatch) == {}
    assert config_of("--reference", "hf:o", env="none", monkeypatch=monkeypatch) == {}
    sized = config_of("--reference", "hf:o", "--no-default-corpora", "--sweeps", "vocab,ascii=10",
                      monkeypatch=monkeypatch)["sweeps"]
    assert sized.sizes == {"vocab": None, "ascii": 10} and sized.seconds is None
    timed = config_of("--reference", "hf:o", "--sweeps", "all", "--sweep-seconds", "30",
                      monkeypatch=monkeypatch)["sweeps"]
    assert timed.sizes == dict.fromkeys(generators.NAMES) and timed.seconds == 30


@pytest.mark.parametrize(("words", "says"), [
    (["--reference", "hf:o", "--sweeps", "vocab,bogus"], "unknown sweep 'bogus'"),
    (["--reference", "hf:o", "--sweeps", "vocab=0"], "whole number"),
    (["--sweeps", "vocab"], "--sweeps needs --reference"),
    (["--reference", "hf:o", "--sweep-seconds", "0"], "--sweep-seconds 0"),
])
def test_a_bad_sweeps_option_is_one_line(monkeypatch, words, says):
    with pytest.raises(SetupError, match=says):
        config_of(*words, monkeypatch=monkeypatch)


def test_a_bad_sweeps_option_exits_2_before_any_work(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "llama-spm", "--sweeps", "vocab=x",
                           "--reference", "hf:nowhere", "--report", str(tmp_path / "r")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "--sweeps 'vocab=x'" in done.stderr and "Traceback" not in done.stderr
