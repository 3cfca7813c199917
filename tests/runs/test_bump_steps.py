"""The pin bump's procedure (harness/runs/bump.py) without building anything: its checks, the work tree's
steps and what a failed one costs, and the files it changed, read from a real git work tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN
from harness.runs import bump


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A small git checkout: a pin, one golden, one code-point record."""
    root = tmp_path / "checkout"
    (root / "harness" / "data").mkdir(parents=True)
    (root / "golden" / "code-points").mkdir(parents=True)
    (root / "harness" / "data" / "pin.txt").write_text(f"# pin\nllama-cpp-python=={PIN}\n")
    (root / "golden" / "ggml-vocab-toy.json").write_text('{"cases": [\n{"id": 1},\n{"id": 2}\n]}\n')
    (root / "golden" / "code-points" / "toy.json").write_text('{"digests": ["1:a", "1:b"]}\n')
    git("init", "-q", cwd=root)
    git("add", ".", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", cwd=root)
    return root


def test_checks_refuse_the_pin_itself_a_bad_version_a_non_checkout_and_an_existing_work_tree(checkout, tmp_path):
    with pytest.raises(SetupError, match="the pinned version already"):
        bump.check(PIN, checkout, tmp_path / "wt")
    with pytest.raises(SetupError, match=r"X\.Y\.Z"):
        bump.check("latest", checkout, tmp_path / "wt")
    with pytest.raises(SetupError, match="not one"):
        bump.check("9.9.9", tmp_path, tmp_path / "wt")
    with pytest.raises(SetupError, match="exists"):
        bump.check("9.9.9", checkout, checkout)
    bump.check("9.9.9", checkout, tmp_path / "wt")


def test_the_files_the_procedure_changed_are_read_from_its_work_tree(checkout, tmp_path):
    tree = tmp_path / "wt"
    git("worktree", "add", "-q", "--detach", str(tree), "HEAD", cwd=checkout)
    (tree / "golden" / "ggml-vocab-toy.json").write_text('{"cases": [\n{"id": 1},\n{"id": 3}\n]}\n')
    (tree / "golden" / "new.json").write_text("{}\n")
    files = {f["path"]: (f["added"], f["removed"]) for f in bump.changed_files(tree)}
    assert files == {"golden/ggml-vocab-toy.json": (1, 1), "golden/new.json": (1, 0)}
    assert (checkout / "golden" / "ggml-vocab-toy.json").read_text().count('"id": 2') == 1  # untouched
    bump.remove_work_tree(checkout, tree)
    assert not tree.exists() and str(tree) not in git("worktree", "list", cwd=checkout)


def test_a_failed_step_costs_the_steps_that_need_it_and_nothing_else(checkout, tmp_path, monkeypatch):
    ran: list[str] = []
    failing = {"manifests": 0, "chat helper": 2}

    def fake_step(name, argv, *, cwd, env=None, log):
        ran.append(name)
        return {"step": name, "command": name, "exit_code": failing.get(name, 0), "seconds": 0, "tail": ""}

    monkeypatch.setattr(bump, "step", fake_step)
    done = bump.record(bump.Bump("9.9.9", checkout, tmp_path / "wt", tmp_path / "r"), log=lambda line: None)
    assert "chat goldens" not in ran and "goldens" in ran
    [skipped] = [d for d in done if d["exit_code"] is None]
    assert skipped["step"] == "chat goldens" and "chat helper failed" in skipped["tail"]
    failing["manifests"] = 2
    ran.clear()
    bump.record(bump.Bump("9.9.9", checkout, tmp_path / "wt", tmp_path / "r"), log=lambda line: None)
    assert ran == ["manifests"]  # nothing that reads the new sdist's files


def test_the_work_trees_commands_run_under_its_own_venv(checkout, tmp_path):
    one = bump.Bump("9.9.9", checkout, tmp_path / "wt", tmp_path / "r", jobs=2)
    steps = dict(bump.record_steps(one))
    assert all(argv[0] == one.python for argv in steps.values())
    assert steps["goldens"][-4:] == ["--golden", "golden", "--jobs", "2"]
    env = bump.work_env(one)
    assert "PYTHONPATH" not in env and "GGUF_PARITY_CACHE" not in env
    assert env["PATH"].startswith(str(one.python.parent))
