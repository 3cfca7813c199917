"""Which cases a run checks, the pytest way (`harness.runs.selection`): `-k`, `--lf`/`--ff` from the last
report, `-x`/`--maxfail`'s tally; without llama.cpp (the command line is tests/commands/test_run_selection.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.compare import verdict
from harness.errors import SetupError
from harness.files import jsonl
from harness.runs.config import RunConfig
from harness.runs.selection import (
    MAX_DEPTH,
    LastRun,
    Tally,
    choose,
    first_failed,
    keyword_matcher,
    keyword_names,
    read_last_run,
    wanted,
)

IDS = ["edge-tab-01", "edge-nel-02", "prose-01", "inp-000", "fuzz-TAB"]


@pytest.mark.parametrize(("expression", "chosen"), [
    ("tab", ["edge-tab-01", "fuzz-TAB"]),                    # a substring, ignoring case
    ("edge and not tab", ["edge-nel-02"]),
    ("prose or inp", ["prose-01", "inp-000"]),
    ("not (edge or fuzz)", ["prose-01", "inp-000"]),
    ("edge and (tab or nel) and not 02", ["edge-tab-01"]),
    ("not not prose", ["prose-01"]),
    ("tab or nel and 99", ["edge-tab-01", "fuzz-TAB"]),       # and binds tighter: tab or (nel and 99)
    ("(tab or nel) and 02", ["edge-nel-02"]),
    ("", IDS),                                                # pytest: empty selects everything
    ("llama-spm", IDS),                                       # the model's name matches its every case
    ("llama-spm and nel", ["edge-nel-02"]),
])
def test_k_selects_as_pytest_does(expression, chosen):
    match = keyword_matcher(expression)
    assert [i for i in IDS if match(keyword_names("llama-spm", i))] == chosen


@pytest.mark.parametrize(("expression", "says"), [
    ("tab and", "ends where a word was expected"),
    ("(tab", "'(' is not closed"),
    ("tab)", "unexpected ')'"),
    ("and tab", "'and' where a word was expected"),
    ("tab tab", "unexpected 'tab'"),
    ("not", "ends where a word was expected"),
    ("(" * (MAX_DEPTH + 1) + "x" + ")" * (MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH}"),
    ("not " * 10_000 + "x", "over the limit"),
])
def test_a_bad_k_expression_is_one_line(expression, says):
    with pytest.raises(SetupError, match=r"^-k[ :]") as caught:
        keyword_matcher(expression)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def last_report(folder: Path, per_model: dict, findings: dict[str, list[dict]], cases: dict[str, list[dict]],
                **lists: list[dict]) -> Path:
    """A report folder as `run` writes it: report.json, findings/<model>.jsonl, cases/<model>.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps({"version": 1, "meta": {}, "summary": {"per_model": per_model},
                                                    **lists}))
    for model, lines in findings.items():
        jsonl.write(folder / "findings" / f"{model}.jsonl", lines)
    for model, records in cases.items():
        jsonl.write(folder / "cases" / f"{model}.jsonl", records)
    return folder


def test_the_last_report_gives_every_failing_case_and_the_models_that_failed_whole(tmp_path):
    folder = last_report(tmp_path / "r", {"a": {"cases": 9, "mismatches": 3}, "b": {"cases": 3, "vocab_mismatches": 1},
                                          "c": {"cases": 0, "not_checked": "x"}, "d": {"cases": 4, "engine_errors": 1},
                                          "../../etc": {"cases": 1, "mismatches": 1}},
                         {"a": [{"case_id": "edge-1", "list": "mismatches"},
                                {"case_id": "fuzz-9", "list": "mismatches"},
                                {"case_id": "edge-1", "list": "mismatches"}],
                          "b": [{"case_id": None, "list": "vocab_mismatches"}],
                          "d": [{"case_id": "<load>", "list": "engine_errors"}]},
                         {"a": [{"id": "edge-1", "text": "x\ty"}, {"id": "fuzz-9", "text": "\t"}]})
    last = read_last_run(folder)
    assert last is not None
    assert last.failed["a"] == {"edge-1", "fuzz-9"} and last.whole == {"b", "c", "d"}
    assert last.models == {"a", "b", "c", "d"}  # a model name that would leave the folder is not followed
    assert last.inputs["a"]["fuzz-9"] == {"id": "fuzz-9", "text": "\t"}


def test_no_report_is_no_last_run_and_a_broken_one_is_one_line(tmp_path):
    assert read_last_run(tmp_path) is None
    (tmp_path / "report.json").write_text("{not json")
    with pytest.raises(SetupError, match=r"cannot read .*report\.json"):
        read_last_run(tmp_path)
    (tmp_path / "report.json").write_text(json.dumps({"summary": {"per_model": []}}))
    with pytest.raises(SetupError, match="not a gguf-parity report"):
        read_last_run(tmp_path)
    (tmp_path / "report.json").unlink()
    os.mkfifo(tmp_path / "report.json")  # would block a plain open
    with pytest.raises(SetupError, match="FIFO"):
        read_last_run(tmp_path)


