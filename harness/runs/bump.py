"""The pin bump as one procedure (`python -m harness bump-pin VERSION`): build, compare, record, report.

Nothing of the checkout is overwritten. The new llama-cpp-python release is built once (the
portable wheel noxfile.py builds, into the wheel cache, and its worker venv:
`harness.subjects.llama_release`), then:

1. a git work tree of the checkout's HEAD (`git worktree add --detach`), its pin
   (harness/data/pin.txt) set to the new version, and a venv of its own with the new wheel and
   the work tree installed editable with `[harness]`;
2. in the work tree, under the new build, every recorded thing is recorded again: the sdist
   manifests and the vocabularies (`rerecord --manifests`, `fetch`, `synth`), llama.cpp's Unicode
   tables (`tools/gen_unicode.py`), the chat targets (`chat --assign-vocabs`), every golden from its
   own cases (`rerecord`), the code-point records (`python -m tests.tokenizer.code_points`) and,
   with the new build's chat helper, the chat goldens (`chat --record`);
3. in the checkout, the comparison of the two builds (`builds --against llama.cpp@VERSION
   --chat-golden <work tree>/golden/chat`): every golden and live case, code point and chat
   template, each difference with both sides;
4. the change report (`harness.report.bump`): what changed in the work tree, per vocabulary, with
   the comparison's differences, each step's time and exit status.

A step that fails is recorded with the tail of its output and the procedure goes on where it can
(the work tree's steps need its venv); the report says what was not done.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..environment import child_env
from ..environment_vars import CACHE
from ..errors import SetupError
from ..files.atomic import write_text_atomic
from ..models import pin
from ..subjects import llama_release

TAIL = 3000
Log = Callable[[str], None]


@dataclass(frozen=True)
class Bump:
    """One bump: the new version, the checkout, the work tree and the report folder, llama.cpp jobs."""

    version: str
    checkout: Path
    work_tree: Path
    report: Path
    jobs: int = 1

    @property
    def python(self) -> Path:
        return self.work_tree / ".venv" / "bin" / "python"


def check(version: str, checkout: Path, work_tree: Path) -> None:
    """`SetupError` before anything is built: a version that is not X.Y.Z or is the pin, a checkout
    that is not a git checkout, a work tree that exists."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise SetupError(f"bump-pin {version!r}: expected a llama-cpp-python release, X.Y.Z")
    if version == pin.LLAMA_CPP_PYTHON_VERSION:
        raise SetupError(f"bump-pin {version}: that is the pinned version already")
    if not (checkout / ".git").exists():
        raise SetupError(f"bump-pin needs a git checkout to make its work tree from: {checkout} is not one")
    if work_tree.exists():
        raise SetupError(f"--work-tree {work_tree} exists: give another, or remove it "
                         f"(git worktree remove --force {work_tree})")


def step(name: str, argv: list[Any], *, cwd: Path, env: dict[str, str] | None = None,
         log: Log) -> dict[str, Any]:
    """One command of the procedure: its exit status, time and output's tail."""
    log(f"{name}: {' '.join(map(str, argv))}")
    started = time.monotonic()
    try:
        done = subprocess.run(list(map(str, argv)), cwd=cwd, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, check=False)
        code, out = done.returncode, (done.stdout + done.stderr)[-TAIL:]
    except OSError as exc:
        code, out = None, str(exc)
    seconds = round(time.monotonic() - started, 1)
    log(f"{name}: exit {code} in {seconds:g} s")
    return {"step": name, "command": " ".join(map(str, argv)), "exit_code": code, "seconds": seconds, "tail": out}


