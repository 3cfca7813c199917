"""The fuzzer stops at its first failing input: the verdict line and the page say how many of the inputs asked ran.

`run --fuzz N` shrinks the first failure and stops, so the budget N is an upper bound;
`summary.fuzz` (harness/report/fuzz_summary.py) carries asked, ran and why it stopped,
and the one-line verdict (also the page's first line) shows it.
"""

from __future__ import annotations

import json

import pytest

from harness.compare.result import ModelResult
from harness.report import build
from tests.runs.test_third_side import three_way


def result(name: str, asked: int, ran: int, stopped: str | None) -> ModelResult:
    r = ModelResult(model=name, family="bpe", cases=ran)
    r.fuzz = {"asked": asked, "ran": ran, "stopped": stopped}
    return r


def test_the_verdict_line_says_how_many_fuzzed_inputs_ran_and_why_it_stopped():
    stopped = result("a", 200, 1, "at the first failing input fuzz-1 (shrunk)")
    report = build.build([stopped, result("b", 200, 200, None)], meta={})
    assert report["summary"]["fuzz"] == {"asked": 400, "ran": 201,
                                         "stopped": {"a": "at the first failing input fuzz-1 (shrunk)"}}
    line = build.one_line(report)
    assert "fuzz: 201 of 400 inputs ran (stopped early on a: at the first failing input fuzz-1 (shrunk))" in line
    assert "stopped" in build.render_html(report).split('id="verdict">', 1)[1].split("</p>", 1)[0]
    unfuzzed = build.build([ModelResult(model="a", family="bpe", cases=3)], meta={})
    assert "fuzz" not in unfuzzed["summary"] and "fuzz:" not in build.one_line(unfuzzed)


def test_merged_reports_add_the_fuzz_counts_up():
    one = build.build([result("a", 10, 3, "at the first failing input x")], meta={})
    two = build.build([result("a", 10, 10, None), result("b", 5, 5, None)], meta={})
    merged = build.merge([one, two], meta={})
    assert merged["summary"]["fuzz"] == {"asked": 25, "ran": 18, "stopped": {"a": "at the first failing input x"}}


@pytest.mark.oracle
def test_a_fuzz_run_that_stops_at_its_first_failure_says_so_on_the_verdict_line_and_the_page(tmp_path):
    """A GGUF without add_bos: every input differs under add_special, so the hunt fails at once."""
    done, _, _, report_dir = three_way(tmp_path, add_bos=False, texts=[], extra=("--fuzz", "20", "--seed", "1"))
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    [name] = report["summary"]["per_model"]
    fuzz = report["summary"]["fuzz"]
    assert fuzz["asked"] == 20 and 1 <= fuzz["ran"] < 20
    assert fuzz["stopped"][name].startswith("at the first failing input")
    verdict = next(line for line in done.stdout.splitlines() if "inputs ran" in line)
    assert verdict.startswith("differences found")
    assert f"fuzz: {fuzz['ran']} of 20 inputs ran (stopped early on {name}: at the first failing input" in verdict
    page = (report_dir / "report.html").read_text()
    assert f"{fuzz['ran']} of 20 inputs ran" in page
