"""`run` and `compare` as pytest users expect them (--lf, --ff, -x/--maxfail, -k), an engine's known
differences (--expected-differences), and reproduce lines that never destroy (issue 43 items 4-5, issue 41
section 6): each through the command line, on llama-spm with the planted engine of tests/broken_engine.py.

Expected outcomes come from the planted faults: a case holding ZQXWRONG loses its last token, one holding
ZQXRAISE makes the engine raise; every other case agrees with llama.cpp.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from harness import cli
from tests.commands.test_run_cli import report_of, write_corpus

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ("--engine", "tests.broken_engine:load")
SHORT = ("--long-docs", "0", "--calls", "0", "--quiet")
CLEAN = [{"id": f"clean-{i:03d}", "text": f"clean text number {i}"} for i in range(140)]
CORPUS = [{"id": "wrong-a", "text": "a ZQXWRONG b"}, *CLEAN, {"id": "raise-z", "text": "ZQXRAISE"}]


class Done:
    """What `python -m harness ARGS` gave, run in this process (no interpreter to start: seconds per test)."""

    def __init__(self, capsys, *args: str) -> None:
        self.returncode = cli.main(list(args))
        captured = capsys.readouterr()
        self.stdout, self.stderr = captured.out, captured.err


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, require_vocab):
    """One whole run: wrong-a (the first case) and raise-z (the last) fail, 140 cases agree."""
    require_vocab("llama-spm")
    folder = tmp_path_factory.mktemp("first")
    corpus = write_corpus(folder / "corpus.jsonl", CORPUS)
    assert cli.main(["run", "--model", "llama-spm", "--corpus", str(corpus), "--no-default-corpora", *ENGINE,
                     "--report", str(folder / "r"), *SHORT]) == 1
    return folder


def again(first: Path, tmp_path: Path) -> Path:
    """A copy of the first run's report folder, for a run that writes over it."""
    return Path(shutil.copytree(first / "r", tmp_path / "r"))


@pytest.mark.oracle
def test_lf_checks_only_the_cases_that_failed_last_time(first_run, tmp_path, capsys):
    """raise-z is no longer in the corpus: --lf takes its input from the report's cases file."""
    folder = again(first_run, tmp_path)
    corpus = write_corpus(tmp_path / "corpus.jsonl", CORPUS[:-1])
    done = Done(capsys, "run", "--model", "llama-spm", "--corpus", str(corpus), "--no-default-corpora", *ENGINE,
                   "--report", str(folder), "--lf", "--quiet")
    assert done.returncode == 1, done.stderr
    report = report_of(folder)
    assert report["summary"]["cases"] == 2 and report["summary"]["failing_cases"] == 2  # no long documents, no calls
    assert report["meta"]["selection"]["last_failed"]["cases"] == 2
    assert "selected: --lf: the 2 case(s) that failed in the last run" in done.stdout


@pytest.mark.oracle
def test_ff_then_x_stops_after_the_first_failing_case_and_says_what_was_not_checked(first_run, tmp_path, capsys,
                                                                                   require_vocab):
    require_vocab("llama-bpe")  # named, never begun: the run stops on llama-spm
    folder = again(first_run, tmp_path)
    done = Done(capsys, "run", "--model", "llama-bpe", "--model", "llama-spm", "--corpus",
                str(first_run / "corpus.jsonl"), "--no-default-corpora", *ENGINE, "--report", str(folder),
                "--ff", "-x", "--fuzz", "3", "--quiet")
    assert done.returncode == 1, done.stderr
    report = report_of(folder)
    assert list(report["summary"]["per_model"]) == ["llama-spm"]  # --ff: the model that failed first
    assert report["summary"]["cases"] == 64 and report["summary"]["failing_cases"] == 2  # one chunk, both failures
    assert report["meta"]["selection"]["stopped"] == {
        "maxfail": 1, "failing_cases": 2, "cases_not_checked": {"llama-spm": 78},
        "phases_not_run": {"llama-spm": ["fuzz", "long documents", "calls"]}, "models_not_started": ["llama-bpe"]}
    assert done.stdout.startswith("differences found")
    assert ("stopped after 2 failing case(s) (--maxfail 1): 78 case(s) not checked, 1 model(s) not started, "
            "the later phases of 1 model(s) not run") in done.stdout


