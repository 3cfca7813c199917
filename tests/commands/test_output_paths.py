"""Every output path of the command line is checked before any work (issue 47): a character device, a FIFO,
a folder or a link to one (`/proc/self/fd/1` a pipe) is one line and exit 2, and stays what it was.

`repair --out`, `repair --json`, `merge-reports --out`, `selftest --report`; `convert --out` is in
tests/models/test_convert.py, `run --report` in tests/report/test_report_safety.py, and the writer itself in
tests/files/test_atomic.py. None of these runs llama.cpp: each refusal comes first.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.compare.result import ModelResult
from harness.models import gguf_writer
from harness.report import build as reporting
from tests import reference_files as rf

ROOT = Path(__file__).resolve().parents[2]


def harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, stdin=subprocess.DEVNULL, check=False)


def plant(path: Path, kind: str) -> Path:
    """`path` made a `kind` of non-file; returns the path to give the command."""
    if kind == "char-device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a copy of /dev/null
        except PermissionError:
            pytest.skip("making a character device needs root")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-to-dev-null":
        path.symlink_to("/dev/null")
    elif kind == "folder":
        path.mkdir()
    return path


def tiny_gguf(path: Path) -> Path:
    gguf_writer.write(path, {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2",
                        "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.token_type": [1, 1]})
    return path


def assert_refused(done: subprocess.CompletedProcess, option: str, path: Path, started: float) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"error: {option} {path}") and done.stderr.count("\n") == 1, done.stderr
    assert time.monotonic() - started < 60


KINDS = ["char-device", "fifo", "link-to-dev-null", "folder"]


@pytest.mark.parametrize("option", ["--out", "--json"])
@pytest.mark.parametrize("kind", KINDS)
def test_repair_refuses_an_output_that_is_no_file_before_any_work(tmp_path, option, kind):
    """issue 47: `repair --out` / `--json` onto a copy of /dev/null exited 0 and left a regular file in its place."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=True, bos=False)
    gguf = rf.bpe_gguf(original, tmp_path / "x.gguf", pre="smaug-bpe", add_bos=False)  # a fix to write
    corpus = tmp_path / "o" / "c.jsonl"
    corpus.write_text('{"id": "z", "text": " zebra"}\n')
    target = plant(tmp_path / "target", kind)
    mode = target.lstat().st_mode
    outputs = {"--out": str(tmp_path / "x.fixed.gguf"), "--json": str(tmp_path / "repair.json"), option: str(target)}
    started = time.monotonic()
    done = harness("repair", str(gguf), "--reference", f"hf:{original.parent}", "--no-default-corpora",
                   "--corpus", str(corpus), "--out", outputs["--out"], "--json", outputs["--json"])
    assert_refused(done, option, target, started)
    assert target.lstat().st_mode == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o", "target", "x.gguf"]


def test_repair_refuses_proc_self_fd_1_that_is_a_pipe(tmp_path):
    """issue 47: `--json /proc/self/fd/1` exited 0 and left a regular file in its place."""
    gguf = tiny_gguf(tmp_path / "x.gguf")
    started = time.monotonic()
    done = harness("repair", str(gguf), "--reference", f"hf:{tmp_path}", "--out", str(tmp_path / "y.gguf"),
                   "--json", "/proc/self/fd/1")
    assert_refused(done, "--json", Path("/proc/self/fd/1"), started)
    assert "is a link to a FIFO" in done.stderr


def test_repair_refuses_a_json_that_is_its_input(tmp_path):
    gguf = tiny_gguf(tmp_path / "x.gguf")
    before = gguf.read_bytes()
    done = harness("repair", str(gguf), "--reference", f"hf:{tmp_path}", "--out", str(tmp_path / "y.gguf"),
                   "--json", str(gguf))
    assert done.returncode == 2 and "must be another file" in done.stderr and gguf.read_bytes() == before


@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-null"])
def test_merge_reports_refuses_a_report_file_that_is_no_file(tmp_path, kind):
    reporting.write(reporting.build([ModelResult("qwen2", "bpe", cases=1)], meta={}), tmp_path / "a")
    out = tmp_path / "m"
    out.mkdir()
    target = plant(out / "report.html", kind)
    started = time.monotonic()
    done = harness("merge-reports", str(tmp_path / "a"), "--out", str(out))
    assert_refused(done, "--out", out, started)
    assert sorted(p.name for p in out.iterdir()) == [".lock", "report.html"] or \
        sorted(p.name for p in out.iterdir()) == ["report.html"]
    assert not target.is_file() or target.is_symlink()


def test_selftest_refuses_a_report_file_that_is_no_file_before_any_mutant(tmp_path):
    from harness.selftest.mutants import load
    report = tmp_path / "r"
    report.mkdir()
    plant(report / "selftest.html", "fifo")
    started = time.monotonic()
    done = harness("selftest", "--mutant", load()[0].id, "--report", str(report))
    assert_refused(done, "--report", report, started)
    assert sorted(p.name for p in report.iterdir()) == ["selftest.html"]


@pytest.mark.parametrize(("command", "option", "inner"), [
    (["chat"], "--report", "messages.json"), (["drift"], "--report", None),
    (["record", "--model", "llama-spm"], "--out", None),
])
@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-null"])
def test_chat_drift_and_record_outputs_are_checked_before_any_work(tmp_path, command, option, inner, kind):
    target = tmp_path / "out"
    if inner:  # the folder is fine, the file the command writes in it is not
        target.mkdir()
        refused = plant(target / inner, kind)
    else:
        refused = plant(target, kind)
    started = time.monotonic()
    done = harness(*command, option, str(target))
    assert_refused(done, option, refused, started)
