"""Every report's `meta` says what ran, on what, where, when and for how long (harness/runs/meta.py): the
project's commit and dirty state (or why there is none), llama.cpp's build, the date, the duration, the seed,
the host. A `run` report's meta is checked end to end in tests/commands/test_run_baseline.py."""

from __future__ import annotations

import json
import re
import subprocess
import time

from harness.cli import main
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN
from harness.report import build
from harness.runs import meta as meta_module
from harness.runs.meta import Meta, project_state
from tests.report.test_differences import result


def test_meta_holds_commit_build_date_duration_seed_and_host():
    with Meta.start() as about:
        time.sleep(0.05)
        meta = about.finish({"command": "x"}, seed=7)
    assert re.fullmatch(r"[0-9a-f]{40}", meta["project"]["commit"]) and isinstance(meta["project"]["dirty"], bool)
    assert meta["llama_cpp"]["ggml_commit"] and meta["llama_cpp"]["llama_cpp_python"] == meta["llama_cpp_python"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", meta["date"]) and meta["duration_s"] >= 0.05
    assert meta["seed"] == 7 and meta["command"] == "x"
    assert meta["host"]["cpus"] >= 1 and meta["host"]["name"] and meta["host"]["platform"] and meta["host"]["python"]


def test_a_folder_that_is_not_a_git_checkout_says_so(tmp_path):
    assert project_state(tmp_path) == {"commit": None, "why": project_state(tmp_path)["why"]}
    assert "not a git checkout" in project_state(tmp_path)["why"]


def test_a_dirty_tree_is_dirty(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "f").write_text("a")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert project_state(tmp_path)["dirty"] is False
    (tmp_path / "f").write_text("b")
    assert project_state(tmp_path)["dirty"] is True


def test_a_build_probe_that_fails_is_said_not_hidden(monkeypatch):
    monkeypatch.setattr(meta_module, "_BUILD_SCRIPT", "raise SystemExit('no llama here')")
    monkeypatch.setattr(meta_module, "_CACHE", {})
    with Meta.start() as about:
        meta = about.finish({})
    assert meta["llama_cpp"] == {"error": "llama-cpp-python cannot say its build: no llama here"}


def test_merge_reports_records_its_own_meta(tmp_path, capsys):
    for name, model in (("a", "toy"), ("b", "toy2")):
        build.write(build.build([result(model, 2)], meta={"command": "run", "llama_cpp_python": PIN}),
                    tmp_path / name)
    main(["merge-reports", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")])
    meta = json.loads((tmp_path / "m" / "report.json").read_text())["meta"]
    assert meta["command"] == "merge-reports" and meta["project"]["commit"] and meta["date"] and meta["host"]
    assert "duration_s" in meta and "llama_cpp" not in meta, "a merge runs no llama.cpp: the parts say theirs"


def test_a_seed_already_recorded_is_kept():
    with Meta(background=False) as about:
        assert about.finish({"seed": 12345})["seed"] == 12345
    with Meta(background=False) as about:
        assert about.finish({"seed": 1}, seed=2)["seed"] == 2
