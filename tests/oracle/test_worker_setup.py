"""Set-up errors that surface in a llama.cpp worker are exit 2 with one line, not llama.cpp crashes.

A worker that cannot import llama-cpp-python used to die with exit 1 while
loading, which `record` wrote into the golden as a "loading crashed" finding
(or, without llama-cpp-python in the parent either, ended in a traceback).
The worker now says what is missing and the command stops with exit 2.
A fake `llama_cpp` package that fails to import stands in for a missing
install, so the test runs with or without the real one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.models import synth


@pytest.fixture()
def no_llama_cpp(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "fake" / "llama_cpp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('llama_cpp is broken here')\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))  # workers put it on their path before site-packages


@pytest.fixture()
def vocab(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(synth.custom(["a", "b", "ab"], model="rwkv"))
    return path


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_record_with_a_worker_without_llama_cpp_is_a_setup_error(no_llama_cpp, vocab, tmp_path, capsys):
    golden = tmp_path / "golden"
    assert main(["record", "--model", str(vocab), "--out", str(golden)]) == 2
    assert "cannot import llama-cpp-python" in one_line(capsys)
    assert not golden.exists()


@pytest.mark.oracle
def test_drift_with_a_worker_without_llama_cpp_is_a_setup_error(vocab, tmp_path, monkeypatch, capsys):
    golden, corpus = tmp_path / "golden", tmp_path / "one.jsonl"
    corpus.write_text('{"id": "ab", "text": "ab"}\n', encoding="utf-8")
    assert main(["record", "--model", str(vocab), "--corpus", str(corpus), "--out", str(golden)]) == 0
    capsys.readouterr()
    no_llama = tmp_path / "fake" / "llama_cpp"
    no_llama.mkdir(parents=True)
    (no_llama / "__init__.py").write_text("raise ImportError('llama_cpp is broken here')\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(no_llama.parent))
    assert main(["drift", "--golden", str(golden), "--models-dir", str(vocab.parent)]) == 2
    assert "cannot import llama-cpp-python" in one_line(capsys)


@pytest.mark.parametrize("content", [b'{"version": 1', b"\x1f\x8b not gzip", b"[]"], ids=["cut", "bad-gzip", "list"])
def test_drift_skips_a_bad_golden_with_one_line_and_exit_2(content, tmp_path, capsys):
    golden = tmp_path / "golden"
    golden.mkdir()
    (golden / "bad.json").write_bytes(content)
    assert main(["drift", "--golden", str(golden)]) == 2
    captured = capsys.readouterr()
    err, out = captured.err.splitlines(), captured.out.splitlines()
    assert len(err) == 1 and err[0].startswith("error: bad.json: skipped: ") and str(golden / "bad.json") in err[0], err
    assert out[-1] == "drift: no change in 0 golden file(s); 1 skipped"
