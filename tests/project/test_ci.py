"""The CI matrix: tools/matrix_local.py, the workflows it mirrors, the shared Hypothesis examples.

The script's logic is checked with a recording runner (no nox, no llama.cpp): the
commands a shard runs, what the merge folds, that the merge's exit status is the
script's, and the job summary. The workflows are checked to call the script for
their shard and merge steps (actionlint, in `nox -s lint`, checks their syntax).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.inputs import fuzz

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"


def _load_script():
    spec = importlib.util.spec_from_file_location("matrix_local", ROOT / "tools" / "matrix_local.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


matrix = _load_script()


class Recorder:
    """A runner that records each command and answers with a canned exit status."""

    def __init__(self, status: int = 0) -> None:
        self.calls: list[tuple[list[str], dict[str, str]]] = []
        self.status = status

    def __call__(self, argv, env) -> int:
        self.calls.append((list(argv), dict(env)))
        return self.status


def test_shard_step_runs_the_parity_session_with_the_shard_set():
    runner = Recorder()
    assert matrix.main(["shard", "2/3"], runner=runner) == 0
    assert runner.calls == [(["./quickstart.sh", "parity"], {"GGUF_PARITY_SHARD": "2/3"})]


@pytest.mark.parametrize("bad", ["0/3", "4/3", "x"])
def test_shard_step_refuses_a_bad_shard(bad):
    with pytest.raises(SystemExit, match="error: shard"):
        matrix.main(["shard", bad], runner=Recorder())


def write_report(folder: Path, **summary) -> Path:
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({"meta": {"merged": ["a", "b"]}, "summary": summary}))
    return folder


def test_merge_folds_every_report_below_root_but_its_own_output(tmp_path):
    parts = [write_report(tmp_path / "parity-shard-1" / "golden"), write_report(tmp_path / "parity-shard-1" / "live"),
             write_report(tmp_path / "parity-shard-2" / "live")]
    write_report(tmp_path / "merged")  # an earlier merge: not folded again
    runner = Recorder(status=1)
    assert matrix.main(["merge", "--root", str(tmp_path), "--python", "py", "--summary", str(tmp_path / "s.md")],
                       runner=runner) == 1
    argv, _ = runner.calls[0]
    assert argv == ["py", "-m", "harness", "merge-reports", *map(str, parts), "--out", str(tmp_path / "merged")]


def test_merge_writes_verdict_and_counts_as_the_job_summary(tmp_path):
    write_report(tmp_path / "p1")
    write_report(tmp_path / "merged", models=19, cases=1000, passed=990, failing_cases=10, mismatches=12,
                 per_family={"spm": {"models": 5, "cases": 400, "failing_cases": 10, "pass_rate": 0.975}})
    summary = tmp_path / "summary.md"
    assert matrix.main(["merge", "--root", str(tmp_path), "--summary", str(summary)], runner=Recorder(1)) == 1
    text = summary.read_text()
    assert "findings" in text and "| 19 | 1000 | 990 | 10 | 12 |" in text and "| spm | 5 | 400 | 10 | 0.975 |" in text


def test_merge_refusal_is_the_scripts_exit_status(tmp_path):
    write_report(tmp_path / "p1")
    summary = tmp_path / "summary.md"
    assert matrix.main(["merge", "--root", str(tmp_path), "--summary", str(summary)], runner=Recorder(2)) == 2
    assert "merge failed (exit 2)" in summary.read_text()


def test_merge_with_nothing_to_merge_exits_2(tmp_path, capsys):
    assert matrix.main(["merge", "--root", str(tmp_path)], runner=Recorder()) == 2
    assert "no shard report" in capsys.readouterr().err


def test_all_runs_each_shard_as_its_own_process_then_merges_only_this_runs_shards(tmp_path, monkeypatch):
    monkeypatch.setattr(matrix, "ROOT", tmp_path)
    for k in (1, 2):
        write_report(tmp_path / "reports" / "parity" / f"shard-{k}-of-2" / "live")
    write_report(tmp_path / "reports" / "parity" / "live")            # an unsharded run's part
    write_report(tmp_path / "reports" / "parity" / "shard-1-of-3" / "live")  # an older 3-shard run
    runner = Recorder()
    assert matrix.main(["all", "--shards", "2"], runner=runner) == 0
    shards = [argv[2:] for argv, _ in runner.calls[:2]]
    assert shards == [["shard", "1/2", "--session", "parity"], ["shard", "2/2", "--session", "parity"]]
    assert runner.calls[0][0][1].endswith("matrix_local.py")
    merged = runner.calls[2][0]
    assert merged[0] == str(tmp_path / ".nox" / "parity" / "bin" / "python")  # the venv the shards made
    assert merged[3] == "merge-reports" and merged[4:6] == [
        str(tmp_path / "reports" / "parity" / f"shard-{k}-of-2" / "live") for k in (1, 2)]


def test_pin_is_the_noxfile_pin():
    from harness.models.shipped import LLAMA_CPP_PYTHON_VERSION
    assert matrix.pinned_version() == LLAMA_CPP_PYTHON_VERSION  # one cache key for the wheel and the vocabularies


def test_workflows_call_the_scripts_steps():
    nightly = (WORKFLOWS / "nightly.yml").read_text()
    assert 'python tools/matrix_local.py shard "${{ matrix.shard }}/${{ strategy.job-total }}"' in nightly
    assert "python tools/matrix_local.py merge --root shard-reports" in nightly
    assert "GGUF_PARITY_HYPOTHESIS_GITHUB" in nightly and "name: hypothesis-example-db" in nightly
    ci = (WORKFLOWS / "ci.yml").read_text()
    assert "./quickstart.sh lint" in ci and "./quickstart.sh tests" in ci


def test_shared_examples_are_read_only_and_beside_the_local_ones(monkeypatch, tmp_path):
    from hypothesis.database import GitHubArtifactDatabase, MultiplexedDatabase, ReadOnlyDatabase
    monkeypatch.setenv(fuzz.DB_ENV, str(tmp_path / "db"))
    monkeypatch.setenv(fuzz.GITHUB_ENV, "owner/repo")
    db = fuzz.example_database()
    assert isinstance(db, MultiplexedDatabase)
    shared = fuzz.shared_database("owner/repo/other-db")
    assert isinstance(shared, ReadOnlyDatabase)
    shared.save(b"k", b"v")  # read-only: ignored, never an upload
    inner = GitHubArtifactDatabase("owner", "repo", artifact_name="other-db")
    assert repr(inner) in repr(shared)
    monkeypatch.delenv(fuzz.GITHUB_ENV)
    assert not isinstance(fuzz.example_database(), MultiplexedDatabase)


@pytest.mark.parametrize("spec", ["owner", "a/b/c/d", "/repo"])
def test_a_malformed_shared_database_is_a_setup_error(spec):
    with pytest.raises(SetupError, match="OWNER/REPO"):
        fuzz.shared_database(spec)


def test_nox_parity_sessions_pass_the_shard_and_leave_the_merge(tmp_path, monkeypatch):
    pytest.importorskip("nox")
    import sys
    sys.path.insert(0, str(ROOT))
    try:
        import noxfile
    finally:
        sys.path.remove(str(ROOT))

    class Session:
        name = "parity"

        def __init__(self) -> None:
            self.calls: list[tuple[str, ...]] = []

        def run(self, *args, **kwargs):
            self.calls.append(args)
            if "--report" in args:  # what the harness would write: a clean report
                out = Path(args[args.index("--report") + 1])
                out.mkdir(parents=True)
                (out / "report.json").write_text(json.dumps({"summary": {}}))

    monkeypatch.chdir(tmp_path)
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "x.json").write_text("{}")
    monkeypatch.setattr(noxfile, "SHARD", "2/3")
    session = Session()
    assert noxfile.parity_check(session, selection=["--family", "spm"], fuzz=5, seed="none")
    compare, run = session.calls
    assert compare[3] == "compare" and compare[compare.index("--shard") + 1] == "2/3"
    assert run[3] == "run" and run[run.index("--shard") + 1] == "2/3" and "--seed" not in run
    assert run[run.index("--report") + 1] == str(Path("reports/parity/shard-2-of-3/live"))
    assert not any("merge-reports" in call for call in session.calls)
