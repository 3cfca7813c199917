"""The fuzzer spends its whole budget: the first input of each new difference is shrunk, the rest are counted.

`run --fuzz N` generates N distinct inputs whatever it finds (harness/inputs/fuzz.py `hunt`); the
first input of each new signature is shrunk by Hypothesis, printed as a falsifying example and saved
as a found case, every other failing input counted under its signature. `summary.fuzz`
(harness/report/fuzz_summary.py) carries asked, ran, the distinct differences and the seed, and the
one-line verdict (also the page's first line) shows them. An unseeded run draws its seed, prints it
and records it: `--seed N` then generates the same inputs.
"""

from __future__ import annotations

import json
import re

import pytest

from harness.cli import main
from harness.compare.result import ModelResult
from harness.report import build
from tests import reference_files as rf
from tests.runs.test_third_side import three_way

TWO_BUGS = {"ids: bytes ⇥ / ↵", "ids: bytes | / !"}  # tests/broken_engine.py:load_two_bugs


def result(name: str, asked: int, ran: int, stopped: str | None, differences: int = 0, seed: int | None = 0):
    r = ModelResult(model=name, family="bpe", cases=ran)
    r.fuzz = {"asked": asked, "ran": ran, "stopped": stopped, "differences": differences, "seed": seed}
    return r


def test_the_verdict_line_says_how_many_inputs_ran_and_how_many_differences_they_showed():
    report = build.build([result("a", 200, 200, None, 2), result("b", 200, 150, "Hypothesis stopped: x", 1)],
                         meta={})
    assert report["summary"]["fuzz"] == {"asked": 400, "ran": 350, "differences": 3, "seeds": [0],
                                         "stopped": {"b": "Hypothesis stopped: x"}}
    line = build.one_line(report)
    assert "fuzz: 350 of 400 inputs ran, 3 distinct differences (seed 0) (stopped early on b: Hypothesis" in line
    assert "350 of 400 inputs ran, 3 distinct" in build.render_html(report).split('id="verdict">', 1)[1]
    clean = build.build([result("a", 20, 20, None, 0, 7)], meta={})
    assert "fuzz: 20 of 20 inputs ran, 0 distinct differences (seed 7)" in build.one_line(clean)
    unfuzzed = build.build([ModelResult(model="a", family="bpe", cases=3)], meta={})
    assert "fuzz" not in unfuzzed["summary"] and "fuzz:" not in build.one_line(unfuzzed)


def test_merged_reports_add_the_fuzz_counts_up():
    one = build.build([result("a", 10, 3, "Hypothesis stopped: x", 1)], meta={})
    two = build.build([result("a", 10, 10, None, 2), result("b", 5, 5, None, 0, 4)], meta={})
    merged = build.merge([one, two], meta={})
    assert merged["summary"]["fuzz"] == {"asked": 25, "ran": 18, "differences": 3, "seeds": [0, 4],
                                         "stopped": {"a": "Hypothesis stopped: x"}}


# --- live: a planted engine with two independent bugs, on a tiny byte-level BPE vocabulary ---------

def _tiny_gguf(tmp_path):
    pytest.importorskip("tokenizers")
    return rf.bpe_gguf(rf.bpe_json(tmp_path / "o" / "tokenizer.json"), tmp_path / "tiny.gguf")


def _fuzz_two_bugs(tmp_path, capsys, name: str, *extra: str) -> tuple[int, dict, list[dict], str, str]:
    """`run --fuzz 20` of load_two_bugs on the tiny vocabulary: status, report, found cases, stdout, stderr."""
    report = tmp_path / name
    status = main(["run", "--model", str(_tiny_gguf(tmp_path)), "--no-default-corpora", "--fuzz", "20",
                   "--engine", "tests.broken_engine:load_two_bugs", "--report", str(report), "--no-messages",
                   "--long-docs", "0", "--calls", "0", *extra])
    found = [json.loads(line) for line in (report / "found" / "tiny.jsonl").read_text().splitlines()]
    out, err = capsys.readouterr()
    return status, json.loads((report / "report.json").read_text()), found, out, err


@pytest.mark.oracle
def test_the_fuzzer_runs_its_whole_budget_and_shrinks_each_planted_bug_once(tmp_path, capsys, monkeypatch):
    """Unseeded: the drawn seed is printed and recorded; each bug found, shrunk and printed once, its other
    inputs counted; the example database holds them. Then `--seed 4` generates the same inputs."""
    monkeypatch.setenv("GGUF_PARITY_HYPOTHESIS_DB", str(tmp_path / "db"))
    monkeypatch.setattr("harness.runs.config.draw_seed", lambda: 4)
    status, report, found, out, err = _fuzz_two_bugs(tmp_path, capsys, "drawn")
    assert status == 1
    fuzz = report["summary"]["fuzz"]
    assert fuzz["asked"] == fuzz["ran"] == 20 and fuzz["seeds"] == [4] and report["meta"]["seed"] == 4
    assert "tiny: fuzz seed 4 (drawn; --seed 4 generates the same inputs)" in err
    mine = {d["title"]: d for d in report["differences"] if d["fuzz"]}
    assert set(mine) >= TWO_BUGS and fuzz["differences"] == len(mine)
    for title in TWO_BUGS:
        assert err.count(f"    {title} [") == 1  # one falsifying example per difference
        assert mine[title]["cases"] >= 2  # the first input, its shrunk one, and any others: counted
    assert len(found) == len(mine) and {c["id"] for c in found} <= {d["representative"]["case_id"]
                                                                  for d in mine.values()}
    assert any((tmp_path / "db").iterdir())  # the failures went into the example database
    assert re.search(r"fuzz: 20 of 20 inputs ran, \d+ distinct differences \(seed 4\)", out)

    again = _fuzz_two_bugs(tmp_path, capsys, "seeded", "--seed", "4", "--quiet")
    assert again[0] == 1 and again[4] == ""
    assert _failing_inputs(tmp_path / "seeded") == _failing_inputs(tmp_path / "drawn")
    assert {d["id"] for d in again[1]["differences"]} == {d["id"] for d in report["differences"]}


def _failing_inputs(report) -> list[tuple[str, str]]:
    return sorted({(line["case_id"], line["signature"]) for path in (report / "findings").iterdir()
                   for line in map(json.loads, path.read_text().splitlines())})


@pytest.mark.oracle
def test_a_difference_every_input_shows_is_found_once_and_the_budget_still_runs(tmp_path):
    """A GGUF without add_bos: every input differs from the original under add_special. The hunt used to
    stop at its first input; now all 20 run, and the one difference is one entry."""
    done, _, _, report_dir = three_way(tmp_path, add_bos=False, texts=[], extra=("--fuzz", "20", "--seed", "1"))
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    [name] = report["summary"]["per_model"]
    fuzz = report["summary"]["fuzz"]
    assert fuzz["asked"] == fuzz["ran"] == 20 and not fuzz["stopped"] and fuzz["differences"] >= 1
    record = max(report["differences"], key=lambda d: d["cases"])
    assert record["fuzz"] and record["cases"] >= 10  # counted under one signature, not one entry each
    verdict = next(line for line in done.stdout.splitlines() if "inputs ran" in line)
    assert f"fuzz: 20 of 20 inputs ran, {fuzz['differences']} distinct difference" in verdict
    assert name in report["summary"]["per_model"]