@pytest.mark.oracle
def test_k_selects_cases_by_expression(tmp_path, capsys, require_vocab):
    require_vocab("llama-spm")
    corpus = write_corpus(tmp_path / "corpus.jsonl", CORPUS)
    done = Done(capsys, "run", "--model", "llama-spm", "--corpus", str(corpus), "--no-default-corpora", *ENGINE,
                   "--report", str(tmp_path / "r"), "-k", "(wrong or clean-00) and not clean-001", *SHORT)
    assert done.returncode == 1, done.stderr
    report = report_of(tmp_path / "r")
    assert report["summary"]["cases"] == 10 and report["summary"]["failing_cases"] == 1  # wrong-a, clean-00[02-9]


@pytest.mark.oracle
def test_known_differences_pass_and_a_stale_entry_is_reported_fixed(first_run, tmp_path, capsys):
    tab = next(r["id"] for r in report_of(first_run / "r")["differences"] if r["list"] == "mismatches")
    listed = tmp_path / "known.toml"
    listed.write_text(f'[[difference]]\nsignature = "{tab}"\nreason = "drops the last token"\n\n'
                      '[[difference]]\ncase = "raise-z"\nreason = "raises"\n\n'
                      '[[difference]]\ncase = "clean-005"\nreason = "was fixed long ago"\n', encoding="utf-8")
    done = Done(capsys, "run", "--model", "llama-spm", "--corpus", str(first_run / "corpus.jsonl"),
                   "--no-default-corpora", *ENGINE, "--report", str(tmp_path / "r"),
                   "--expected-differences", str(listed), *SHORT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("no new differences")
    assert f"expected difference case clean-005 no longer differs (fixed? remove it from {listed})" in done.stdout
    report = report_of(tmp_path / "r")
    assert report["summary"]["failing_cases"] == 0 and report["summary"]["known_difference_cases"] == 2
    assert [e["status"] for e in report["expected_differences"]["entries"]] == ["known", "known", "fixed"]
    assert {e["case_id"] for e in report["known_differences"]} == {"wrong-a", "raise-z"}


@pytest.mark.oracle
def test_the_reproduce_lines_of_a_report_run_one_after_another(tmp_path, capsys, monkeypatch, require_vocab):
    """Run, then every reproduce line the report prints, as printed, in the default report folder: each writes
    a folder of its own and reproduces its difference; the report and its cases file stay as they were."""
    require_vocab("llama-spm")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the engine's child imports tests.broken_engine from elsewhere
    monkeypatch.chdir(tmp_path)  # the report goes to the default folder, reports/run, as a user's would
    corpus = write_corpus(tmp_path / "corpus.jsonl", CORPUS[:3] + CORPUS[-1:])
    first = Done(capsys, "run", "--model", "llama-spm", "--corpus", str(corpus), "--no-default-corpora", *ENGINE,
                 *SHORT)
    assert first.returncode == 1, first.stderr
    folder = tmp_path / "reports" / "run"
    before = {name: (folder / name).read_bytes() for name in ("report.json", "cases/llama-spm.jsonl")}
    report = report_of(folder)
    lines = [e["command"] for e in report["mismatches"] + report["engine_errors"]]
    lines = list(dict.fromkeys(lines))  # one per case: wrong-a, raise-z
    assert len(lines) == 2 and all(" --report " in line for line in lines)
    for line in lines:
        argv = shlex.split(line)
        assert argv[:3] == ["python", "-m", "harness"]
        done = Done(capsys, *argv[3:], "--quiet")
        assert done.returncode == 1, f"{line}\n{done.stderr}"
        own = Path(argv[argv.index("--report") + 1])
        assert own.parent == folder / "reproduce" and report_of(own)["summary"]["cases"] == 1
    assert {name: (folder / name).read_bytes() for name in before} == before


@pytest.mark.oracle
def test_compare_stops_at_maxfail_and_lf_replays_only_what_failed(tmp_path, capsys, require_vocab):
    """The golden replay takes the same options: load_tab loses the last token of any input holding a tab."""
    require_vocab("llama-spm")
    golden = tmp_path / "g"
    golden.mkdir()
    shutil.copy(ROOT / "golden" / "ggml-vocab-llama-spm.json", golden)
    args = ("compare", "--golden", str(golden), "--engine", "tests.broken_engine:load_tab",
            "--report", str(tmp_path / "r"), "--quiet")
    stopped = Done(capsys, *args, "--maxfail", "1")
    assert stopped.returncode == 1, stopped.stderr
    report = report_of(tmp_path / "r")
    left = report["meta"]["selection"]["stopped"]["cases_not_checked"]["llama-spm"]
    assert report["summary"]["cases"] + left == 279 and left > 0 and "case(s) not checked" in stopped.stdout
    failed = report["summary"]["failing_cases"]
    lf = Done(capsys, *args, "--lf")
    assert lf.returncode == 1, lf.stderr
    assert report_of(tmp_path / "r")["summary"]["cases"] == failed

