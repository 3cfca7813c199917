"""`--baseline` and `diff A B`: an earlier run's differences carried in, checked again, sorted into new, fixed,
unchanged and not re-checked; a baseline that is not a report is one line and exit 2, before any work.

The reports here are built from findings of the real judge on a toy vocabulary (tests/report/test_differences.py);
the same on llama.cpp's ids, end to end, is tests/commands/test_run_baseline.py.
"""

from __future__ import annotations

import json
import os

import pytest

from harness.cli import main
from harness.compare.result import ModelResult
from harness.errors import EXIT_FOUND, EXIT_OK, SetupError
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN
from harness.report import baseline as sorting
from harness.report import build
from harness.runs.baseline import Baseline
from tests.report.test_differences import DIGITS, TAB, finding, result

FLAGS = ((False, False), (False, True), (True, False), (True, True))
OTHER = ([1, 7], [1, 2, 7])  # a third bug: a tab where llama.cpp has none


def write(tmp_path, name: str, results: list[ModelResult], **extra) -> dict:
    report = build.build(results, meta={"command": "python -m harness run", "llama_cpp_python": PIN})
    report.update(extra)
    build.write(report, tmp_path / name)
    return report


def only(model: str, *bugs: tuple[int, tuple, str]) -> ModelResult:
    """A run's result on `model` whose failing cases show `bugs`: (case number, pair, text) each."""
    r = ModelResult(model, "bpe", cases=10)
    for case, pair, text in bugs:
        for flags in FLAGS:
            r.add("mismatches", finding(model, case, flags, pair, text))
    return r


def test_new_fixed_unchanged_and_not_rechecked(tmp_path):
    before = write(tmp_path, "a", [result("toy", 6), result("gone", 2)])
    base = Baseline.read(tmp_path / "a")
    assert {r["id"] for r in base.records} == {r["id"] for r in before["differences"]}
    cases = base.carry("toy", [{"id": "mine", "text": "hello"}])
    assert {c["id"] for c in cases} == {"mine", "case-00001", "case-00000"}, "each representative carried once"
    assert base.carry("toy", cases) == cases, "an input the cases hold is not added again"

    after = only("toy", (9, DIGITS, "a048 again"), (3, OTHER, "ab"))  # the tab fixed, a new bug
    now = build.build([after], meta={})
    block = base.compare(now, [after])
    titles = {name: sorted(e["title"] for e in block[name]) for name in sorting.LISTS}
    assert titles == {"new": ["ids: bytes L / ⇥"], "fixed": ["ids: bytes ⇥ / ↵"],
                      "unchanged": ["ids: split N|N / engine only"],
                      "not_rechecked": ["ids: bytes ⇥ / ↵", "ids: split N|N / engine only"]}
    assert all("gone was not in this run" in e["why"] for e in block["not_rechecked"])
    [fixed] = block["fixed"]
    assert fixed["case_id"] == "case-00001" and len(fixed["input"]) == 64
    assert sorting.exit_status(block, EXIT_FOUND) == EXIT_FOUND, "a new difference fails the run"
    lines = sorting.lines(block)
    assert lines[0].endswith("new 1, fixed 1, unchanged 1, not re-checked 2")
    assert lines[1].startswith("  new ") and "python -m harness run --model toy --case case-00003" in lines[2]


def test_only_new_differences_fail_the_run(tmp_path):
    write(tmp_path, "a", [result("toy", 4)])
    base = Baseline.read(tmp_path / "a")
    base.carry("toy", [])
    same = only("toy", (7, TAB, "\t\t"), (8, DIGITS, "048"))
    block = base.compare(build.build([same], meta={}), [same])
    assert block["counts"] == {"new": 0, "fixed": 0, "unchanged": 2, "not_rechecked": 0}
    assert sorting.exit_status(block, EXIT_FOUND) == EXIT_OK
    assert sorting.exit_status(block, EXIT_FOUND, flakes=1) == EXIT_FOUND, "engine flakes still fail"
    assert sorting.exit_status(block, 2) == 2, "not checked stays not checked"


def test_a_case_not_compared_is_never_fixed(tmp_path):
    write(tmp_path, "a", [result("toy", 4)])
    clean = ModelResult("toy", "bpe", cases=10)
    cases_of = {}
    for why, change in (("known llama.cpp crash", lambda r, c: r.known_crash_ids.add(c)),
                        ("not applicable", lambda r, c: r.not_applicable.add(c)),
                        ("not compared", lambda r, c: r.add("engine_errors", {"case_id": c, "error": "boom"})),
                        ("another shard", None), ("not checked", lambda r, c: setattr(r, "not_checked", "x"))):
        base = Baseline.read(tmp_path / "a")
        cases_of = {c["id"] for c in base.carry("toy", [])}
        r = ModelResult("toy", "bpe", cases=10)
        for case_id in cases_of:
            if change is not None:
                change(r, case_id)
        if change is None:
            base.owns = lambda model, case_id: False
        block = base.compare(build.build([r], meta={}), [r])
        assert block["counts"]["fixed"] == 0 and block["counts"]["not_rechecked"] == 2, why
        assert all(why.split()[-1] in e["why"] for e in block["not_rechecked"]), (why, block["not_rechecked"])
    base = Baseline.read(tmp_path / "a")
    base.carry("toy", [])
    assert base.compare(build.build([clean], meta={}), [clean])["counts"]["fixed"] == 2, "the control: fixed"


