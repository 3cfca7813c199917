"""Engine flakes: an engine whose process fails once and answers on the re-check.

The failure is not repeated, so the fresh answer is compared (and agrees), but the
engine under test did hang or crash: the run lists it as an engine flake in
report.json and on the page, counts it in the summary line, and exits 1 unless
--allow-flakes. The engines are tests/flaky_engines.py (our Tokenizer, failing once
on one planted input); expected ids come from llama.cpp, live.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flaky_engines import EXIT_STATUS, PLANTED

ROOT = Path(__file__).resolve().parents[2]
CASES = [{"id": "flk-hello", "text": "Hello world"}, {"id": "flk-planted", "text": PLANTED},
         {"id": "flk-tab", "text": "a\tb"}]


def run(tmp_path: Path, engine: str, *extra: str, cases: list[dict] = CASES
        ) -> tuple[subprocess.CompletedProcess, dict, str]:
    tmp_path.mkdir(exist_ok=True)
    corpus = tmp_path / "cases.jsonl"
    corpus.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    report = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "llama-spm", "--no-default-corpora",
                           "--corpus", str(corpus), "--engine", engine, "--engine-arg",
                           f"state={tmp_path / 'failed-once'}", "--engine-timeout", "3", "--report", str(report),
                           "--quiet", "--no-messages", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    return done, data, (report / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(("engine", "first"), [
    pytest.param("tests.flaky_engines:load_hang_once", "engine hung: no reply within 3s", id="hang",
                 marks=pytest.mark.nightly),  # 23 s of waiting on hangs: the nightly runs it
    pytest.param("tests.flaky_engines:load_exit_once", f"exited with status {EXIT_STATUS}", id="exit"),
])
def test_a_failure_that_does_not_repeat_is_an_engine_flake(tmp_path, require_vocab, engine, first):
    require_vocab("llama-spm")
    done, report, page = run(tmp_path, engine)
    assert (tmp_path / "failed-once").is_file()  # the planted failure did happen
    assert done.returncode == 1, done.stdout + done.stderr
    s = report["summary"]
    assert (s["mismatches"], s["engine_errors"], s["failing_cases"]) == (0, 0, 0)  # the re-check answered
    (flake,) = report["engine_flakes"]
    assert first in flake["first"] and flake["op"] == "tokenize" and "flk-planted" in flake["case_ids"]
    assert flake["model"] == "llama-spm"
    assert s["engine_flakes"] == 1 and s["per_model"]["llama-spm"]["engine_flakes"] == 1
    assert "1 engine flakes" in done.stdout
    assert 'id="engine-flakes"' in page and "flk-planted" in page and first in page

    allowed, report, page = run(tmp_path / "allowed", engine, "--allow-flakes")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert len(report["engine_flakes"]) == 1 and report["summary"]["engine_flakes"] == 1
    assert report["meta"]["allow_flakes"] is True
    assert 'id="engine-flakes"' in page and "--allow-flakes" in page


def test_a_batch_flake_is_kept_when_another_case_of_the_batch_is_an_engine_error(tmp_path, require_vocab):
    """The batch's process exit did not repeat; the case the engine refuses (it raises, every time) is
    an engine error the engine answered, which does not explain the exit: the flake stays listed."""
    require_vocab("llama-spm")
    cases = [*CASES, {"id": "flk-refused", "text": "refused"}]
    done, report, page = run(tmp_path, "tests.flaky_engines:load_exit_once", "--engine-arg", "refuse=refused",
                             cases=cases)
    assert done.returncode == 1, done.stdout + done.stderr
    (error,) = report["engine_errors"]
    assert error["case_id"] == "flk-refused" and "refused on purpose" in error["error"]
    (flake,) = report["engine_flakes"]  # before: none, and the exit with status 3 was nowhere
    assert f"exited with status {EXIT_STATUS}" in flake["first"] and "flk-planted" in flake["case_ids"]
    assert 'id="engine-flakes"' in page


def compare(tmp_path: Path, on: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict, str]:
    tmp_path.mkdir(exist_ok=True)
    report = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "harness", "compare", "--golden", str(ROOT / "golden"),
                           "--model", "llama-spm", "--engine", "tests.flaky_engines:load_exit_once",
                           "--engine-arg", f"state={tmp_path / 'failed-once'}", "--engine-arg", f"on={on}",
                           "--engine-timeout", "10", "--report", str(report), "--quiet", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    return done, data, (report / "report.html").read_text(encoding="utf-8")


def test_compare_lists_an_engine_flake_and_fails_unless_allowed(tmp_path, require_vocab):
    """The golden replay (harness.runs.replay) keeps the flake as `run` does: listed, counted, exit 1."""
    require_vocab("llama-spm")
    golden = json.loads((ROOT / "golden" / "ggml-vocab-llama-spm.json").read_text(encoding="utf-8"))
    case = next(c for c in golden["cases"] if c.get("text") and "bytes" not in c)  # recorded from llama.cpp
    done, report, page = compare(tmp_path / "denied", case["text"])
    assert (tmp_path / "denied" / "failed-once").is_file()  # the planted exit did happen
    assert done.returncode == 1, done.stdout + done.stderr
    s = report["summary"]
    assert (s["mismatches"], s["engine_errors"], s["failing_cases"]) == (0, 0, 0)  # the re-check answered
    (flake,) = report["engine_flakes"]
    assert f"exited with status {EXIT_STATUS}" in flake["first"] and case["id"] in flake["case_ids"]
    assert flake["model"] == "llama-spm" and s["engine_flakes"] == 1
    assert "1 engine flakes" in done.stdout and 'id="engine-flakes"' in page

    allowed, report, page = compare(tmp_path / "allowed", case["text"], "--allow-flakes")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert len(report["engine_flakes"]) == 1 and report["meta"]["allow_flakes"] is True
    assert 'id="engine-flakes"' in page and "--allow-flakes" in page
