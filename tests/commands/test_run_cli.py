"""`python -m harness run`: the done criteria of the differential harness.

- a deliberately broken engine (tests/broken_engine.py) has exactly its broken cases flagged, exit 1;
- the fuzzer finds a planted fault by itself, shrinks it to the minimal input and saves it;
- a vocabulary on which llama.cpp aborts gives a report with the crash and exit 1, no traceback;
- our engine on llama-spm exits 0;
- usage and set-up errors exit 2 with a one-line explanation.

Expected outcomes come from the planted faults (broken_engine.py) and from llama.cpp itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = [
    {"id": "clean-1", "text": "Hello world"},
    {"id": "wrong-1", "text": "a ZQXWRONG b"},
    {"id": "clean-2", "text": "  tabs\tand\nnewlines"},
    {"id": "raise-1", "text": "ZQXRAISE"},
    {"id": "wrong-2", "text": "ZQXWRONG"},
    {"id": "clean-3", "bytes": "ff8041"},
]


def harness(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600, check=False)


def write_corpus(path: Path, cases: list[dict]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


def report_of(directory: Path) -> dict:
    return json.loads((directory / "report.json").read_text(encoding="utf-8"))


@pytest.mark.oracle
def test_broken_engine_flags_exactly_its_broken_cases(tmp_path, require_vocab):
    require_vocab("llama-spm")
    corpus = write_corpus(tmp_path / "c.jsonl", CORPUS)
    # no long documents: they are composed of the corpus's texts, planted faults among them (tested apart)
    done = harness("run", "--model", "llama-spm", "--corpus", str(corpus), "--no-default-corpora", "--long-docs", "0",
                   "--engine", "tests.broken_engine:load", "--report", str(tmp_path / "r"),
                   "--found-dir", str(tmp_path / "found"))
    assert done.returncode == 1, done.stderr
    report = report_of(tmp_path / "r")
    assert {m["case_id"] for m in report["mismatches"]} == {"wrong-1", "wrong-2"}
    assert len(report["mismatches"]) == 8  # all four flag combinations of both
    assert [e["case_id"] for e in report["engine_errors"]] == ["raise-1"]
    assert report["summary"]["cases"] == 6 and report["summary"]["failing_cases"] == 3
    assert report["oracle_crashes"] == [] and report["vocab_mismatches"] == []
    assert done.stdout.startswith("differences found")


@pytest.mark.oracle
def test_reproduce_command_replays_the_case(tmp_path, require_vocab):
    require_vocab("llama-spm")
    corpus = write_corpus(tmp_path / "c.jsonl", CORPUS)
    first = harness("run", "--model", "llama-spm", "--corpus", str(corpus), "--no-default-corpora",
                    "--engine", "tests.broken_engine:load", "--report", str(tmp_path / "r"), "--quiet")
    assert first.returncode == 1
    command = report_of(tmp_path / "r")["mismatches"][0]["command"]
    argv = command.split()[3:]  # drop "python -m harness"
    argv[argv.index("--corpus") + 1] = str(tmp_path / "r" / "cases" / "llama-spm.jsonl")
    again = harness(*argv, "--report", str(tmp_path / "again"), "--quiet")
    assert again.returncode == 1
    replay = report_of(tmp_path / "again")
    assert replay["summary"]["cases"] == 1
    assert {m["case_id"] for m in replay["mismatches"]} == {"wrong-1"}


@pytest.mark.oracle
def test_fuzz_finds_shrinks_and_saves_a_planted_fault(tmp_path, require_vocab):
    require_vocab("llama-spm")
    found = tmp_path / "found"
    args = ("run", "--model", "llama-spm", "--no-default-corpora", "--fuzz", "40", "--seed", "3",
            "--engine", "tests.broken_engine:load_tab", "--found-dir", str(found), "--quiet")
    done = harness(*args, "--report", str(tmp_path / "r1"))
    assert done.returncode == 1, done.stderr
    report = report_of(tmp_path / "r1")
    # Shrunk: one short input with the planted trigger (a tab). Where the shrinker stops depends on
    # the strategies' draws ("\t", or "<unk>\t" since the Unicode-table strategies), not on the fault.
    # The hunt goes on after it: every other input with a tab is counted under the same difference.
    saved = [json.loads(line) for line in (found / "llama-spm.jsonl").read_text().splitlines()]
    [shrunk] = [c["text"] for c in saved]
    assert "\t" in shrunk and len(shrunk) <= 8, shrunk
    assert shrunk in {m["text"] for m in report["mismatches"]}
    assert len({m["signature"] for m in report["mismatches"]}) == 1
    harness(*args, "--report", str(tmp_path / "r2"))
    assert report_of(tmp_path / "r2")["summary"]["cases"] == report["summary"]["cases"]  # --seed reproduces


@pytest.mark.oracle
def test_llama_cpp_abort_is_a_reported_crash(tmp_path):
    from harness.models import synth
    try:
        path = synth.write("pre-whitespace", tmp_path)
    except Exception as exc:  # noqa: BLE001 - needs the shipped vocabularies
        pytest.skip(f"cannot build the pre-whitespace vocabulary ({exc}); run: python -m harness fetch")
    corpus = write_corpus(tmp_path / "c.jsonl", [
        {"id": "plain", "text": "Hello"},
        {"id": "double-space", "text": "Hello  world"},
        {"id": "after", "text": "still going"},
    ])
    done = harness("run", "--model", str(path), "--corpus", str(corpus), "--no-default-corpora", "--long-docs", "0",
                   "--engine", "tests.broken_engine:load_stub", "--report", str(tmp_path / "r"),
                   "--known-crashes", "none")  # a new crash (this one is on the shipped list)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    report = report_of(tmp_path / "r")
    crashes = report["oracle_crashes"]
    assert [c["case_id"] for c in crashes] == ["double-space"]
    assert crashes[0]["crash"]["reason"] == "killed by SIGABRT"
    assert "GGML_ASSERT" in crashes[0]["crash"]["stderr"]
    assert report["summary"]["cases"] == 3  # the run went on after the crash
    assert "double-space" in (tmp_path / "r" / "report.html").read_text(encoding="utf-8")


def _bogus_vocab(tmp_path) -> Path:
    from harness.models import synth
    try:
        return synth.write("model-bogus", tmp_path)
    except Exception as exc:  # noqa: BLE001 - needs the shipped vocabularies
        pytest.skip(f"cannot build the model-bogus vocabulary ({exc}); run: python -m harness fetch")


@pytest.mark.oracle
@pytest.mark.parametrize(("engine", "extra", "code", "loads"), [
    # both refusing is "not checked" (exit 2) unless the run expects refusals
    pytest.param("tokenizer:Tokenizer.from_gguf", [], 2, False, id="both-refuse"),
    pytest.param("tokenizer:Tokenizer.from_gguf", ["--expect-refusal"], 0, False, id="both-refuse-expected"),
    pytest.param("tests.broken_engine:load_stub", [], 1, True, id="engine-accepts"),
])
def test_a_file_llama_cpp_refuses(tmp_path, engine, extra, code, loads):
    pytest.importorskip("tokenizer.api", reason="tokenizer.Tokenizer has not landed yet")
    path = _bogus_vocab(tmp_path)
    corpus = write_corpus(tmp_path / "c.jsonl", CORPUS[:1])
    done = harness("run", "--model", str(path), "--corpus", str(corpus), "--no-default-corpora",
                   "--engine", engine, "--report", str(tmp_path / "r"), "--quiet", *extra)
    assert done.returncode == code, done.stdout + done.stderr
    report = report_of(tmp_path / "r")
    assert [v["field"] for v in report["vocab_mismatches"]] == (["load"] if loads else [])
    assert report["engine_errors"] == [] and report["oracle_crashes"] == []


@pytest.mark.oracle
def test_our_engine_on_llama_spm_matches(tmp_path, require_vocab):
    require_vocab("llama-spm")
    pytest.importorskip("tokenizer.api", reason="tokenizer.Tokenizer has not landed yet")
    corpus = write_corpus(tmp_path / "c.jsonl", CORPUS)
    done = harness("run", "--model", "llama-spm", "--corpus", str(corpus), "--fuzz", "10", "--seed", "1",
                   "--found-dir", str(tmp_path / "found"), "--report", str(tmp_path / "r"), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = report_of(tmp_path / "r")["summary"]
    assert summary["mismatches"] == 0 and summary["cases"] > 200  # .inp vectors, edge, prose, vocab, fuzz


@pytest.mark.parametrize("args", [
    pytest.param(("run",), id="no-model"),
    pytest.param(("run", "--model", "no-such-vocab"), id="unknown-model"),
    pytest.param(("run", "--model", "llama-spm", "--engine", "nosuchmodule:load"), id="bad-engine"),
    pytest.param(("run", "--model", "llama-spm", "--engine", "no-colon"), id="engine-syntax"),
    pytest.param(("run", "--model", "llama-spm", "--corpus", "/nonexistent.jsonl"), id="missing-corpus"),
])
def test_usage_errors_exit_2_with_one_line(args, tmp_path):
    done = harness(*args, "--report", str(tmp_path / "r"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr



def test_models_then_families_in_order_each_once(monkeypatch):
    """`--model` names first, then each `--family`'s members in order; a name given twice is checked once."""
    import argparse

    from harness.errors import SetupError
    from harness.models import families
    from harness.runs.config import selected_models

    def chosen(models, fams, **kwargs):
        return selected_models(argparse.Namespace(model=models, family=fams), **kwargs)

    assert chosen(["phi-3", "gpt-2"], ["spm", "wpm", "spm"]) == ("phi-3", "gpt-2", "llama-spm", "baichuan", "bert-bge")
    assert chosen([], [], required=False) == ()
    with pytest.raises(SetupError, match="give --model"):
        chosen([], [])
    monkeypatch.setitem(families.FAMILIES, "empty", ())
    with pytest.raises(SetupError, match="family empty has no models yet"):
        chosen(["gpt-2"], ["empty"])

# --- progress output ---------------------------------------------------------------------------

class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def write(self, s: str) -> None:
        self.text += s

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [pytest.param(True, id="tty-bar"), pytest.param(False, id="plain-lines")])
def test_progress(tty):
    from harness.runs.progress import Progress
    stream = _Stream(tty)
    with Progress(total=50, label="llama-spm", stream=stream) as bar:
        for _ in range(50):
            bar.advance(note="0 failing")
    if tty:
        assert "\r" in stream.text and "[" + "#" * 28 + "]" in stream.text and stream.text.endswith("\n")
    else:
        lines = stream.text.splitlines()
        assert "\r" not in stream.text and 2 <= len(lines) <= 12
        assert lines[-1].startswith("llama-spm 50/50 (100%")
