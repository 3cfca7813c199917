"""The engine contract (docs/engine-contract.md): per-capability verdicts and containment of engine faults.

Expected ids come from llama.cpp's golden (golden/ggml-vocab-llama-spm.json);
the engines under test (tests/hostile_engines.py) are our own Tokenizer with
planted faults, so every case but the planted ones must agree.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _golden_counts() -> tuple[int, int]:
    """(cases, cases whose input is not UTF-8) of the llama-spm golden, which llama.cpp recorded."""
    from harness.golden.files import load_golden
    golden = load_golden(ROOT / "golden" / "ggml-vocab-llama-spm.json")
    return len(golden["cases"]), sum("bytes" in c for c in golden["cases"])


CASES, INVALID_UTF8_CASES = _golden_counts()  # the invalid ones: edge-invalid-* and boundary bytes


def compare(tmp_path: Path, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, dict | None]:
    report = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness", "compare", "--golden", str(ROOT / "golden"),
                           "--model", "llama-spm", "--report", str(report), "--quiet", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    path = report / "report.json"
    return done, json.loads(path.read_text()) if path.is_file() else None


def faulty_cases() -> set[str]:
    """The golden cases whose input is one of the planted faults (some inputs recur in several corpora)."""
    from harness.golden.files import load_golden
    from harness.inputs.corpus import case_input
    from tests.hostile_engines import FAULTS
    golden = load_golden(ROOT / "golden" / "ggml-vocab-llama-spm.json")
    return {c["id"] for c in golden["cases"] if "document" not in c and case_input(c) in FAULTS}  # a document: a digest


def errors_by_case(report: dict) -> dict[str, str]:
    return {e["case_id"]: e["error"] for e in report["engine_errors"]}


def test_tokenize_only_adapter_is_judged_on_ids_alone(tmp_path, require_vocab):
    require_vocab("llama-spm")
    done, report = compare(tmp_path, "--engine", "tests.hostile_engines:load_tokenize_only")
    assert done.returncode == 0, done.stdout + done.stderr
    caps = report["summary"]["capabilities"]
    assert caps["ids"] | {} == {**caps["ids"], "status": "checked", "checked": CASES - INVALID_UTF8_CASES,
                                "agree": CASES - INVALID_UTF8_CASES, "not_applicable": INVALID_UTF8_CASES}
    for check in ("detokenize", "pieces", "text", "score", "attr", "vocab_info", "specials", "eog", "control"):
        assert caps[check]["status"] == "not offered" and caps[check]["checked"] == 0, check
    summary = report["summary"]
    assert summary["not_applicable"] == INVALID_UTF8_CASES
    assert summary["passed"] == CASES - INVALID_UTF8_CASES  # not-applicable cases are not passes
    valid = CASES - INVALID_UTF8_CASES
    assert f"ids {valid}/{valid} agree, {INVALID_UTF8_CASES} not applicable; detokenize not offered" in done.stdout
    assert done.stdout.startswith("all checked agree (some capabilities not checked)"), done.stdout
    html = (tmp_path / "r" / "report.html").read_text()
    assert 'data-check="detokenize"' in html and "not offered" in html


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory, require_vocab):
    """One compare of the faulty engine (tests/hostile_engines.py), shared by the checks below."""
    require_vocab("llama-spm")
    tmp = tmp_path_factory.mktemp("faulty")
    done, report = compare(tmp, "--engine", "tests.hostile_engines:load_faulty", "--engine-timeout", "3")
    assert report is not None, done.stderr
    return done, report, (tmp / "r" / "report.html").read_text()


def test_engine_faults_are_contained_to_their_case(faulty_run):
    """Hang, sys.exit(0), a dying process and non-int ids: each one engine error, the run goes on, exit 1."""
    done, report, _ = faulty_run
    assert done.returncode == 1, done.stdout + done.stderr
    errors = errors_by_case(report)
    assert set(errors) == faulty_cases(), errors
    assert "hung" in errors["inp-001"]
    assert errors["inp-000"].startswith("SystemExit")
    assert "exited with status 3" in errors["inp-003"]
    assert "float" in errors["inp-004"] and "str" in errors["inp-006"] and "bool" in errors["inp-007"]
    assert report["mismatches"] == [] and report["vocab_mismatches"] == []
    ids = report["summary"]["capabilities"]["ids"]
    assert (ids["checked"], ids["agree"], ids["errors"]) == (CASES, CASES - len(errors), len(errors))


def test_engine_error_keeps_its_traceback(faulty_run):
    _, report, html = faulty_run
    entry = next(e for e in report["engine_errors"] if e["case_id"] == "inp-000")
    assert "Traceback" in entry["traceback"] and "sys.exit(0)" in entry["traceback"]
    assert '<details class="traceback"><summary>traceback</summary>' in html


def test_factory_returning_none_is_an_engine_error(tmp_path, require_vocab):
    require_vocab("llama-spm")
    done, report = compare(tmp_path, "--engine", "tests.hostile_engines:load_none")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (entry,) = report["engine_errors"]
    assert "returned None" in entry["error"] and entry["case_id"] == "<load>"
    assert report["summary"]["capabilities"]["ids"]["agree"] == 0


def test_engine_args_reach_the_adapter_and_close_is_called(tmp_path, require_vocab):
    require_vocab("llama-spm")
    marker = tmp_path / "closed"
    done, report = compare(tmp_path, "--engine", "tests.hostile_engines:load_with_args",
                           "--engine-arg", f"marker={marker}", "--engine-arg", "drop_last=yes")
    assert done.returncode == 1, done.stderr
    assert marker.read_text() == "closed\n"
    assert report["engine_errors"] == [] and report["mismatches"]  # the option changed the ids
    command = report["mismatches"][0]["command"]
    assert "--engine tests.hostile_engines:load_with_args" in command
    assert f"--engine-arg marker={marker}" in command and "--engine-arg drop_last=yes" in command


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(("--engine", "tests.hostile_engines:nosuch"), "has no attribute nosuch", id="no-attribute"),
    pytest.param(("--engine", "cmd:no-such-program-xyz --serve"), "no such executable", id="no-program"),
    pytest.param(("--engine", "cmd:"), "no command after cmd:", id="empty-command"),
    pytest.param(("--engine-arg", "x=1"), "takes no options", id="arg-for-default-engine"),
    pytest.param(("--engine", "cmd:x", "--engine-arg", "not an identifier"), "expected KEY=VALUE", id="bad-arg"),
    pytest.param(("--engine-timeout", "nan"), "--engine-timeout nan", id="bad-timeout"),
])
def test_engine_setup_errors_exit_2_with_one_line(tmp_path, capsys, args, message):
    from harness.cli import main
    code = main(["compare", "--golden", str(ROOT / "golden"), "--model", "llama-spm",
                 "--report", str(tmp_path / "r"), "--quiet", *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_python_reference_child_matches_like_the_in_process_engine(tmp_path, require_vocab):
    """Our Tokenizer behind the protocol: every capability checked, 0 differences (the protocol is lossless)."""
    require_vocab("llama-spm")
    done, report = compare(tmp_path, "--engine", f"cmd:{sys.executable} -m harness.children.python_child")
    assert done.returncode == 0, done.stdout + done.stderr
    caps = report["summary"]["capabilities"]
    assert all(row["status"] == "checked" and row["agree"] == row["checked"] for row in caps.values()), caps
    assert caps["ids"]["checked"] == CASES and caps["ids"]["not_applicable"] == 0  # bytes input: invalid UTF-8 too


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (apt-get install nodejs)")
def test_node_reference_child_gives_an_honest_per_capability_report(tmp_path, require_vocab):
    """A toy in JavaScript: what it declares is checked, the rest is 'not offered', nothing passes unchecked."""
    require_vocab("llama-spm")
    done, report = compare(tmp_path, "--engine", f"cmd:node {ROOT / 'harness' / 'children' / 'node_child.mjs'}")
    assert done.returncode == 1, done.stdout + done.stderr  # a greedy toy differs from llama.cpp
    assert report["engine_errors"] == [], report["engine_errors"][:1]
    caps = report["summary"]["capabilities"]
    assert {c for c, row in caps.items() if row["status"] == "checked"} == {
        "ids", "detokenize", "text", "score", "vocab_info"}
    assert caps["text"]["agree"] == 1 and caps["score"]["agree"] == 1  # read straight from the GGUF
    assert 0 < caps["ids"]["agree"] < caps["ids"]["checked"] == CASES
    for check in ("pieces", "attr", "specials", "eog", "control"):
        assert caps[check]["status"] == "not offered"
    # a case passes only when every checked capability agrees on it: never more than agree on ids
    assert report["summary"]["passed"] <= min(caps["ids"]["agree"], caps["detokenize"]["agree"])


@pytest.mark.oracle
def test_a_user_engines_fuzz_finds_go_under_its_report_not_the_project(tmp_path, require_vocab):
    """Without --found-dir, another engine's minimal failure is saved in <report>/found, not in the package's
    harness/data/corpora/found."""
    require_vocab("llama-spm")
    project_found = ROOT / "harness" / "data" / "corpora" / "found" / "llama-spm.jsonl"
    before = project_found.read_bytes() if project_found.is_file() else None
    report = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "llama-spm", "--no-default-corpora",
                           "--fuzz", "40", "--seed", "3", "--engine", "tests.broken_engine:load_tab",
                           "--report", str(report),
                           "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    saved = [json.loads(line) for line in (report / "found" / "llama-spm.jsonl").read_text().splitlines()]
    [shrunk] = [c["text"] for c in saved]
    assert "\t" in shrunk and len(shrunk) <= 8, shrunk  # the minimal failure, as tests/commands/test_run_cli.py has it
    assert (project_found.read_bytes() if project_found.is_file() else None) == before