def test_a_windowed_representative_needs_the_cases_file(tmp_path):
    report = write(tmp_path, "a", [result("toy", 2)])
    record = report["differences"][0]
    saved = json.loads((tmp_path / "a" / "report.json").read_text())
    for r in saved["differences"]:
        r["representative"]["text_window"] = [0, 3, 9000]
    (tmp_path / "a" / "report.json").write_text(json.dumps(saved))
    assert Baseline.read(tmp_path / "a").inputs == {}, "a window is not the whole input"
    case_id = record["representative"]["case_id"]
    (tmp_path / "a" / "cases").mkdir()
    (tmp_path / "a" / "cases" / "toy.jsonl").write_text(json.dumps({"id": case_id, "text": "x" * 9000}) + "\n")
    base = Baseline.read(tmp_path / "a")
    assert base.inputs[record["id"]] == {"id": case_id, "text": "x" * 9000}


def test_signatures_only_in_the_findings_file_are_compared_too(tmp_path):
    write(tmp_path, "a", [result("toy", 2)])
    folder = tmp_path / "a"
    extra = {"case_id": "far", "list": "mismatches", "signature": "d-0123456789ab"}
    with open(folder / "findings" / "toy.jsonl", "a") as out:
        out.write(json.dumps(extra) + "\n")
    (folder / "cases").mkdir()
    (folder / "cases" / "toy.jsonl").write_text(json.dumps({"id": "far", "text": "far away"}) + "\n")
    base = Baseline.read(folder)
    assert "d-0123456789ab" in {r["id"] for r in base.records}
    assert base.inputs["d-0123456789ab"]["text"] == "far away"
    late = ModelResult("toy", "bpe", cases=3)
    late.add("mismatches", {**finding("toy", 5, (True, True), TAB, "x"), "signature": "d-0123456789ab"})
    block = base.compare(build.build([late], meta={}), [late])
    assert "d-0123456789ab" in {e["id"] for e in block["unchanged"]}, "not new: the baseline had it, unlisted"


def test_diff_of_two_reports(tmp_path, capsys):
    write(tmp_path, "a", [result("toy", 4)])
    base = Baseline.read(tmp_path / "a")
    base.carry("toy", [])
    after = only("toy", (3, OTHER, "ab"))
    report = build.build([after], meta={"command": "python -m harness run", "llama_cpp_python": PIN})
    sorting.attach(report, base.compare(report, [after]))
    build.write(report, tmp_path / "b")
    write(tmp_path, "c", [only("toy", (3, OTHER, "ab"))])  # the same run, without --baseline

    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b" / "report.json")]) == EXIT_FOUND
    out = capsys.readouterr().out
    assert "new 1, fixed 2, unchanged 0, not re-checked 0" in out
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "c"), "--json"]) == EXIT_FOUND
    block = json.loads(capsys.readouterr().out)
    assert block["counts"] == {"new": 1, "fixed": 0, "unchanged": 0, "not_rechecked": 2}
    assert "not run with --baseline A" in block["not_rechecked"][0]["why"]
    assert main(["diff", str(tmp_path / "b"), str(tmp_path / "c")]) == EXIT_OK
    assert "new 0, fixed 0, unchanged 1" in capsys.readouterr().out


def test_the_run_marks_its_differences_new_or_unchanged(tmp_path):
    write(tmp_path, "a", [result("toy", 2)])
    base = Baseline.read(tmp_path / "a")
    after = only("toy", (3, OTHER, "ab"), (1, TAB, "\t"))
    report = build.build([after], meta={})
    sorting.attach(report, base.compare(report, [after]))
    assert sorted(r["baseline"] for r in report["differences"]) == ["new", "unchanged"]
    assert report["baseline"]["report"] == str((tmp_path / "a" / "report.json").absolute())


def _fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


