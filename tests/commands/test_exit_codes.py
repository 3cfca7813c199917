"""Exit codes and set-up errors: 0 all checked and matching, 1 differences,
2 usage/set-up/input error as ONE line naming the thing (never a traceback; `--debug` shows one),
3 a bug of ours. And `python -m harness fetch --help` imports only what fetch needs.

None of these needs llama.cpp: every error here is found before a worker starts.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pandas", "hypothesis", "jinja2", "numpy", "tokenizer", "llama_cpp", "jsonschema")


def harness(*args: str, cwd: Path = ROOT, path: str = "", env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m harness ARGS` in a subprocess; `path` is put on PYTHONPATH after the checkout."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), path]))}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300, check=False)


def assert_one_line_error(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def run_main(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(list(args))
    return code, capsys.readouterr().err


def test_fetch_help_imports_nothing_heavy():
    code = ("import sys\nfrom harness.cli import main\ntry:\n    main(['fetch', '--help'])\n"
            "except SystemExit:\n    pass\nprint(sorted(m for m in " + repr(HEAVY) + " if m in sys.modules),"
            " file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


@pytest.mark.parametrize("command", ["run", "compare", "record", "drift", "merge-reports", "inspect"])
def test_help_of_a_command_imports_no_pandas_hypothesis_or_llama(command: str):
    code = (f"import sys\nfrom harness.cli import main\ntry:\n    main([{command!r}, '--help'])\n"
            "except SystemExit:\n    pass\nprint(sorted(m for m in ('pandas', 'hypothesis', 'jinja2', "
            "'llama_cpp') if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_engine_module_raising_on_import_is_one_line(tmp_path: Path):
    (tmp_path / "bad_engine.py").write_text("raise RuntimeError('no GPU here\\nsecond line')\n")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    done = harness("run", "--model", str(model), "--engine", "bad_engine:load", "--report", str(tmp_path / "r"),
                   path=str(tmp_path))
    assert_one_line_error(done, "bad_engine", "RuntimeError: no GPU here")


def test_corpus_with_invalid_utf8_is_exit_2(tmp_path: Path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b'{"id": "a", "text": "\xc3\x28"}\n')
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    done = harness("run", "--model", str(model), "--corpus", str(corpus), "--no-default-corpora",
                   "--report", str(tmp_path / "r"))
    assert_one_line_error(done, "c.jsonl:1", "not UTF-8")


def test_an_empty_corpus_is_not_a_pass(tmp_path: Path):
    corpus = tmp_path / "empty.jsonl"
    corpus.write_text("")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    done = harness("run", "--model", str(model), "--corpus", str(corpus), "--no-default-corpora",
                   "--report", str(tmp_path / "r"))
    assert_one_line_error(done, "no cases to check")
    assert "all match" not in done.stdout


def test_an_unknown_case_id_is_exit_2(tmp_path: Path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "x"}\n')
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    done = harness("run", "--model", str(model), "--corpus", str(corpus), "--no-default-corpora",
                   "--case", "nope", "--report", str(tmp_path / "r"))
    assert_one_line_error(done, "no case with id 'nope'")


def test_fetch_with_a_bad_sdist_is_exit_2(tmp_path: Path):
    sdist = tmp_path / "llama_cpp_python-X.Y.Z.tar.gz"
    sdist.write_bytes(b"not a tarball")
    done = harness("fetch", "--sdist", str(sdist), env={"GGUF_PARITY_CACHE": str(tmp_path / "cache")})
    assert_one_line_error(done, str(sdist), "not a readable")


def test_inspect_on_an_unreadable_file_is_exit_2(tmp_path: Path, capsys, monkeypatch):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")

    def denied(path):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))
    monkeypatch.setattr("harness.models.summary.read", denied)
    code, err = run_main(capsys, "inspect", str(model))
    assert code == 2 and "m.gguf: cannot read it (Permission denied)" in err and "Traceback" not in err


@pytest.mark.parametrize("content", [b"", b"not a gguf at all", b"GGUF\x03\x00\x00\x00"],
                         ids=["empty", "text", "truncated"])
def test_inspect_on_a_non_gguf_file_is_exit_2(tmp_path: Path, capsys, content: bytes):
    model = tmp_path / "m.gguf"
    model.write_bytes(content)
    code, err = run_main(capsys, "inspect", str(model))
    assert code == 2 and err.count("\n") == 1 and "m.gguf" in err


def test_record_on_an_unreadable_file_is_exit_2(tmp_path: Path, capsys, monkeypatch):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")

    def denied(path):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))
    monkeypatch.setattr("harness.commands.record.file_info", denied)
    code, err = run_main(capsys, "record", "--model", str(model), "--out", str(tmp_path / "g"))
    assert code == 2 and err.startswith("error: ") and "Permission denied" in err and "Traceback" not in err


def _golden_dir(tmp_path: Path, name: str, data: bytes) -> Path:
    folder = tmp_path / "golden"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    return folder


BAD_GOLDENS = {
    "dangling-as": ("g.json", json.dumps({"cases": [{"id": "c", "text": "x", "encode": [{"as": 5}] * 4}]}).encode()),
    "bad-zlib": ("g.json.gz", gzip.compress(b'{"cases": []}')[:10] + b"\xff" * 30),
    "deep-nesting": ("g.json", b"[" * 100_000 + b"]" * 100_000),
    "not-json": ("g.json", b"{oops"),
}


@pytest.mark.parametrize("kind", sorted(BAD_GOLDENS))
def test_compare_on_a_bad_golden_is_one_line(tmp_path: Path, capsys, kind: str):
    folder = _golden_dir(tmp_path, *BAD_GOLDENS[kind])
    code, err = run_main(capsys, "compare", "--golden", str(folder), "--report", str(tmp_path / "r"), "--quiet")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("kind", sorted(BAD_GOLDENS))
def test_drift_on_a_bad_golden_is_one_line(tmp_path: Path, capsys, kind: str):
    folder = _golden_dir(tmp_path, *BAD_GOLDENS[kind])
    code, err = run_main(capsys, "drift", "--golden", str(folder))
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err


def test_debug_shows_the_traceback(tmp_path: Path, capsys):
    folder = _golden_dir(tmp_path, *BAD_GOLDENS["not-json"])
    code, err = run_main(capsys, "--debug", "drift", "--golden", str(folder))
    assert code == 2 and "Traceback" in err and err.rstrip().splitlines()[-1].startswith("error: ")


def test_a_bug_of_ours_is_exit_3_with_its_traceback(capsys, monkeypatch):
    def broken(args):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr("harness.commands.fetch.run", broken)
    code, err = run_main(capsys, "fetch")
    assert code == 3 and "Traceback" in err and "internal error" in err


def test_an_unwritable_report_folder_is_refused_before_the_run(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    done = harness("run", "--model", str(model), "--report", str(blocker / "r"))
    assert_one_line_error(done, "--report", "not writable")


def readme_exit_table() -> dict[str, str]:
    """The README's "Exit codes" table: code cell -> meaning."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Exit codes\n"):]
    section = section[:section.find("\n## ", 1)]
    return dict(re.findall(r"^\| ([\d /]+) \| (.+) \|$", section, flags=re.M))


def test_the_readme_and_help_give_the_same_exit_codes():
    from harness.errors import EXIT_CODES
    in_readme = {int(code) for cell in readme_exit_table() for code in cell.split(" / ")}
    assert in_readme == set(EXIT_CODES)
    assert all(str(code) in cli.EXIT_HELP for code in EXIT_CODES)


def test_every_command_help_ends_with_the_exit_codes():
    out = harness("compare", "--help")
    assert out.returncode == 0
    assert out.stdout.rstrip().endswith(cli.EXIT_HELP.splitlines()[-1].strip())
