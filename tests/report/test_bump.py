"""The change report of a pin bump (harness/report/bump.py): per vocabulary what changed, the differences
with both sides, the steps with their times; exit 1 for a change, 2 for a failed step, 0 for none."""

from __future__ import annotations

import json
from pathlib import Path

from harness.report import bump

STEPS = [{"step": "build", "command": "b", "exit_code": 0, "seconds": 300.0, "tail": ""},
         {"step": "goldens", "command": "g", "exit_code": 0, "seconds": 200.5, "tail": ""}]
DIFFERENCE = {"id": "d-0123456789ab", "title": "ids: bytes ⇥ / ↵", "model": "toy", "cases": 3,
              "input": {"case_id": "c", "text": "x\ty", "bytes": None},
              "flag_pair": {"add_special": False, "parse_special": True},
              "pinned": {"ids": {"from": 0, "ids": [1, 2], "of": 2}, "piece": "⇥"},
              "other": {"ids": {"from": 0, "ids": [1, 3], "of": 2}, "piece": "↵"}}


def trees(tmp_path: Path) -> tuple[Path, Path, Path]:
    old, new, builds_dir = tmp_path / "old", tmp_path / "new", tmp_path / "builds"
    for root, digests in ((old, ["1:a", "1:b", "1:c"]), (new, ["1:a", "1:x", "1:c"])):
        (root / "golden" / "code-points").mkdir(parents=True)
        (root / "golden" / "code-points" / "toy.json").write_text(json.dumps({"digests": digests,
                                                                              "llama_cpp_python": root.name}))
    builds_dir.mkdir()
    (builds_dir / "builds.json").write_text(json.dumps({
        "verdict": "1 difference(s)", "counts": {"differences": 1}, "builds": {},
        "vocabularies": [{"model": "toy", "differences": 1, "not_answered": 0}], "differences": [DIFFERENCE],
        "chat": {"status": "not compared", "why": "-"}}))
    return old, new, builds_dir


def test_each_vocabulary_gets_its_golden_code_point_and_difference_counts(tmp_path):
    old, new, builds_dir = trees(tmp_path)
    files = [{"path": "golden/ggml-vocab-toy.json", "added": 4, "removed": 4},
             {"path": "golden/code-points/toy.json", "added": 1, "removed": 1},
             {"path": "golden/chat/tmpl-x.json", "added": 2, "removed": 2},
             {"path": "harness/data/pin.txt", "added": 1, "removed": 1}]
    points = bump.code_point_changes(old, new)
    assert points == {"toy": {"calls": 3, "changed": 1, "recorded": ["old", "new"]}}
    changes = {"golden/ggml-vocab-toy.json": {"cases": 9, "cases_changed": 2, "cases_gone": 0, "header_changed": 0},
               "golden/chat/tmpl-x.json": {"cases": 4, "cases_changed": 1, "cases_gone": 0, "header_changed": 0}}
    data = bump.report(bump={"from": "1.0.0", "to": "1.0.1", "work_tree": str(new), "checkout": str(old)},
                       steps=STEPS, files=files, points=points, builds_dir=builds_dir, changes=changes)
    assert data["vocabularies"] == [{"vocabulary": "toy", "golden_added": 4, "golden_removed": 4,
                                     "cases_changed": "2/9", "header_changed": 0, "code_point_calls_changed": "1/3",
                                     "differences": 1, "not_answered": 0}]
    assert data["seconds"] == 500.5 and bump.exit_status(data) == 1
    json_path, md_path = bump.write(data, tmp_path)
    page = md_path.read_text(encoding="utf-8")
    assert "| toy | +4 -4 | 2/9 | 0 | 1/3 | 1 | 0 |" in page and "`golden/chat/tmpl-x.json`: 1/4 cases" in page
    assert "d-0123456789ab" in page and "pinned 1 2 `⇥`, new 1 3 `↵`" in page and "| goldens | 0 | 200.5 |" in page
    assert json.loads(json_path.read_text(encoding="utf-8"))["kind"] == bump.KIND


def test_nothing_changed_is_0_and_a_failed_step_is_2(tmp_path):
    old, new, builds_dir = trees(tmp_path)
    (builds_dir / "builds.json").write_text(json.dumps({"counts": {}, "vocabularies": []}))
    same = {"from": "1", "to": "2", "work_tree": str(new), "checkout": str(old)}
    data = bump.report(bump=same, steps=STEPS, files=[{"path": "harness/data/pin.txt", "added": 1, "removed": 1}],
                       points={}, builds_dir=builds_dir)
    assert bump.exit_status(data) == 0
    failed = [*STEPS, {"step": "chat helper", "command": "c", "exit_code": 2, "seconds": 1, "tail": "no g++"}]
    data = bump.report(bump=same, steps=failed, files=[], points={}, builds_dir=builds_dir)
    assert bump.exit_status(data) == 2 and "no g++" in bump.markdown(data)


def test_a_goldens_change_is_counted_in_cases_not_in_its_recording_builds_lines():
    old = '{\n "llama": {\n  "ggml_commit": "a",\n  "llama_cpp_python": "1"\n },\n "vocab": 1,\n "cases": [\n' \
          '{"id": 1},\n{"id": 2},\n{"id": 3}\n]}\n'
    new = old.replace('"a"', '"b"').replace('"1"\n', '"2"\n').replace('{"id": 2}', '{"id": 2, "x": 1}')
    assert bump.recorded_changes(old, new) == {"cases": 3, "cases_changed": 1, "cases_gone": 0, "header_changed": 0}
    assert bump.recorded_changes(old, new.replace('"vocab": 1', '"vocab": 2'))["header_changed"] == 2
