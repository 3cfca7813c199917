"""Crash-safe reports.

- a full disk while writing keeps the previous good report, and leaves no temp file;
- a second run into a report folder another run holds is refused (exit 2) before it starts;
- SIGTERM mid-run writes a partial report marked `interrupted` with the models finished, exit 143,
  and (with llama.cpp) leaves no worker process behind.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.compare.result import ModelResult
from harness.errors import SetupError
from harness.files import atomic
from harness.report import build as reporting
from harness.report import folder as report_dir
from harness.runs.config import RunConfig
from harness.runs.finish import run_and_report

ROOT = Path(__file__).resolve().parents[2]

SLOW_ENGINE = '''
import os, time
from tokenizer import Tokenizer

class Slow:
    """Our engine, but each tokenize call of the second model marks a file and sleeps."""
    def __init__(self, tok):
        self._tok = tok
    def __getattr__(self, name):
        return getattr(self._tok, name)
    def tokenize(self, *args, **kwargs):
        open(os.environ["SLOW_MARK"], "a").close()
        time.sleep(0.05)
        return self._tok.tokenize(*args, **kwargs)

def load(path):
    tok = Tokenizer.from_gguf(path)
    return Slow(tok) if os.environ["SLOW_MODEL"] in str(path) else tok
'''


def _config(tmp_path: Path) -> RunConfig:
    return RunConfig(models=("m",), report_dir=tmp_path / "r")


def _one_model(results: list) -> None:
    results.append(ModelResult("m", "spm", cases=3))


def test_a_full_disk_keeps_the_previous_report(tmp_path: Path, monkeypatch):
    config = _config(tmp_path)
    assert run_and_report(_one_model, config, {"command": "first"}) == 0
    before = {p.name: p.read_bytes() for p in config.report_dir.iterdir()}

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(SetupError, match="No space left on device"):
        run_and_report(_one_model, config, {"command": "second"})
    after = {p.name: p.read_bytes() for p in config.report_dir.iterdir()}
    assert after == before  # the old report.json/html intact, no temp file left
    assert json.loads(after["report.json"])["meta"]["command"] == "first"


def test_a_full_disk_through_the_cli_is_one_line(tmp_path: Path, monkeypatch, capsys):
    from harness import cli

    reports = tmp_path / "a"
    reports.mkdir()
    (reports / "report.json").write_text(json.dumps(reporting.build([], meta={})))
    out = tmp_path / "merged"

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(atomic.os, "fsync", full)
    assert cli.main(["merge-reports", str(reports), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write the report") and err.count("\n") == 1
    assert not list(out.glob("report.*")) and not list(out.glob(".report*"))


def test_a_report_folder_held_by_another_run_is_refused(tmp_path: Path):
    config = _config(tmp_path)
    with report_dir.ReportDir(config.report_dir), pytest.raises(SetupError, match="another run is writing"):
        run_and_report(_one_model, config, {})
    assert run_and_report(_one_model, config, {}) == 0  # released when the holder is done


def test_a_lock_dies_with_its_process(tmp_path: Path):
    folder = tmp_path / "r"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom harness.report.folder import ReportDir\n"
                               f"d = ReportDir({str(folder)!r}).__enter__()\nprint('held', flush=True)\n"
                               "time.sleep(60)"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SetupError):
            report_dir.ReportDir(folder).__enter__()
    finally:
        holder.kill()
        holder.wait()
    with report_dir.ReportDir(folder):
        pass


def _sigterm_when_marked(proc: subprocess.Popen, mark: Path, limit: float = 240) -> None:
    deadline = time.monotonic() + limit
    while not mark.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the slow model never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)


def _start(args: list[str], tmp_path: Path, slow_model: str) -> subprocess.Popen:
    (tmp_path / "slow_engine.py").write_text(SLOW_ENGINE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
           "SLOW_MARK": str(tmp_path / "mark"), "SLOW_MODEL": slow_model}
    return subprocess.Popen([sys.executable, "-m", "harness", *args, "--engine", "slow_engine:load",
                             "--report", str(tmp_path / "r"), "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
def test_sigterm_mid_compare_writes_an_interrupted_partial_report(tmp_path: Path, require_vocab):
    for name in ("llama-spm", "phi-3"):
        require_vocab(name)
    proc = _start(["compare", "--golden", str(ROOT / "golden"), "--model", "llama-spm", "--model", "phi-3"],
                  tmp_path, "phi-3")
    _sigterm_when_marked(proc, tmp_path / "mark")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, (out, err)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["meta"]["interrupted"] == "SIGTERM"
    assert list(report["summary"]["per_model"]) == ["llama-spm"]  # the finished model, not the cut one
    assert out.startswith("interrupted (SIGTERM), partial:") and "Traceback" not in err
    assert 'id="interrupted"' in (tmp_path / "r" / "report.html").read_text()


def _workers_of(model: Path) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"harness.oracle.worker_child" in cmdline and str(model).encode() in cmdline:
            found.append(proc.name)
    return found


@pytest.mark.oracle
def test_sigterm_mid_run_leaves_a_partial_report_and_no_workers(tmp_path: Path, require_vocab):
    first, second = tmp_path / "first.gguf", tmp_path / "second.gguf"
    first.write_bytes(require_vocab("llama-spm").read_bytes())
    second.write_bytes(require_vocab("phi-3").read_bytes())
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": f"case {i}"}) + "\n" for i in range(400)))
    proc = _start(["run", "--model", str(first), "--model", str(second), "--corpus", str(corpus),
                   "--no-default-corpora", "--jobs", "2", "--found-dir", str(tmp_path / "found")],
                  tmp_path, "second")
    _sigterm_when_marked(proc, tmp_path / "mark")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, (out, err)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["meta"]["interrupted"] == "SIGTERM" and list(report["summary"]["per_model"]) == ["first"]
    time.sleep(0.5)
    assert _workers_of(second) == []


def test_run_messages_goes_into_the_report_written_once(tmp_path: Path, monkeypatch):
    """`run --messages`: the messages section is in report.json and report.html from the one write."""
    writes = []
    real_write = reporting.write
    monkeypatch.setattr(reporting, "write", lambda report, out: writes.append(dict(report)) or real_write(report, out))
    section = {"targets": 1, "cases": 2, "matched": 1, "findings": [], "oracle_crashes": [], "lines": ["1 differs"]}
    config = _config(tmp_path)
    assert run_and_report(_one_model, config, {}, messages=lambda: (section, False)) == 1  # a message differs
    assert len(writes) == 1 and writes[0]["messages"] == section
    assert json.loads((config.report_dir / "report.json").read_text())["messages"] == section


def test_a_failing_messages_check_still_leaves_the_run_report(tmp_path: Path):
    def broken():
        raise SetupError("chat helper cannot be built")
    config = _config(tmp_path)
    with pytest.raises(SetupError):
        run_and_report(_one_model, config, {}, messages=broken)
    assert "messages" not in json.loads((config.report_dir / "report.json").read_text())


@pytest.mark.parametrize("plant", ["folder-is-a-file", "folder-is-a-fifo", "report.json-is-a-fifo",
                                   "report.html-links-to-dev-null", "cases-is-a-file", "lock-links-out",
                                   "lock-is-a-fifo"])
def test_a_report_folder_with_no_place_for_a_report_is_refused_before_the_run(tmp_path: Path, plant: str):
    """issue 47: an output that is a device, a FIFO or a link to one is refused before any work, and no link
    planted in the folder is followed (its target is neither created nor changed)."""
    folder, victim = tmp_path / "r", tmp_path / "victim"
    if plant.startswith("folder-is"):
        folder.write_text("") if plant == "folder-is-a-file" else os.mkfifo(folder)
    else:
        folder.mkdir()
    where = {"report.json-is-a-fifo": "report.json", "report.html-links-to-dev-null": "report.html",
             "cases-is-a-file": "cases", "lock-links-out": ".lock", "lock-is-a-fifo": ".lock"}.get(plant)
    if plant.endswith("fifo") and where:
        os.mkfifo(folder / where)
    elif plant == "report.html-links-to-dev-null":
        (folder / where).symlink_to("/dev/null")
    elif plant == "cases-is-a-file":
        (folder / where).write_text("")
    elif plant == "lock-links-out":
        (folder / where).symlink_to(victim)
    with pytest.raises(SetupError) as caught:
        report_dir.ReportDir(folder).__enter__()
    assert str(caught.value).startswith(f"--report {folder}") and "\n" not in str(caught.value)
    assert not victim.exists()
    if where and plant != "cases-is-a-file":
        assert not (folder / where).is_file() or (folder / where).is_symlink()