def work_env(bump: Bump) -> dict[str, str]:
    """The work tree's environment: its venv first, none of the checkout's paths or cache overrides."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", CACHE.name, "VIRTUAL_ENV", "PYTHONHOME")}
    env["VIRTUAL_ENV"] = str(bump.python.parent.parent)
    env["PATH"] = f"{bump.python.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def prepare(bump: Bump, log: Log) -> list[dict[str, Any]]:
    """The new build, the work tree with the new pin, and its venv."""
    started = time.monotonic()
    llama_release.ensure(bump.version, log)
    wheel = llama_release.find_wheel(bump.version)
    steps = [{"step": "build", "command": f"llama-cpp-python {bump.version} wheel and worker venv",
              "exit_code": 0, "seconds": round(time.monotonic() - started, 1), "tail": str(wheel)}]
    steps.append(step("work tree", ["git", "-C", bump.checkout, "worktree", "add", "--detach", bump.work_tree,
                                    "HEAD"], cwd=bump.checkout, log=log))
    if steps[-1]["exit_code"] != 0:
        return steps
    pin_file = bump.work_tree / "harness" / "data" / "pin.txt"
    write_text_atomic(pin_file, pin.pin_text(bump.version, pin_file), "the work tree's pin")
    steps.append(step("venv", [sys.executable, "-m", "venv", bump.work_tree / ".venv"], cwd=bump.work_tree,
                      log=log))
    install = [bump.python, "-m", "pip", "install", "-q", wheel, "-e", f"{bump.work_tree}[harness]"]
    steps.append(step("install", install, cwd=bump.work_tree, env=work_env(bump), log=log))
    return steps


def record_steps(bump: Bump) -> list[tuple[str, list[Any]]]:
    """The work tree's commands, in order, under its venv (the new build)."""
    py, jobs = bump.python, str(bump.jobs)
    harness = [py, "-m", "harness"]
    return [
        ("manifests", [*harness, "rerecord", "--manifests"]),
        ("fetch", [*harness, "fetch"]),
        ("synth", [*harness, "synth"]),
        ("unicode tables", [py, "tools/gen_unicode.py"]),
        ("chat targets", [*harness, "chat", "--assign-vocabs"]),
        ("goldens", [*harness, "rerecord", "--golden", "golden", "--jobs", jobs]),
        ("code points", [py, "-m", "tests.tokenizer.code_points"]),
        ("chat helper", [*harness, "chat", "--build-helper", "--jobs", jobs]),
        ("chat goldens", [*harness, "chat", "--record", "--out", "golden/chat"]),
    ]


def record(bump: Bump, log: Log) -> list[dict[str, Any]]:
    """Every recorded thing recorded again in the work tree; a failed step costs itself (the chat goldens
    need the helper; everything needs the manifests and the vocabularies)."""
    done: list[dict[str, Any]] = []
    needs = {"chat goldens": "chat helper",
             **dict.fromkeys(("synth", "unicode tables", "goldens", "code points", "chat targets", "chat helper"),
                            "fetch")}
    env = work_env(bump)
    for name, argv in record_steps(bump):
        failed = {d["step"] for d in done if d["exit_code"] not in (0, 1)}
        if needs.get(name) in failed or (name == "fetch" and "manifests" in failed):
            done.append({"step": name, "command": " ".join(map(str, argv)), "exit_code": None, "seconds": 0,
                         "tail": f"not run: {needs.get(name, 'manifests')} failed"})
            continue
        done.append(step(name, argv, cwd=bump.work_tree, env=env, log=log))
    return done


def compare(bump: Bump, log: Log) -> dict[str, Any]:
    """The two builds compared from the checkout (its goldens, the work tree's chat goldens)."""
    argv = [sys.executable, "-P", "-m", "harness", "builds", "--against", f"{llama_release.PREFIX}{bump.version}",
            "--report", bump.report / "builds", "--jobs", bump.jobs, "--quiet"]
    chat = bump.work_tree / "golden" / "chat"
    if chat.is_dir():
        argv += ["--chat-golden", chat]
    return step("builds", argv, cwd=bump.checkout, env=child_env(), log=log)


def changed_files(work_tree: Path) -> list[dict[str, Any]]:
    """Every file the procedure changed or added in the work tree: path, lines added and removed."""
    subprocess.run(["git", "-C", str(work_tree), "add", "--intent-to-add", "--all", "--", "."],
                   capture_output=True, check=False)
    done = subprocess.run(["git", "-C", str(work_tree), "diff", "--numstat", "HEAD", "--", "."], capture_output=True,
                          text=True, check=False)
    out = []
    for line in done.stdout.splitlines():
        added, removed, path = (line.split("\t", 2) + ["", "", ""])[:3]
        out.append({"path": path, "added": int(added) if added.isdigit() else None,
                    "removed": int(removed) if removed.isdigit() else None})
    return out


def remove_work_tree(checkout: Path, work_tree: Path) -> None:
    """The work tree and its branchless entry gone (for a bump that should leave nothing behind)."""
    subprocess.run(["git", "-C", str(checkout), "worktree", "remove", "--force", str(work_tree)],
                   capture_output=True, check=False)
    shutil.rmtree(work_tree, ignore_errors=True)
