"""The PR gate (.github/workflows/pr-gate.yml, docs/differences.md "The PR gate"): main's report is the baseline,
the pull request's run takes `--baseline` of it, and the job fails only as that run does.

The workflow's shell steps are run here with a stand-in for each side's `python` (it records its arguments and
exits as told), so their logic is checked without a runner: main's exit 1 (its own differences) is kept as the
baseline and anything above fails the job; the pull request's exit status is the job's. actionlint (`nox -s
lint`) checks the syntax; the llama-cpp-python build flags are held to noxfile.py's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "pr-gate.yml"
STAND_IN = '#!/bin/sh\necho "$0 $*" >> "$LOG"\nexit "${EXIT:-0}"\n'


def steps() -> list[dict]:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["gate"]["steps"]


def step(prefix: str) -> dict:
    return next(s for s in steps() if s.get("name", "").startswith(prefix))


def run_step(tmp_path: Path, prefix: str, status: int) -> tuple[int, list[str]]:
    for side in ("main", "pr"):
        (tmp_path / side).mkdir(exist_ok=True)
        python = tmp_path / f"venv-{side}" / "bin" / "python"
        python.parent.mkdir(parents=True, exist_ok=True)
        python.write_text(STAND_IN)
        python.chmod(0o755)
    chosen = step(prefix)
    log = tmp_path / "log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "LOG": str(log), "EXIT": str(status), "GATE_ARGS": "--model llama-bpe --fuzz 20 --seed 0"}
    done = subprocess.run(["bash", "-e", "-c", chosen["run"]], cwd=tmp_path / chosen["working-directory"], env=env,
                          capture_output=True, text=True, check=False)
    return done.returncode, log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(("status", "passes"), [(0, True), (1, True), (2, False), (3, False), (130, False)])
def test_mains_run_is_the_baseline_and_its_own_differences_do_not_fail(tmp_path, status, passes):
    code, calls = run_step(tmp_path, "main's report", status)
    assert (code == 0) == passes
    [call] = calls
    assert call.endswith("-m harness run --model llama-bpe --fuzz 20 --seed 0 --quiet --report ../reports/main")
    assert "--baseline" not in call and "venv-main" in call


@pytest.mark.parametrize("status", [0, 1, 2])
def test_the_pull_request_runs_against_mains_report_and_its_status_is_the_jobs(tmp_path, status):
    code, [call] = run_step(tmp_path, "the pull request", status)
    assert code == status
    assert call.endswith("-m harness run --model llama-bpe --fuzz 20 --seed 0 --quiet --baseline ../reports/main "
                         "--report ../reports/pr") and "venv-pr" in call


def test_each_side_runs_its_own_checkout_and_main_is_the_base():
    checkouts = [s for s in steps() if s.get("uses", "").startswith("actions/checkout")]
    assert [c["with"]["path"] for c in checkouts] == ["pr", "main"]
    assert checkouts[1]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert 'install --quiet -e "./$side[harness]"' in step("one venv per side")["run"]


def test_the_wheel_is_built_as_the_noxfile_builds_it():
    import ast
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    [value] = [node.value for node in tree.body if isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "CMAKE_ARGS" for t in node.targets)]
    expected = " ".join(ast.literal_eval(value.args[0]))  # CMAKE_ARGS = " ".join([...])
    flags = " ".join(step("llama-cpp-python, compiled once")["env"]["CMAKE_ARGS"].split())
    assert flags == expected
