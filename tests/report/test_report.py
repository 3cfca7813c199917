"""report.json and report.html: counts, per-model/per-family breakdowns, merging, escaping."""

from __future__ import annotations

import json
import re

import pytest

from harness.cli import main
from harness.compare import verdict
from harness.report import build as report
from harness.subjects.client import flake_record


def result(model: str, family: str, *, cases: int, mismatches: int = 0, crashes: int = 0) -> report.ModelResult:
    r = report.ModelResult(model, family, cases=cases)
    for i in range(mismatches):
        r.add("mismatches", {"case_id": f"m{i}", "text": "<script>alert(1)</script>\t", "add_special": True,
                             "parse_special": False, "expected": [1, 2], "got": [1, 3], "first_diff": 1,
                             "category": "merge order", "command": f"python -m harness run --model {model}"})
    for i in range(crashes):
        r.add("oracle_crashes", {"case_id": f"c{i}", "bytes": "ff", "text": "",
                                 "crash": {"reason": "killed by SIGABRT", "stderr": "GGML_ASSERT"}})
    return r


@pytest.fixture
def built() -> dict:
    return report.build([result("llama-spm", "spm", cases=10, mismatches=2),
                         result("gpt-2", "bpe", cases=5, crashes=1),
                         result("qwen2", "bpe", cases=4)], meta={"command": "test"})


def test_summary_counts(built):
    s = built["summary"]
    assert (s["cases"], s["mismatches"], s["oracle_crashes"], s["engine_errors"]) == (19, 2, 1, 0)
    assert s["failing_cases"] == 3 and s["passed"] == 16
    assert s["per_model"]["llama-spm"]["pass_rate"] == pytest.approx(0.8)
    assert s["per_family"]["bpe"]["models"] == 2 and s["per_family"]["bpe"]["cases"] == 9
    assert verdict.found_anything(built)


def test_mismatch_fields(built):
    entry = built["mismatches"][0]
    for key in ("model", "case_id", "text", "add_special", "parse_special", "expected", "got",
                "first_diff", "category"):
        assert key in entry


def test_clean_report():
    clean = report.build([result("qwen2", "bpe", cases=4)], meta={})
    assert not verdict.found_anything(clean)
    assert report.one_line(clean).startswith("all match")


def test_write_html_escapes_and_shows_whitespace(built, tmp_path):
    json_path, html_path = report.write(built, tmp_path)
    assert json.loads(json_path.read_text())["summary"]["cases"] == 19
    html = html_path.read_text(encoding="utf-8")
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;⇥" in html
    assert 'data-case="c0"' in html and "killed by SIGABRT" in html
    assert "python -m harness run --model llama-spm" in html


def test_merge_adds_up(built, tmp_path):
    other = report.build([result("llama-spm", "spm", cases=3, mismatches=1)], meta={})
    merged = report.merge([built, other], meta={})
    assert merged["summary"]["per_model"]["llama-spm"]["cases"] == 13
    assert merged["summary"]["mismatches"] == 3
    assert len(merged["mismatches"]) == 3


