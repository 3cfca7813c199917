"""An engine's known differences (`harness.compare.expected`): the file read strictly, a named finding moved
aside as known (not failing), and every entry reported known, fixed or not checked; without llama.cpp (the
command line is in tests/commands/test_run_selection.py).

The findings come from the real judge (`harness.compare.signature.sign`) on the toy vocabulary of
tests/report/test_differences.py: the tab bug and the digit split, each a signature of its own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.compare import expected as known
from harness.compare.result import ModelResult
from harness.report import build
from tests.report.test_differences import DIGITS, TAB, finding

FLAGS = ((False, False), (False, True), (True, False), (True, True))


def two_bugs() -> ModelResult:
    """Cases 1, 3 show the tab bug under every flag pair; cases 2, 4 the digit split; 5 and 6 agree."""
    r = ModelResult("toy", "bpe", cases=6)
    for case in (1, 2, 3, 4):
        pair, text = (TAB, "a\tb") if case % 2 else (DIGITS, "a048")
        for flags in FLAGS:
            r.add("mismatches", finding("toy", case, flags, pair, text))
    return r


def signature_of(r: ModelResult, case: str) -> str:
    return next(e["signature"] for e in r.mismatches if e["case_id"] == case)


def entries(*raw: dict) -> known.ExpectedDifferences:
    return known.ExpectedDifferences(known.parse(list(raw), where="f"), source="f")


def test_a_named_difference_is_known_not_failing_and_its_entry_says_so():
    r = two_bugs()
    tab = signature_of(r, "case-00001")
    listed = entries({"id": "tab", "signature": tab, "reason": "r", "upstream": "u"},
                     {"case": "case-00002", "add_special": True, "reason": "one flag pair of one case"},
                     {"case": "case-00006", "reason": "agrees now"}, {"case": "case-00009", "reason": "not run"})
    assert listed.unexpected_failing(r) == 2  # cases 2 and 4: case 2 only in part
    listed.sort_out(r, judged={f"case-{i:05d}" for i in range(1, 7)}, whole=True)
    assert r.failing == {"case-00002", "case-00004"} and r.known_difference_ids == {"case-00001", "case-00003"}
    assert len(r.known_differences) == 8 + 2 and len(r.mismatches) == 6
    assert {e["expected_difference"] for e in r.known_differences} == {"tab", "case case-00002"}
    assert all("got" not in e and e["command"] and e["signature"] for e in r.known_differences)  # no token rows
    assert r.expected == {"tab": {"status": "known", "findings": 8, "cases": 2},
                          "case case-00002": {"status": "known", "findings": 2, "cases": 1},
                          "case case-00006": {"status": "fixed", "findings": 0, "cases": 0},
                          "case case-00009": {"status": "not checked", "findings": 0, "cases": 0}}
    counts = r.counts()
    assert counts["known_differences"] == 10 and counts["known_difference_cases"] == 2


def test_only_known_differences_exit_0_and_the_report_lists_them_with_their_status():
    r = two_bugs()
    listed = entries({"signature": signature_of(r, "case-00001"), "reason": "tab"},
                     {"signature": signature_of(r, "case-00002"), "reason": "digits"},
                     {"signature": "d-000000000000", "reason": "gone", "model": ["toy*"]},
                     {"signature": "d-111111111111", "reason": "another model's", "model": "other"})
    listed.sort_out(r, judged=None, whole=True)
    report = build.build([r], meta={"expected_differences": listed.describe()})
    assert report["summary"]["failing_cases"] == 0 and report["summary"]["known_difference_cases"] == 4
    assert report["summary"]["checked"] == 2 and report["summary"]["passed"] == 2  # never counted as passed
    block = report["expected_differences"]
    assert (block["known"], block["fixed"], block["not checked"]) == (2, 1, 1)
    assert [row["status"] for row in block["entries"]] == ["known", "known", "fixed", "not checked"]
    from harness.compare.verdict import exit_status, word
    assert exit_status(report) == 0 and word(report).startswith("no new differences")
    assert "expected differences: 2 known (16 finding(s)), 1 fixed, 1 not checked" in build.one_line(report)
    lines = known.terminal_lines(report)
    assert lines == ["expected difference d-000000000000 no longer differs (fixed? remove it from f)",
                     "expected difference d-111111111111 not checked by this run"]
    assert 'id="expected-differences"' in build.render_html(report)


def test_a_signature_not_seen_in_part_of_a_model_is_not_fixed():
    r = two_bugs()
    listed = entries({"signature": "d-000000000000", "reason": "r"}, {"case": "case-00005", "reason": "r"})
    listed.sort_out(r, judged={"case-00001"}, whole=False)  # -k, --lf, --maxfail: part of the model's cases
    assert {k: v["status"] for k, v in r.expected.items()} == {"d-000000000000": "not checked",
                                                               "case case-00005": "not checked"}
    unloaded = ModelResult("toy", "bpe", not_checked="both refuse the file")
    listed.sort_out(unloaded, judged=None, whole=True)
    assert {v["status"] for v in unloaded.expected.values()} == {"not checked"}


def test_an_engine_that_cannot_load_can_be_a_known_difference():
    r = ModelResult("toy", "bpe", cases=3)
    r.add("engine_errors", {"case_id": "<load>", "text": "", "error": "UnsupportedVocab: no 'rwkv'",
                            "command": None})
    r.failing.update({"c1", "c2", "c3"})  # as `harness.runs.check.engine_unloaded` marks them
    listed = entries({"signature": known.signature_id("toy", "engine_errors", r.engine_errors[0]),
                      "reason": "this engine has no RWKV"})
    assert listed.unexpected_failing(r) == 3
    listed.sort_out(r, judged=None, whole=True)
    assert r.failing == set() and r.known_difference_ids == {"c1", "c2", "c3"} and not r.engine_errors


@pytest.mark.parametrize(("text", "says"), [
    ('[{"signature": "d-000000000000"}]', "entry 1: missing field 'reason'"),
    ('[{"reason": "r"}]', "entry 1: give a 'signature'"),
    ('[{"case": "c", "reason": "r", "flags": 1}]', "entry 1: unknown field 'flags'"),
    ('[{"case": "c", "reason": "r"}, {"case": "c", "reason": "s"}]', "entry 2: 'case c' is entry 1 already"),
    ('[{"signature": "d-xyz", "reason": "r"}]', "entry 1: field 'signature' 'd-xyz' is not a signature id"),
    ('[{"case": "c", "reason": "r", "add_special": "yes"}]', "entry 1: field 'add_special' must be true or false"),
    ('[{"case": "c", "reason": "r", "model": []}]', "entry 1: field 'model' must be"),
    ('[{"id": "x", "case": 3, "reason": "r"}]', "entry 1 (id 'x'): field 'case' must be a non-empty string"),
    ('[{"case": "c", "reason": " "}]', "field 'reason' must be a non-empty string"),
    ('[7]', "entry 1: must be a table/object"),
    ('{"differences": []}', "expected a list of entries"),
    ('{"a": ', "not JSON"),
    ("[" * 100 + "]" * 100, "nested deeper"),
])
def test_a_malformed_file_is_one_line_naming_the_entry(tmp_path, text, says):
    path = tmp_path / "expected.json"
    path.write_text(text)
    with pytest.raises(known.ExpectedDifferencesError) as caught:
        known.load(path)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_toml_and_json_read_alike_and_unreadable_files_are_one_line(tmp_path):
    toml = tmp_path / "e.toml"
    toml.write_text('[[difference]]\nsignature = "d-0123456789ab"\nmodel = "llama-*"\nreason = "why"\n'
                    'upstream = "https://example.org/1"\n\n[[difference]]\ncase = "edge-1"\nparse_special = false\n'
                    'reason = "r"\n')
    as_json = tmp_path / "e.json"
    as_json.write_text(json.dumps({"difference": [
        {"signature": "d-0123456789ab", "model": "llama-*", "reason": "why", "upstream": "https://example.org/1"},
        {"case": "edge-1", "parse_special": False, "reason": "r"}]}))
    assert known.load(toml).entries == known.load(as_json).entries
    (tmp_path / "bad.toml").write_text("[[difference]\n")
    with pytest.raises(known.ExpectedDifferencesError, match="not TOML"):
        known.load(tmp_path / "bad.toml")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(known.ExpectedDifferencesError, match="FIFO"):
        known.load(tmp_path / "fifo")
    with pytest.raises(known.ExpectedDifferencesError, match="No such file"):
        known.load(tmp_path / "absent.toml")


def test_the_cli_refuses_a_malformed_file_before_any_work(tmp_path, capsys):
    path = tmp_path / "e.json"
    path.write_text('[{"case": "c", "reason": "r", "upstrem": "x"}]')
    status = main(["run", "--model", "no-such-model-at-all", "--expected-differences", str(path),
                   "--report", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert status == 2 and "entry 1: unknown field 'upstrem'" in err and "Traceback" not in err
    assert not Path(tmp_path / "r").exists()


def test_shards_merge_their_statuses_known_anywhere_then_fixed_then_not_checked():
    """merge-reports of two parts judged with one list: a signature one part saw is known, an entry one part
    checked whole and did not see is fixed, and the block is there (it was dropped: issue 41's gap)."""
    seen, clean = two_bugs(), ModelResult("other", "bpe", cases=1)
    listed = entries({"signature": signature_of(seen, "case-00001"), "reason": "tab"},
                     {"signature": "d-000000000000", "reason": "gone"})
    listed.sort_out(seen, judged=None, whole=True)
    listed.sort_out(clean, judged={"x"}, whole=False)  # this part checked only some of its model's cases
    meta = {"expected_differences": listed.describe()}
    parts = [build.build([r], meta=meta) for r in (seen, clean)]
    merged = build.merge(parts, meta={"command": "merge-reports"})
    block = merged["expected_differences"]
    assert [row["status"] for row in block["entries"]] == ["known", "fixed"]
    assert block["entries"][0]["per_model"] == {"toy": "known", "other": "not checked"}
    assert block["entries"][0]["findings"] == 8


def test_parts_given_different_lists_are_refused():
    reports = []
    for name, reason in (("a", "tab"), ("b", "another")):
        r = two_bugs()
        listed = entries({"signature": signature_of(r, "case-00001"), "reason": reason})
        listed.sort_out(r, judged=None, whole=True)
        reports.append((name, build.build([r], meta={"expected_differences": listed.describe()})))
    with pytest.raises(ValueError, match="different --expected-differences lists"):
        build.merge([r for _, r in reports], meta={})
