"""An honest verdict: a model nothing was compared on is "not checked", never a pass.

Both sides refusing a file (unreadable, empty, not GGUF, truncated, a hostile
header) leaves it not checked: exit 2, a one-line reason, listed under
`summary.not_checked` in report.json, in the page and in the verdict line.
Agreement on a refusal is asked for with `--expect-refusal`, and then shown
as "refused as expected". Expected outcomes of the live tests come from
llama.cpp refusing the files itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.compare import verdict
from harness.compare.result import ModelResult
from harness.report import build as reporting

ROOT = Path(__file__).resolve().parents[2]


def _report(*results: ModelResult) -> dict:
    return reporting.build(results, meta={"command": "test"})


def _checked(name: str = "ok") -> ModelResult:
    result = ModelResult(name, "spm", cases=10)
    verdict.finish(result)
    return result


def test_a_model_both_sides_refuse_is_not_checked_and_exit_2():
    refused = ModelResult("bad", "other")
    refused.not_checked = "both refuse the file: llama.cpp (x); engine (y)"
    report = _report(_checked(), refused)
    assert report["summary"]["not_checked"] == {"bad": refused.not_checked}
    assert verdict.exit_status(report) == 2
    line = reporting.one_line(report)
    assert line.startswith("NOT CHECKED") and "bad (both refuse the file" in line and "all match" not in line


def test_zero_cases_is_never_a_pass():
    empty = ModelResult("empty", "spm")
    verdict.finish(empty)
    report = _report(empty)
    assert empty.not_checked == verdict.NO_CASES
    assert verdict.exit_status(report) == 2 and reporting.one_line(report).startswith("NOT CHECKED")


def test_no_models_at_all_is_not_a_pass():
    assert verdict.exit_status(_report()) == 2


def test_differences_and_a_clean_run_keep_their_codes():
    assert verdict.exit_status(_report(_checked())) == 0
    bad = ModelResult("m", "spm", cases=1)
    bad.add("mismatches", {"case_id": "c"})
    assert verdict.exit_status(_report(bad)) == 1


def test_an_expected_refusal_is_shown_as_such():
    refused = ModelResult("hostile", "other", expected_refusal="both refuse the file")
    verdict.finish(refused)
    report = _report(refused)
    assert refused.not_checked is None and verdict.exit_status(report) == 0
    assert report["summary"]["refused_as_expected"] == ["hostile"]
    assert 'id="refused-as-expected"' in reporting.render_html(report)


def test_the_page_lists_models_not_checked():
    refused = ModelResult("bad", "other", not_checked="both refuse the file")
    page = reporting.render_html(_report(_checked(), refused))
    assert 'id="not-checked"' in page and "<b>bad</b>: both refuse the file" in page
    assert 'class="verdict found"' in page


def test_merging_keeps_a_model_not_checked():
    refused = ModelResult("bad", "other", not_checked="0 cases checked")
    merged = reporting.merge([_report(_checked()), _report(refused)], meta={})
    assert verdict.not_checked(merged) == {"bad": "0 cases checked"} and verdict.exit_status(merged) == 2


# --- live: llama.cpp and our engine both refuse hostile files ------------------------------------

HOSTILE = {
    "empty": b"",
    "not-gguf": b"PK\x03\x04 this is a zip, not a GGUF file",
    "hostile-header": b"GGUF\x03\x00\x00\x00" + b"\xff" * 16,
}


def harness(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600, check=False)


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "Hello"}\n')
    return corpus


@pytest.mark.oracle
@pytest.mark.parametrize("kind", [*sorted(HOSTILE), "truncated"])
def test_a_file_both_refuse_ends_with_exit_2_not_checked(tmp_path: Path, kind: str, require_vocab):
    model = tmp_path / f"{kind}.gguf"
    if kind == "truncated":  # a real vocabulary cut in the middle of its token array
        model.write_bytes(require_vocab("llama-spm").read_bytes()[:200_000])
    else:
        model.write_bytes(HOSTILE[kind])
    done = harness("run", "--model", str(model), "--corpus", str(_corpus(tmp_path)), "--no-default-corpora",
                   "--report", str(tmp_path / "r"), "--quiet")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout.startswith("NOT CHECKED") and "Traceback" not in done.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert list(report["summary"]["not_checked"]) == [kind]
    assert "both refuse" in report["summary"]["not_checked"][kind]


@pytest.mark.oracle
def test_expect_refusal_makes_both_refusing_agreement(tmp_path: Path):
    model = tmp_path / "empty.gguf"
    model.write_bytes(b"")
    done = harness("run", "--model", str(model), "--corpus", str(_corpus(tmp_path)), "--no-default-corpora",
                   "--report", str(tmp_path / "r"), "--quiet", "--expect-refusal")
    assert done.returncode == 0, (done.stdout, done.stderr)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["summary"]["refused_as_expected"] == ["empty"] and report["summary"]["not_checked"] == {}


@pytest.mark.oracle
def test_expect_refusal_on_a_file_both_load_is_a_finding(tmp_path: Path, require_vocab):
    require_vocab("llama-spm")
    done = harness("run", "--model", "llama-spm", "--corpus", str(_corpus(tmp_path)), "--no-default-corpora",
                   "--report", str(tmp_path / "r"), "--quiet", "--expect-refusal")
    assert done.returncode == 1, (done.stdout, done.stderr)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert [v["field"] for v in report["vocab_mismatches"]] == ["load"]


def test_a_golden_whose_gguf_is_missing_is_not_checked(tmp_path: Path, require_vocab):
    """Was: "skipping ..." on stderr, and the run still said "all match" with exit 0."""
    require_vocab("gpt-neox")
    folder = tmp_path / "golden"
    folder.mkdir()
    (folder / "ggml-vocab-gpt-neox.json").write_bytes((ROOT / "golden" / "ggml-vocab-gpt-neox.json").read_bytes())
    text = (ROOT / "golden" / "ggml-vocab-gpt-2.json").read_text(encoding="utf-8")
    digest = json.loads(text)["gguf"]["sha256"]
    (folder / "ggml-vocab-gpt-2.json").write_text(text.replace(digest, "0" * 64), encoding="utf-8")
    done = harness("compare", "--golden", str(folder), "--report", str(tmp_path / "r"), "--quiet")
    assert done.returncode == 2, (done.stdout, done.stderr)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert list(report["summary"]["not_checked"]) == ["gpt-2"]
    assert report["summary"]["per_model"]["gpt-neox"]["cases"] > 0
