"""Paths: both sides open the file the user named, whatever the current directory.

The oracle's workers run in the project root and the engine in the caller's
directory, so a relative `--model` used to name two different files. Now
every path is resolved once, in the parent, to an absolute path, and the
bytes each side read are checked (size and head hash). Expected ids in the
live tests come from llama.cpp, run on the same file as the engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.models import paths as model_paths
from harness.models.paths import check_same, fingerprint, resolve

ROOT = Path(__file__).resolve().parents[2]


def test_a_relative_path_becomes_absolute_against_the_callers_directory(tmp_path: Path, monkeypatch):
    (tmp_path / "x.gguf").write_bytes(b"GGUF")
    monkeypatch.chdir(tmp_path)
    path = resolve("x.gguf")
    assert path.is_absolute() and path == (tmp_path / "x.gguf").resolve()


def test_a_missing_relative_path_is_named_absolutely(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SetupError, match=str(tmp_path / "absent.gguf")):
        resolve("absent.gguf")


def test_the_same_bytes_check(tmp_path: Path, monkeypatch):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGUF" + b"a" * 100)
    before = fingerprint(path)
    check_same(path, before, fingerprint(path), "llama.cpp")
    check_same(path, before, before.as_dict(), "llama.cpp")
    path.write_bytes(b"GGUF" + b"b" * 100)  # same size, other bytes
    with pytest.raises(SetupError, match=r"llama\.cpp did not read the same file"):
        check_same(path, before, fingerprint(path), "llama.cpp")
    monkeypatch.setattr(model_paths, "FINGERPRINT_BYTES", 4)  # beyond the head: the size still tells
    small = fingerprint(path)
    path.write_bytes(b"GGUF" + b"b" * 101)
    with pytest.raises(SetupError):
        check_same(path, small, fingerprint(path), "the engine")


def test_models_and_synth_do_not_import_each_other():
    code = ("import sys\nimport harness.models.shipped\nassert 'harness.models.synth' not in sys.modules\n"
            "import harness.models.synth\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.stdout.strip() == "ok", done.stderr
    synth_text = (ROOT / "harness" / "models" / "synth.py").read_text()
    assert ".paths import" not in synth_text and "import paths" not in synth_text
    assert "import synth" not in (ROOT / "harness" / "models" / "shipped.py").read_text()


# --- live: the regressions of the issue ---------------------------------------------------------

def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600, check=False)


def _corpus(folder: Path) -> Path:
    corpus = folder / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "Hello world"}\n{"id": "b", "text": " tabs\\tand more"}\n')
    return corpus


@pytest.mark.oracle
def test_run_with_a_relative_model_from_another_directory(tmp_path: Path, require_vocab):
    """Was: a false "llama.cpp refuses to load it" (the worker looked in the project root)."""
    shutil.copy(require_vocab("llama-spm"), tmp_path / "x.gguf")
    done = harness("run", "--model", "x.gguf", "--corpus", "c.jsonl", "--no-default-corpora", "--long-docs", "0",
                   "--report", "r", "--quiet", cwd=_corpus(tmp_path).parent)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads((tmp_path / "r" / "report.json").read_text())["summary"]["cases"] == 2


@pytest.mark.oracle
def test_record_with_a_relative_model(tmp_path: Path, require_vocab):
    """Was: a golden whose load_error says "No such file", with exit 0."""
    shutil.copy(require_vocab("llama-spm"), tmp_path / "x.gguf")
    done = harness("record", "--model", "x.gguf", "--corpus", "c.jsonl", "--out", "g",
                   cwd=_corpus(tmp_path).parent)
    assert done.returncode == 0, (done.stdout, done.stderr)
    golden = json.loads((tmp_path / "g" / "x.json").read_text())
    assert golden["load_error"] is None and golden["vocab"] is not None


@pytest.mark.oracle
def test_a_file_of_the_same_name_in_the_project_root_is_not_used(tmp_path: Path, require_vocab):
    """Was: 714 false mismatches, llama.cpp reading the project root's file of that name."""
    name = "h3-same-name-check.gguf"
    decoy = ROOT / name
    shutil.copy(require_vocab("phi-3"), decoy)
    try:
        shutil.copy(require_vocab("llama-spm"), tmp_path / name)
        done = harness("run", "--model", name, "--corpus", "c.jsonl", "--no-default-corpora",
                       "--report", "r", "--quiet", cwd=_corpus(tmp_path).parent)
    finally:
        decoy.unlink()
    assert done.returncode == 0, (done.stdout, done.stderr)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["vocab_mismatches"] == [] and report["mismatches"] == []


@pytest.mark.oracle
def test_the_worker_reports_the_bytes_it_opened(require_vocab):
    from harness.oracle.session import OracleSession

    path = require_vocab("llama-spm")
    with OracleSession(path, timeout=60) as oracle:
        assert oracle.call("fingerprint") == fingerprint(path).as_dict()
