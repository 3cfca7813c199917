"""builds.json from the steps' reports (harness/report/builds.py): what differs, what was not answered.

A difference between the builds is one the other build answered otherwise; an error by which it says it
cannot answer exactly (node-llama-cpp's `NotExact`) is "not answered", neither agreeing nor differing;
a step that gave no verdict is named and makes the exit status 2 when nothing differs.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.report import builds

BUILDS = {"pinned": {"description": "pinned build"}, "other": {"description": "other build"}}


def difference(list_name: str, **rep) -> dict:
    return {"id": f"d-{list_name[:6]:0<12}", "title": "t", "model": "toy", "list": list_name, "kind": "k",
            "cases": 1, "findings": 1, "flags": {}, "case_ids": ["c"], "reproduce": "python -m harness run ...",
            "representative": {"case_id": "c", "text": "a\tb", "bytes": None, "add_special": False,
                               "parse_special": True, **rep}}


def steps_with(tmp_path: Path, differences: list[dict], *, live_exit: int = 1) -> dict:
    report = {"summary": {"per_model": {"toy": {"cases": 2, "capabilities": {}}}}, "differences": differences,
              "meta": {}}
    (tmp_path / "live" / "main").mkdir(parents=True)
    for folder in (tmp_path, tmp_path / "live" / "main"):
        (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    return {"builds": BUILDS, "code_points": {"vocabularies": []}, "parts": [str(tmp_path / "live" / "main")],
            "live": [{"part": "main", "exit_code": live_exit}], "merge": {"exit_code": 0}}


def test_a_not_exact_answer_is_not_answered_and_a_mismatch_differs(tmp_path):
    found = [difference("engine_errors", error="NotExact: detokenize (...): holds U+FFFD", capability="detokenize"),
             difference("mismatches", expected=[1, 2, 3], got=[1, 4, 3], first_diff=1, expected_piece="⇥",
                        got_piece="↵")]
    data = builds.summary(against="x", report=tmp_path, steps=steps_with(tmp_path, found),
                          chat={"status": "not compared", "why": "no chat goldens"})
    [differs], [unanswered] = data["differences"], data["not_answered"]
    assert differs["pinned"] == {"ids": {"from": 0, "ids": [1, 2, 3], "of": 3}, "piece": "⇥"}
    assert differs["other"]["ids"]["ids"] == [1, 4, 3] and differs["builds"] == {"pinned": "pinned build",
                                                                                   "other": "other build"}
    assert unanswered["other"]["error"].startswith("NotExact") and not unanswered["answered"]
    assert data["vocabularies"][0]["differences"] == 1 and data["vocabularies"][0]["not_answered"] == 1
    assert builds.exit_status(data) == 1
    builds.write(data, tmp_path)
    assert differs["id"] in (tmp_path / builds.PAGE).read_text(encoding="utf-8")


def test_only_not_answered_exits_0_and_a_step_without_verdict_2(tmp_path):
    found = [difference("engine_errors", error="NotExact: x")]
    data = builds.summary(against="x", report=tmp_path, steps=steps_with(tmp_path, found),
                          chat={"status": "not compared", "why": "no chat goldens"})
    assert builds.exit_status(data) == 0 and "1 not answered exactly" in data["verdict"]
    data = builds.summary(against="x", report=tmp_path, steps={**steps_with(tmp_path / "b", found),
                                                               "live": [{"part": "main", "exit_code": 2}]},
                          chat={"status": "not compared", "why": "no chat goldens"})
    assert builds.exit_status(data) == 2 and "live/main" in data["verdict"]


def test_an_engine_error_that_is_not_not_exact_is_a_difference(tmp_path):
    found = [difference("engine_errors", error="EngineProcess: the child died (SIGSEGV)")]
    data = builds.summary(against="x", report=tmp_path, steps=steps_with(tmp_path, found),
                          chat={"status": "not compared", "why": "-"})
    assert len(data["differences"]) == 1 and builds.exit_status(data) == 1
