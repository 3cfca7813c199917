"""A run's findings grouped by signature, and a report.json that stays small at any number of findings.

The findings here are made by the real judge (`harness.compare.signature.sign`) on a toy vocabulary; the
same properties on llama.cpp's ids are in tests/runs/test_differences.py.
"""

from __future__ import annotations

import json

from harness.cli import main
from harness.compare.diff import TokenTable
from harness.compare.result import ModelResult
from harness.compare.signature import sign
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN
from harness.report import build, differences

PIECES = [b"<s>", b"a", b"\t", b"\n", b"048", b"04", b"8", b"b"]
TABLE = TokenTable(texts=PIECES, pieces=PIECES, attrs=[0] * len(PIECES), edge_ids=frozenset({0}))
TAB, DIGITS = ([1, 2, 7], [1, 3, 7]), ([1, 4], [1, 5, 6])   # (llama.cpp, engine): a wrong id, a split


def finding(model: str, case: int, flags: tuple[bool, bool], pair: tuple[list[int], list[int]], text: str) -> dict:
    entry = {"case_id": f"case-{case:05d}", "text": text, "add_special": flags[0], "parse_special": flags[1],
             "expected": pair[0], "got": pair[1], "first_diff": 1, "category": "merge order",
             "command": f"python -m harness run --model {model} --case case-{case:05d}"}
    return sign(model, "mismatches", entry, TABLE)


def result(model: str, cases: int) -> ModelResult:
    """`cases` failing cases, each under the four flag pairs: odd ones the tab bug, even ones the digit split."""
    r = ModelResult(model, "bpe", cases=cases + 5)
    for case in range(cases):
        pair, text = (TAB, "a\tb" + " x" * (case % 50)) if case % 2 else (DIGITS, "a048" + " y" * (case % 40))
        for flags in ((False, False), (False, True), (True, False), (True, True)):
            r.add("mismatches", finding(model, case, flags, pair, text))
    return r


def test_one_record_per_signature_with_its_cases_flags_and_shortest_input():
    report = build.build([result("toy", 40)], meta={})
    records = report["differences"]
    assert [(r["cases"], r["findings"]) for r in records] == [(20, 80), (20, 80)]
    assert {r["title"] for r in records} == {"ids: bytes ⇥ / ↵", "ids: split N|N / engine only"}
    assert all(len(r["flags"]) == 4 and r["kind"] in ("different bytes", "split differently") for r in records)
    shortest = {r["title"]: r["representative"]["text"] for r in records}
    assert shortest == {"ids: bytes ⇥ / ↵": "a\tb x", "ids: split N|N / engine only": "a048"}
    assert report["summary"]["differences"] == 2 and report["summary"]["per_model"]["toy"]["differences"] == 2
    assert "(2 distinct differences)" in build.one_line(report)


def test_ten_thousand_failing_cases_make_a_small_report_and_keep_every_finding(tmp_path):
    report = build.build([result("toy", 10_000)], meta={})
    json_path, html_path = build.write(report, tmp_path)
    kept = json.loads(json_path.read_text())
    assert json_path.stat().st_size < 1_000_000 and html_path.stat().st_size < 1_000_000
    assert len(kept["mismatches"]) == differences.LIST_CAP
    assert kept["summary"]["per_model"]["toy"]["listed"] == {"mismatches": differences.LIST_CAP}
    assert kept["summary"]["mismatches"] == 40_000 and kept["summary"]["failing_cases"] == 10_000
    lines = (tmp_path / "findings" / "toy.jsonl").read_text().splitlines()
    assert len(lines) == 40_000 and {json.loads(line)["signature"] for line in lines} == {
        r["id"] for r in kept["differences"]}
    firsts = {m["signature"] for m in kept["mismatches"][:2]}
    assert len(firsts) == 2  # each signature's representative listed first


def test_merge_reports_folds_cut_parts_by_signature(tmp_path, capsys):
    for name, model in (("a", "toy"), ("b", "toy2")):
        build.write(build.build([result(model, 500)], meta={"command": "run", "llama_cpp_python": PIN}),
                    tmp_path / name)
    status = main(["merge-reports", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")])
    merged = json.loads((tmp_path / "m" / "report.json").read_text())
    assert status == 1, capsys.readouterr().err
    assert merged["summary"]["differences"] == 4 and merged["summary"]["mismatches"] == 4_000
    assert {r["model"] for r in merged["differences"]} == {"toy", "toy2"}


def test_the_terminal_lists_each_difference_with_its_reproduce_line():
    lines = differences.terminal_lines(build.build([result("toy", 6)], meta={}))
    assert lines[0] == "2 distinct difference(s):"
    assert sum("python -m harness run --model toy --case" in line for line in lines) == 2


def test_a_second_report_in_the_folder_leaves_no_stale_findings_file(tmp_path):
    build.write(build.build([result("toy", 4), result("toy2", 4)], meta={}), tmp_path)
    build.write(build.build([result("toy", 4), ModelResult("toy2", "bpe", cases=3)], meta={}), tmp_path)
    assert sorted(p.name for p in (tmp_path / "findings").iterdir()) == ["toy.jsonl"]