BAD = {
    "a FIFO": (_fifo, "is a FIFO, not a report.json file"),
    "not JSON": (lambda p: _file(p, "report.json", "{"), "not JSON"),
    "a drift report": (lambda p: _file(p, "drift.json", json.dumps({"goldens": [], "summary": {}})),
                       "not a gguf-parity report.json"),
    "a selftest folder": (lambda p: _file(p / "folder", "selftest.json", "{}").parent, "cannot read"),
    "no such file": (lambda p: p / "missing.json", "cannot read"),
    "counts that disagree": (lambda p: _file(p, "report.json", json.dumps(
        {"version": 1, "meta": {}, "summary": {"per_model": {"m": {"cases": 1, "mismatches": 3}}},
         "mismatches": []})), "part whose counts disagree"),
    "a list": (lambda p: _file(p, "report.json", "[]"), "not an object"),
}


def _file(folder, name: str, text: str):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("command", ["run", "compare", "diff"])
def test_a_baseline_that_is_not_a_report_is_one_line_and_exit_2(kind, command, tmp_path, capsys):
    make, message = BAD[kind]
    path = make(tmp_path)
    argv = {"run": ["run", "--model", "llama-spm", "--baseline", str(path), "--report", str(tmp_path / "r")],
            "compare": ["compare", "--golden", str(tmp_path), "--baseline", str(path), "--report", str(tmp_path / "r")],
            "diff": ["diff", str(path), str(path)]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not (tmp_path / "r" / "report.json").exists(), "refused before any work"


def test_a_chat_baseline_must_hold_a_chat_check(tmp_path, capsys):
    write(tmp_path, "a", [result("toy", 1)])
    assert main(["chat", "--target", "phi-3", "--baseline", str(tmp_path / "a")]) == 2
    assert "holds no chat check" in capsys.readouterr().err


def test_hostile_model_names_are_not_paths(tmp_path):
    report = write(tmp_path, "a", [result("toy", 1)])
    saved = json.loads((tmp_path / "a" / "report.json").read_text())
    saved["summary"]["per_model"]["../../evil"] = saved["summary"]["per_model"].pop("toy")
    for kind in ("mismatches",):
        for entry in saved[kind]:
            entry["model"] = "../../evil"
    for record in saved["differences"]:
        record["model"] = "../../evil"
    (tmp_path / "a" / "report.json").write_text(json.dumps(saved))
    (tmp_path / "evil.jsonl").write_text("not json\n")  # would be read through ../../evil.jsonl
    base = Baseline.read(tmp_path / "a")
    assert {r["id"] for r in base.records} == {r["id"] for r in report["differences"]}


def test_a_findings_file_over_its_bound_is_one_line(tmp_path, monkeypatch):
    from harness.runs import baseline as module
    write(tmp_path, "a", [result("toy", 2)])
    monkeypatch.setattr(module, "MAX_LINE", 10)
    with pytest.raises(SetupError, match="line is over the limit"):
        Baseline.read(tmp_path / "a")


@pytest.mark.parametrize("block", [{"fixed": 5}, {"fixed": "d-0123"}, {"fixed": [3, None, {"id": 4}]}, []])
def test_a_hostile_baseline_block_is_data(tmp_path, capsys, block):
    write(tmp_path, "a", [result("toy", 1)])
    write(tmp_path, "b", [result("toy", 1)], baseline=block)
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == EXIT_OK
    assert "new 0, fixed 0, unchanged 1" in capsys.readouterr().out


def test_compare_adds_no_case_and_rechecks_only_what_the_goldens_hold(tmp_path):
    write(tmp_path, "a", [result("toy", 4)])
    base = Baseline.read(tmp_path / "a")
    tab = next(r for r in base.records if "⇥" in r["title"])
    golden = [{"id": "g-1", "text": base.inputs[tab["id"]]["text"], "encode": []}, {"id": "g-2", "text": "zzz"}]
    before = list(golden)
    base.note("toy", golden)
    assert golden == before, "a golden replay's cases are llama.cpp's recorded ones: none added"
    clean = ModelResult("toy", "bpe", cases=2)
    block = base.compare(build.build([clean], meta={}), [clean])
    assert [(e["title"], e["case_id"]) for e in block["fixed"]] == [(tab["title"], "g-1")]
    assert [e["why"] for e in block["not_rechecked"]] == ["its input was not among this run's cases"]


def test_a_taken_id_is_renamed_and_counted_once(tmp_path):
    write(tmp_path, "a", [result("toy", 2)])
    base = Baseline.read(tmp_path / "a")
    taken = [{"id": "case-00001", "text": "other"}, {"id": "baseline:case-00001", "text": "another"}]
    cases = base.carry("toy", taken)
    assert [c["id"] for c in cases[2:]] == ["baseline:baseline:case-00001", "case-00000"]
    assert len({c["id"] for c in cases}) == len(cases)
    base.carry("toy", taken)  # gathered again (a shard's plan, then its check): the same cases, counted once
    assert base.compare(build.build([], meta={}), [])["carried"] == 2