def test_a_findings_file_an_earlier_run_left_is_not_read_as_the_last_run(tmp_path):
    """The report folder of a run that found nothing on `a` still holds the findings file of an earlier run."""
    stale = [{"case_id": "edge-1", "list": "mismatches"}]
    folder = last_report(tmp_path / "r", {"a": {"cases": 9, "mismatches": 0}, "b": {"cases": 9, "mismatches": 2}},
                         {"a": stale, "b": stale}, {},
                         mismatches=[{"model": "b", "case_id": "edge-2"}, {"model": "b", "case_id": "edge-3"}])
    last = read_last_run(folder)
    assert last is not None and last.models == {"b"}  # b: the file is not its two findings, the lists are used
    assert last.failed == {"a": frozenset(), "b": frozenset({"edge-2", "edge-3"})}


def test_a_findings_file_that_is_not_json_lines_is_one_line(tmp_path):
    folder = last_report(tmp_path / "r", {"a": {"cases": 1, "mismatches": 1}}, {}, {})
    (folder / "findings").mkdir()
    (folder / "findings" / "a.jsonl").write_text("{\n")
    with pytest.raises(SetupError, match=r"--lf/--ff: .*a.jsonl:1"):
        read_last_run(folder)


CASES = [{"id": i, "text": i} for i in ("c1", "c2", "c3", "c4")]


def config(**fields) -> RunConfig:
    return RunConfig(models=("m",), report_dir=Path("/nonexistent"), **fields)


def test_lf_checks_the_failures_with_inputs_no_corpus_holds_and_ff_puts_them_first():
    last = LastRun(Path("r"), failed={"m": frozenset({"c3", "fuzz-1"})}, inputs={"m": {"fuzz-1": {"id": "fuzz-1",
                                                                                                  "text": "\t"}}})
    assert [c["id"] for c in choose(CASES, "m", config(last_failed=last))] == ["c3", "fuzz-1"]
    assert [c["id"] for c in choose(CASES, "m", config(last_failed=last), extra=False)] == ["c3"]  # a golden
    firsts = choose(CASES, "m", config(last_failed=last, failed_first=True))
    assert [c["id"] for c in firsts] == ["c3", "fuzz-1", "c1", "c2", "c4"]
    assert [c["id"] for c in choose(CASES, "m", config(last_failed=last, keyword="not fuzz"))] == ["c3"]


def test_lf_leaves_out_a_model_that_did_not_fail_and_checks_everything_when_nothing_failed():
    last = LastRun(Path("r"), failed={"m": frozenset({"c2"}), "n": frozenset()}, whole=frozenset({"w"}))
    assert wanted("n", config(last_failed=last)) is not None and wanted("m", config(last_failed=last)) is None
    assert wanted("w", config(last_failed=last)) is None
    assert [c["id"] for c in choose(CASES, "w", config(last_failed=last))] == ["c1", "c2", "c3", "c4"]  # whole
    assert wanted("n", config(last_failed=last, failed_first=True)) is None  # --ff leaves nothing out
    nothing = LastRun(Path("r"), failed={"m": frozenset()})
    assert choose(CASES, "m", config(last_failed=nothing)) == CASES and wanted("n", config(last_failed=nothing)) is None
    ordered = first_failed(["n", "w", "m"], str, config(last_failed=last, failed_first=True))
    assert ordered == ["w", "m", "n"]


def test_case_ids_must_exist():
    with pytest.raises(SetupError, match="no case with id 'zz'"):
        choose(CASES, "m", config(case_ids=("c1", "zz")))


def test_a_stopped_run_names_what_it_did_not_check():
    tally = Tally(limit=2, asked={"maxfail": 2})
    tally.count("a", 1)
    assert not tally.reached
    tally.count("a", 2)
    tally.left["a"] = ["c5", "c6", "c7"]
    tally.phases["a"] = ["fuzz"]
    tally.not_started.append("b")
    assert tally.reached and tally.stopped
    described = tally.describe()
    assert described["stopped"] == {"maxfail": 2, "failing_cases": 2, "cases_not_checked": {"a": 3},
                                    "phases_not_run": {"a": ["fuzz"]}, "models_not_started": ["b"]}
    line = verdict.selection_line({"meta": {"selection": described}})
    assert line == ("; selected: stopped after 2 failing case(s) (--maxfail 2): 3 case(s) not checked, "
                    "1 model(s) not started, the later phases of 1 model(s) not run")
    assert verdict.selection_line({"meta": {}}) == ""
