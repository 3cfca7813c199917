"""quickstart.sh leaves a usable environment: `shell` and `exec` run the README's commands in .nox/env.

Before, the Quickstart's environment was `.nox/parity/bin/python` and nothing said so: `python -m harness`
with another Python printed a traceback. Here quickstart.sh runs in a copy of the checkout whose nox is a
stand-in that logs its sessions and, for `env`, makes `.nox/env` a venv-shaped folder whose `python` is
this interpreter; so the script's own logic (set up once, again when pyproject.toml changes, the
environment first on PATH, arguments passed as written) is tested in seconds. The real `env` session is
what `./quickstart.sh exec python -m harness tokenize ...` measured in docs/results.md runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_NOX = """#!/bin/sh
echo "$*" >> "$NOX_LOG"
if [ "$1 $2" = "--session env" ]; then
    mkdir -p .nox/env/bin
    ln -sf "$REAL_PYTHON" .nox/env/bin/python
    printf 'VIRTUAL_ENV="%s/.nox/env"; export VIRTUAL_ENV; PS1="(env) $PS1"\\n' "$PWD" > .nox/env/bin/activate
fi
"""


@pytest.fixture
def checkout(tmp_path):
    """A copy of quickstart.sh and pyproject.toml with a stand-in nox in .venv/quickstart; returns (folder, log)."""
    shutil.copy2(ROOT / "quickstart.sh", tmp_path / "quickstart.sh")
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "harness" / "data" / "extras", tmp_path / "harness" / "data" / "extras")
    shutil.copy2(ROOT / "harness" / "data" / "pin.txt", tmp_path / "harness" / "data" / "pin.txt")
    nox = tmp_path / ".venv" / "quickstart" / "bin" / "nox"
    nox.parent.mkdir(parents=True)
    nox.write_text(FAKE_NOX)
    nox.chmod(0o755)
    return tmp_path, tmp_path / "nox.log"


def quickstart(folder: Path, log: Path, *args: str, stdin: str = "", shell: str = "/bin/bash"):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(NOX_LOG=str(log), REAL_PYTHON=sys.executable, SHELL=shell, HOME=str(folder))
    return subprocess.run(["./quickstart.sh", *args], cwd=folder, env=env, input=stdin, capture_output=True,
                          text=True, timeout=60, check=False)


def sessions(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.is_file() else []


def test_exec_runs_one_command_in_the_environment_with_its_arguments_as_written(checkout):
    folder, log = checkout
    probe = ("import os, shutil, sys; print(os.environ['VIRTUAL_ENV']); print(shutil.which('python'));"
             "print(sys.argv[1:])")
    done = quickstart(folder, log, "exec", "python", "-c", probe, "Hello world", "--model", "llama-bpe")
    assert done.returncode == 0, done.stderr
    venv, python, argv = done.stdout.splitlines()
    assert venv == str(folder / ".nox" / "env") and python == str(folder / ".nox" / "env" / "bin" / "python")
    assert argv == "['Hello world', '--model', 'llama-bpe']"
    assert sessions(log) == ["--session env"]


def test_the_environment_is_set_up_once_and_again_when_the_project_changes(checkout):
    folder, log = checkout
    for _ in range(2):
        assert quickstart(folder, log, "exec", "true").returncode == 0
    assert sessions(log) == ["--session env"]
    with open(folder / "pyproject.toml", "a", encoding="utf-8") as fh:
        fh.write("\n# a new requirement\n")
    assert quickstart(folder, log, "exec", "true").returncode == 0
    assert sessions(log) == ["--session env"] * 2
    pin = folder / "harness" / "data" / "pin.txt"  # a bump: the pin and the extras are read from files
    pin.write_text(pin.read_text().replace("llama-cpp-python==", "llama-cpp-python==9"))
    assert quickstart(folder, log, "exec", "true").returncode == 0
    assert sessions(log) == ["--session env"] * 3


def test_shell_is_a_shell_in_the_environment(checkout):
    folder, log = checkout
    done = quickstart(folder, log, "shell", stdin='echo "$VIRTUAL_ENV"; command -v python\n')
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(folder / ".nox" / "env"), str(folder / ".nox" / "env" / "bin" / "python")]
    assert "exit to leave" in done.stderr


def test_exec_without_a_command_is_one_line(checkout):
    folder, log = checkout
    done = quickstart(folder, log, "exec")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "exec needs a command" in done.stderr
    assert sessions(log) == []


def test_any_other_word_is_a_nox_session_with_its_arguments(checkout):
    folder, log = checkout
    assert quickstart(folder, log, "tests", "-k", "spm", "-x").returncode == 0
    assert sessions(log) == ["--session tests -- -k spm -x"]


def test_help_names_shell_and_exec(checkout):
    folder, log = checkout
    done = quickstart(folder, log, "--help")
    assert done.returncode == 2
    for word in ("./quickstart.sh parity", "./quickstart.sh shell", "./quickstart.sh exec", ".nox/env/bin/activate"):
        assert word in done.stdout, done.stdout


def test_the_env_session_installs_the_harness_and_builds_what_the_readme_commands_need(monkeypatch):
    """nox's `env` session: the project with [harness] (pytest comes with it), the vocabularies, the chat helper."""
    from tests.project.test_noxfile import FakeSession, _noxfile
    noxfile = _noxfile()
    monkeypatch.setattr(noxfile, "llama_wheel", lambda session: Path("llama_cpp_python.whl"))
    session = FakeSession([])
    noxfile.env.func(session)
    commands = [" ".join(args) for args, _ in session.calls]
    assert commands[:2] == ["install llama_cpp_python.whl", "install -e .[harness]"]
    assert "python -m harness fetch" in commands and any(c.startswith("python -m harness chat --build-helper")
                                                         for c in commands)