def test_merge_reports_command(built, tmp_path):
    report.write(built, tmp_path / "a")
    report.write(report.build([result("qwen2", "bpe", cases=4)], meta={}), tmp_path / "b")
    assert main(["merge-reports", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")]) == 1
    merged = json.loads((tmp_path / "m" / "report.json").read_text())
    assert merged["summary"]["per_model"]["qwen2"]["cases"] == 8
    assert (tmp_path / "m" / "report.html").is_file()


def test_merge_reports_clean_exits_0(tmp_path):
    report.write(report.build([result("qwen2", "bpe", cases=4)], meta={}), tmp_path / "a")
    assert main(["merge-reports", str(tmp_path / "a"), "--out", str(tmp_path / "m")]) == 0


def test_merge_reports_rejects_a_non_report(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "report.json").write_text("{}")
    assert main(["merge-reports", str(tmp_path / "x"), "--out", str(tmp_path / "m")]) == 2
    assert "not a gguf-parity report.json" in capsys.readouterr().err


def all_match_with_known_crashes() -> dict:
    """An all-match run: 20 cases, 2 known llama.cpp crashes, 1 case the engine cannot take, no finding."""
    r = report.ModelResult("llama-spm", "spm", cases=20)
    for i in range(2):
        r.add("known_oracle_crashes", {"case_id": f"k{i}", "text": "x", "known_crash": "demo",
                                       "crash": {"reason": "killed by SIGABRT"}})
    r.not_applicable.add("na0")
    return report.build([r, result("qwen2", "bpe", cases=4)], meta={"command": "test"})


def test_the_page_shows_agreed_of_checked_and_no_rate_below_100_when_all_match():
    built = all_match_with_known_crashes()
    assert verdict.exit_status(built) == 0 and report.one_line(built).startswith("all match")
    html = report.render_html(built)
    tables = re.findall(r'<table id="(?:families|models)">.*?</table>', html, re.S)
    assert len(tables) == 2
    rates = [float(p) for t in tables for p in re.findall(r">(\d+(?:\.\d+)?)%<", t)]
    assert rates and all(rate == 100 for rate in rates), rates
    assert "agreed / checked" in tables[0] and "17 / 17" in tables[0] and "17 / 17" in tables[1]
    assert "4 / 4" in tables[1]
    assert "known-crash cases" in tables[1] and "not applicable" in tables[1]
    model = built["summary"]["per_model"]["llama-spm"]
    assert (model["checked"], model["passed"], model["agree_rate"]) == (17, 17, 1.0)
    assert model["pass_rate"] == pytest.approx(17 / 20)  # unchanged meaning: passed / cases (report.json)



def test_the_summary_line_says_how_many_cases_were_checked_and_why_the_rest_were_set_aside():
    """The line atop the page reads as the tables do: 24 cases, 21 checked (the tables' agreed / checked)."""
    line = report.one_line(all_match_with_known_crashes())
    assert "24 cases (21 checked; set aside: 2 known-crash cases, 1 not-applicable case), 0 failing" in line
    assert "4 cases, 0 failing" in report.one_line(report.build([result("gpt-2", "bpe", cases=4)], meta={}))


def test_a_rate_is_never_rounded_up_to_100_while_a_case_differs():
    assert report.agree_pct(9999, 10000) == "99.9%" and report.agree_pct(3, 3) == "100%"
    assert report.agree_pct(0, 0) == "n/a"


def test_engine_flakes_and_harness_faults_are_on_the_page_and_flakes_fail_the_verdict():
    r = report.ModelResult("qwen2", "bpe", cases=4)
    r.add_flake(flake_record(["c1", "c2"], "tokenize", "engine hung: no reply within 3s"))
    r.add_fault({"case_id": "c3", "op": "evaluate", "reason": "worker signal SIGKILL on evaluate",
                 "crash": {"kind": "signal", "signal": "SIGKILL", "exit": -9, "stderr": "", "call": None}})
    built = report.build([r], meta={})
    assert built["summary"]["engine_flakes"] == 1 and built["summary"]["harness_faults"] == 1
    assert verdict.exit_status(built) == 1 and "1 engine flakes" in report.one_line(built)
    html = report.render_html(built)
    assert 'id="engine-flakes"' in html and "c1, c2" in html and "engine hung: no reply within 3s" in html
    faults = re.search(r'<table id="faults">.*?</table>', html, re.S)
    assert 'id="harness-faults"' in html and faults and "the llama.cpp worker was killed by SIGKILL" in faults[0]
    flakes = re.search(r'<table id="flakes">.*?</table>', html, re.S)
    assert flakes and "held 2 cases; each, asked alone" in flakes[0]  # a batch: which case set it off is unknown
    allowed = report.build([r], meta={"allow_flakes": True})
    assert verdict.exit_status(allowed) == 0 and len(allowed["engine_flakes"]) == 1


def test_merge_reports_keeps_flakes_and_fails_them_unless_their_part_allowed_them(tmp_path):
    flaky = report.ModelResult("qwen2", "bpe", cases=4)
    flaky.add_flake({"case_ids": ["c1"], "op": "tokenize", "first": "engine process exited with status 3",
                     "recheck": "a fresh engine process answered"})
    report.write(report.build([flaky], meta={}), tmp_path / "a")
    report.write(report.build([flaky], meta={"allow_flakes": True}), tmp_path / "allowed")
    report.write(report.build([result("gpt-2", "bpe", cases=4)], meta={}), tmp_path / "clean")
    assert main(["merge-reports", str(tmp_path / "a"), str(tmp_path / "clean"), "--out", str(tmp_path / "m")]) == 1
    merged = json.loads((tmp_path / "m" / "report.json").read_text())
    assert merged["summary"]["engine_flakes"] == 1 and len(merged["engine_flakes"]) == 1
    assert 'id="engine-flakes"' in (tmp_path / "m" / "report.html").read_text(encoding="utf-8")
    assert main(["merge-reports", str(tmp_path / "allowed"), str(tmp_path / "clean"),
                 "--out", str(tmp_path / "m2")]) == 0
    assert main(["merge-reports", str(tmp_path / "clean"), "--out", str(tmp_path / "m3")]) == 0
    # no flake anywhere: the merged report does not claim that flakes were allowed
    assert json.loads((tmp_path / "m3" / "report.json").read_text())["meta"]["allow_flakes"] is False
