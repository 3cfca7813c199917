"""`run --engine cmd:...` against engine children that misbehave on the wire or answer malformed values
(docs/engine-protocol.md "Bounds"): each is an engine error or a load error, exit 1, in bounded time;
never "internal error" (exit 3), and no process the engine started outlives the run.

The children are tests/protocol_children.py (a line that never ends, a drip, 50 million ids, a hello
claiming 2^40 tokens; each starts a grandchild sleeper and notes the pids) and
tests/malformed_replies.py (right answers from our Tokenizer but for one planted value per model).
Live llama.cpp on shipped vocabularies.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.malformed_replies import MALFORMED
from tests.protocol_children import alive

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def run(tmp_path: Path, models: list[str], engine: str, cases: list[str], *extra: str
        ) -> tuple[subprocess.CompletedProcess, dict, float]:
    corpus = tmp_path / "cases.jsonl"
    corpus.write_text("".join(json.dumps({"id": c, "text": f"case {c}"}) + "\n" for c in cases), encoding="utf-8")
    report = tmp_path / "report"
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", "run", *(a for m in models for a in ("--model", m)),
                           "--no-default-corpora", "--corpus", str(corpus), "--engine", engine,
                           "--engine-timeout", "2", "--report", str(report), "--quiet", "--no-messages",
                           "--calls", "0", "--long-docs", "0", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    took = time.monotonic() - start
    data = json.loads((report / "report.json").read_text(encoding="utf-8")) if done.returncode in (0, 1) else {}
    return done, data, took


@pytest.mark.parametrize(("mode", "words"), [
    pytest.param("flood", "a reply line over", id="no-newline"),
    pytest.param("many-ids", "a reply line over", id="50M-ids"),
    pytest.param("drip", "engine hung: no reply within 2s (", id="drip"),
    pytest.param("hello-2^40", "info.n_tokens is 1099511627776: over the protocol's cap", id="hello-2^40"),
])
def test_a_child_misbehaving_on_the_wire_is_an_engine_error_and_leaves_nothing_behind(tmp_path, require_vocab,
                                                                                       mode, words):
    require_vocab("llama-spm")
    pids = tmp_path / "pids"
    done, report, took = run(tmp_path, ["llama-spm"], f"cmd:{sys.executable} {TESTS / 'protocol_children.py'} "
                                                      f"{mode} {pids}", ["w0"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "internal error" not in done.stderr
    errors = report["engine_errors"]
    assert errors and all(words in e["error"] for e in errors), errors
    assert took < 60
    assert len(pids.read_text().splitlines()) >= 1 and not alive(pids)  # children and grandchildren: all gone


ENTRY = {  # model: (the row of MALFORMED planted, the case the error is on)
    "bert-bge": ("score-huge-int", "<vocab>"),
    "phi-3": ("attr-huge", "<vocab>"),
    "deepseek-coder": ("specials-list", "<vocab>"),
    "baichuan": ("vocab_type-surrogate", "<vocab>"),
}
PER_CASE = ("ids-negative", "ids-huge", "ids-bare-nan", "error-surrogate", "detokenize-short")
TEXT_AND_PIECES = {"op": "hello", "path": ["capabilities"],
                   "raw": '["tokenize", "bytes_input", "token_text", "token_to_piece"]'}


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
def test_malformed_values_are_engine_errors_naming_the_field_never_exit_3(tmp_path, require_vocab):
    """One model per value that ended in "internal error" before (bert-bge's score 10^400, phi-3's attr 2^40,
    deepseek-coder's specials as a list, baichuan's lone surrogate, gpt-2's text differing from an engine
    without token_score: the finding's missing `scores`), llama-spm for the per-case values."""
    models = ["llama-spm", "gpt-2", *ENTRY]
    for model in models:
        require_vocab(model)
    plan = {f"ggml-vocab-{model}.gguf": MALFORMED[name][0] for model, (name, _) in ENTRY.items()}
    plan["ggml-vocab-llama-spm.gguf"] = [{**MALFORMED[name][0], "input": f"case {name}"} for name in PER_CASE]
    plan["ggml-vocab-gpt-2.gguf"] = [TEXT_AND_PIECES, {"op": "vocab", "path": ["text", 5], "raw": '"enp6"'}]
    (tmp_path / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    done, report, _ = run(tmp_path, models, f"cmd:{sys.executable} {TESTS / 'malformed_replies.py'}",
                          list(PER_CASE), "--engine-arg", f"plan={tmp_path / 'plan.json'}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "internal error" not in done.stderr
    errors = {(e["model"], e["case_id"]): e["error"] for e in report["engine_errors"]}
    for model, (name, case_id) in ENTRY.items():
        assert MALFORMED[name][1] in errors[(model, case_id)]
    for name in PER_CASE:
        assert MALFORMED[name][1] in errors[("llama-spm", name)], errors
    assert all("\n" not in error for error in errors.values())
    (text,) = [e for e in report["vocab_mismatches"] if e["model"] == "gpt-2"]
    assert (text["field"], text["token"], text["got"]["text"], text["got"]["score"]) == ("text", 5, "zzz", None)
