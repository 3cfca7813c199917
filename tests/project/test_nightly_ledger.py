"""The nightly's ledger step: noxfile.py's `nightly_ledger` folds the night's merged reports, and the GitHub
nightly carries the ledger from night to night as an artifact (docs/sharding.md, "The ledger")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from harness.compare.result import ModelResult
from harness.report import build
from tests.project.test_noxfile import FakeSession, _noxfile

ROOT = Path(__file__).resolve().parents[2]


class ShellSession(FakeSession):
    """A session whose `sh -c` steps really run, with this interpreter as `python`."""

    name = "nightly"

    def run(self, *args: str, **kwargs) -> None:
        super().run(*args, **kwargs)
        if args[:2] == ("sh", "-c"):
            env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
            subprocess.run(["sh", "-c", args[2]], check=False, cwd=ROOT, env=env)


def report(folder: Path, cases: int) -> Path:
    build.write(build.build([ModelResult("m", "bpe", cases=cases)], meta={"command": "run", "llama_cpp_python": "0"}),
                folder)
    return folder


def test_the_nightly_folds_only_the_reports_this_night_wrote(tmp_path, monkeypatch):
    noxfile = _noxfile()
    monkeypatch.setattr(noxfile, "SHARD", None)
    monkeypatch.setenv("GGUF_PARITY_NIGHT", "2026-12-03")
    monkeypatch.delenv("GGUF_PARITY_LEDGER", raising=False)
    out = report(tmp_path / "nightly", 4)
    stale = report(tmp_path / "nightly" / "real", 4)
    os.utime(stale / "report.json", (time.time() - 86_400,) * 2)  # last night's, left by a step that stopped early
    session = ShellSession([])
    assert noxfile.nightly_ledger(session, out, [out, stale], since=time.time() - 60)
    [command] = [args[2] for args, _ in session.calls]
    assert f"ledger {out} --ledger {out / 'ledger.jsonl'} --night 2026-12-03 --page {out / 'ledger.html'}" in command
    assert str(stale) not in command.split("--ledger")[0]
    header = json.loads((out / "ledger.jsonl").read_text().splitlines()[0])
    assert header["last_night"] == "2026-12-03" and (out / "ledger.html").is_file() and (out / "index.html").is_file()
    assert "ledger, night 2026-12-03" in (out / "ledger.txt").read_text()


def test_a_failed_ledger_step_is_a_problem_of_the_night_and_a_shard_folds_nothing(tmp_path, monkeypatch):
    noxfile = _noxfile()
    monkeypatch.setenv("GGUF_PARITY_NIGHT", "2026-12-03")
    out = report(tmp_path / "nightly", 4)
    (out / "ledger.jsonl").write_text("not a ledger\n")
    monkeypatch.setattr(noxfile, "SHARD", None)
    assert not noxfile.nightly_ledger(ShellSession([]), out, [out], since=0)
    assert "error: " in (out / "ledger.txt").read_text()
    monkeypatch.setattr(noxfile, "SHARD", "1/2")
    session = ShellSession([])
    assert noxfile.nightly_ledger(session, out, [out], since=0) and session.calls == []


def test_the_nightly_session_runs_the_ledger_step_at_its_end(tmp_path, monkeypatch):
    from tests.project.test_noxfile import nightly_commands

    noxfile = _noxfile()
    asked = []

    def nightly_ledger(session, out, reports, *, since, name="ledger"):
        asked.append((out, reports, since)) if name == "ledger" else None
        return True
    monkeypatch.setattr(noxfile, "nightly_ledger", nightly_ledger)
    nightly_commands(tmp_path, monkeypatch, None)
    [(out, reports, since)] = asked
    assert out == Path("reports/nightly") and reports == [out, out / "real"] and since <= time.time()


def test_the_github_nightly_carries_the_ledger_from_night_to_night():
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())["jobs"]
    steps = jobs["merge"]["steps"]
    names = [s.get("name") or s.get("with", {}).get("name") for s in steps]
    fetch, fold, upload = (names.index(n) for n in ("the ledger of earlier nights", "the ledger", "nightly-ledger"))
    assert names.index("merge-reports") < fetch < fold < upload
    assert "artifacts?name=nightly-ledger" in steps[fetch]["run"] and "pull_request" in steps[fetch]["if"]
    assert "python -m harness ledger reports/nightly --ledger reports/nightly/ledger.jsonl" in steps[fold]["run"]
    assert steps[upload]["with"]["path"] == "reports/nightly/ledger.jsonl"
    assert "pull_request" in steps[upload]["if"] and "steps.ledger.outcome == 'success'" in steps[upload]["if"]
    report = next(s for s in steps if s.get("with", {}).get("name") == "parity-report")
    assert "reports/nightly/ledger.html" in report["with"]["path"]
