"""Blame: a llama.cpp worker killed from outside is a harness fault, never a llama.cpp crash.

Each test SIGKILLs a worker (os.kill on its pid, as another process or the
kernel's OOM killer would) while `record`, `drift`, `run` or a fuzz hunt uses
it. The case must be re-run in a fresh worker; the answer it gives is kept,
and the death is reported as a harness fault: not written into the golden,
not a change in drift, not an oracle crash in the report, not shrunk and not
saved to the found corpus. A crash llama.cpp repeats is still a crash
(tests/oracle/test_oracle.py::test_abort_becomes_a_crash_record_and_the_run_goes_on).
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from harness.cli import main
from harness.golden.files import load_golden
from harness.oracle.workers import Worker

pytestmark = [pytest.mark.oracle, pytest.mark.vocab]

CASES = [{"id": f"c{i}", "text": text} for i, text in
         enumerate(["Hello", "Hello  world", "a b", "x = 1", "naive cafe", "He said: well"])]


class Killer:
    """Kills a worker from outside just before its `nth` request of `op` (once), like `kill -9 PID`."""

    def __init__(self, nth: int, op: str = "evaluate") -> None:
        self.nth, self.op, self.seen, self.killed = nth, op, 0, []

    def install(self, monkeypatch) -> Killer:
        send = Worker.send

        def killing_send(worker: Worker, op: str, *args, timeout: float) -> None:
            if op == self.op:
                self.seen += 1
                if self.seen == self.nth:
                    os.kill(worker.proc.pid, signal.SIGKILL)
                    worker.proc.wait()
                    self.killed.append(worker.proc.pid)
            send(worker, op, *args, timeout=timeout)

        monkeypatch.setattr(Worker, "send", killing_send)
        return self


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    """A small RWKV vocabulary (every letter a token): recording it takes a moment, not gpt-2's seconds."""
    from harness.models import synth

    path = tmp_path / "tiny.gguf"
    letters = [chr(c) for c in range(0x20, 0x7F) if chr(c) != "\\"]
    path.write_bytes(synth.custom(["\\n", *letters, "He", "ll", "wo"], model="rwkv"))
    return path


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "few.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CASES), encoding="utf-8")
    return path


def record(model: Path, corpus: Path, out: Path, *extra: str) -> int:
    return main(["record", "--model", str(model), "--corpus", str(corpus), "--out", str(out), *extra])


def test_record_keeps_a_killed_workers_case_out_of_the_golden(tiny, corpus, tmp_path, monkeypatch, capsys):
    model = tiny
    assert record(model, corpus, tmp_path / "clean") == 0
    killer = Killer(nth=3).install(monkeypatch)
    capsys.readouterr()
    assert record(model, corpus, tmp_path / "killed") == 0
    out = capsys.readouterr().out
    assert killer.killed
    assert "0 oracle crash(es)" in out
    assert f"harness fault (not in the golden): {model.name} case few-c2: worker signal SIGKILL" in out
    clean, killed = (load_golden(tmp_path / d / f"{model.stem}.json") for d in ("clean", "killed"))
    assert killed["cases"] == clean["cases"]


def test_record_blames_a_load_crash_on_llama_cpp_only_when_it_repeats(tiny, corpus, tmp_path, monkeypatch,
                                                                     capsys):
    """A worker killed while loading the model is no "load_error" crash in the golden."""
    start = Worker.start
    killed = []

    def start_killed_once(worker: Worker) -> None:
        if not killed:
            os.kill(worker.proc.pid, signal.SIGKILL)
            killed.append(worker.proc.pid)
        start(worker)

    monkeypatch.setattr(Worker, "start", start_killed_once)
    model = tiny
    assert record(model, corpus, tmp_path / "golden") == 0
    assert f"harness fault (not in the golden): {model.name} case <load>" in capsys.readouterr().out
    golden = load_golden(tmp_path / "golden" / f"{model.stem}.json")
    assert golden["load_error"] is None
    assert not [c for c in golden["cases"] if "crash" in c]


def test_drift_does_not_report_a_killed_worker_as_a_change(tiny, corpus, tmp_path, monkeypatch, capsys):
    model = tiny
    assert record(model, corpus, tmp_path / "golden") == 0
    Killer(nth=2).install(monkeypatch)
    capsys.readouterr()
    code = main(["drift", "--golden", str(tmp_path / "golden"), "--models-dir", str(model.parent)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(rf"{re.escape(model.stem)}\.json: \d+ cases, 0 change\(s\)", out), out
    assert f"harness fault (not in the golden): {model.stem}.json case few-c1" in out


def run(model: Path, corpus: Path | None, report: Path, *extra: str) -> tuple[int, dict]:
    given = ["--corpus", str(corpus)] if corpus else []
    code = main(["run", "--model", str(model), *given, "--no-default-corpora",
                 "--report", str(report), "--quiet", *extra])
    return code, json.loads((report / "report.json").read_text(encoding="utf-8"))


def test_run_reports_a_killed_worker_as_a_harness_fault(require_vocab, corpus, tmp_path, monkeypatch):
    Killer(nth=4).install(monkeypatch)
    code, report = run(require_vocab("gpt-2"), corpus, tmp_path / "report")
    assert report["oracle_crashes"] == []
    assert report["summary"]["oracle_crashes"] == 0
    assert report["summary"]["harness_faults"] == 1
    (fault,) = report["harness_faults"]
    assert (fault["model"], fault["case_id"], fault["crash"]["signal"]) == ("gpt-2", "c3", "SIGKILL")
    assert code == 0  # the fresh worker answered the case, so every case was checked
    assert "harness fault on c3" in " ".join(report["summary"]["per_model"]["gpt-2"]["notes"])


def test_fuzzing_neither_shrinks_nor_saves_a_killed_workers_case(require_vocab, tmp_path, monkeypatch):
    found = tmp_path / "found"
    Killer(nth=5).install(monkeypatch)
    code, report = run(require_vocab("llama-spm"), None, tmp_path / "report", "--fuzz", "15", "--seed", "3",
                       "--found-dir", str(found))
    assert report["oracle_crashes"] == []
    assert report["summary"]["harness_faults"] == 1
    assert not found.exists() or not any(found.iterdir())
    assert code == 0


def test_oracle_session_answers_from_a_fresh_worker(require_vocab):
    from harness.oracle.session import OracleSession

    with OracleSession(require_vocab("gpt-2"), timeout=30) as oracle:
        first = oracle.evaluate(CASES[0])
        os.kill(oracle._worker.proc.pid, signal.SIGKILL)
        assert oracle.evaluate(CASES[0]) == first
        assert [(f["case_id"], f["op"], f["crash"]["signal"]) for f in oracle.faults] == [("c0", "evaluate",
                                                                                            "SIGKILL")]
