"""`run --baseline` end to end on llama.cpp's ids: a planted engine's difference carried into the next run,
fixed by a clean engine, unchanged with the same bug (exit 0), new against a clean baseline (exit 1); `diff`
on the reports; and every report's `meta` (commit, builds, date, duration, seed, host).

The engine is llama.cpp itself with one planted bug (tests/broken_engine.py: a lone tab given the newline's
id). The second corpus holds no tab: a baseline's difference is re-checked only because its input is carried in.
"""

from __future__ import annotations

import json
import re

import pytest

from harness.cli import main

pytestmark = pytest.mark.oracle

CORPORA = {"tabs": ["\t", "hello", "tab\t\tpair\tend"], "plain": ["hello world", "no tabs here"]}
PLANTED, CLEAN = "tests.broken_engine:load_tab_as_newline", "tests.broken_engine:load_clean"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, require_vocab_module):
    """name -> (exit status, report.json, stdout) of the four runs, each against the one before it."""
    folder = tmp_path_factory.mktemp("baseline")
    for name, texts in CORPORA.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps({"id": f"{name}-{i}", "text": t}) + "\n"
                                                      for i, t in enumerate(texts)), encoding="utf-8")
    out = {}
    for name, engine, corpus, baseline in (("a", PLANTED, "tabs", None), ("fixed", CLEAN, "plain", "a"),
                                           ("same", PLANTED, "plain", "a"), ("new", PLANTED, "tabs", "fixed")):
        argv = ["run", "--model", "llama-spm", "--corpus", str(folder / f"{corpus}.jsonl"), "--no-default-corpora",
                "--engine", engine, "--report", str(folder / name), "--quiet", "--no-messages", "--calls", "0",
                "--long-docs", "0", *(["--baseline", str(folder / baseline)] if baseline else [])]
        captured: list[str] = []
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("builtins.print", lambda *a, _to=captured, **k: _to.append(" ".join(map(str, a))))
            status = main(argv)
        out[name] = status, json.loads((folder / name / "report.json").read_text()), "\n".join(captured)
    out["folder"] = folder
    return out


@pytest.fixture(scope="module")
def require_vocab_module():
    from harness.models.shipped import models_dir
    if not (models_dir() / "ggml-vocab-llama-spm.gguf").is_file():
        pytest.skip("vocabularies not fetched: python -m harness fetch")


def test_a_fix_is_fixed_and_exits_0(runs):
    status, report, out = runs["fixed"]
    block = report["baseline"]
    assert status == 0 and block["counts"] == {"new": 0, "fixed": 1, "unchanged": 0, "not_rechecked": 0}
    [fixed] = block["fixed"]
    assert fixed["id"] == runs["a"][1]["differences"][0]["id"] and fixed["case_id"] == "tabs-0"
    assert block["carried"] == 1 and report["summary"]["cases"] == 3, "the representative's input, carried in"
    assert "fixed 1" in out and "no longer shows it" in out


def test_the_same_bug_is_unchanged_and_exits_0(runs):
    status, report, _ = runs["same"]
    assert report["summary"]["failing_cases"] == 1, "the carried input still fails"
    assert status == 0 and report["baseline"]["counts"]["unchanged"] == 1 and report["baseline"]["counts"]["new"] == 0
    assert [r["baseline"] for r in report["differences"]] == ["unchanged"]


def test_a_new_difference_exits_1_and_is_printed_first_with_its_reproduce_line(runs):
    status, report, out = runs["new"]
    assert status == 1 and report["baseline"]["counts"]["new"] == 1
    tail = out[out.index("against the baseline"):].splitlines()
    assert tail[1].startswith("  new ") and tail[2].strip().startswith("python -m harness run --model llama-spm")


def test_diff_of_the_reports(runs, capsys):
    folder = runs["folder"]
    assert main(["diff", str(folder / "a"), str(folder / "fixed")]) == 0
    assert "fixed 1, unchanged 0, not re-checked 0" in capsys.readouterr().out
    assert main(["diff", str(folder / "fixed"), str(folder / "a"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["counts"]["new"] == 1
    assert main(["diff", str(folder / "a"), str(folder / "new")]) == 0, "the same bug: unchanged"


def test_every_report_records_what_ran_where_and_when(runs):
    meta = runs["a"][1]["meta"]
    assert re.fullmatch(r"[0-9a-f]{40}", meta["project"]["commit"]) and isinstance(meta["project"]["dirty"], bool)
    assert meta["engine"] == PLANTED and meta["llama_cpp_python"] == meta["llama_cpp"]["llama_cpp_python"]
    assert meta["llama_cpp"]["ggml_commit"] and meta["llama_cpp"]["ggml_version"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", meta["date"])
    assert 0 < meta["duration_s"] < 600 and "seed" in meta
    assert meta["host"]["cpus"] >= 1 and meta["host"]["name"] and meta["host"]["platform"]
    block = runs["fixed"][1]["baseline"]
    assert block["meta"]["date"] == meta["date"] and block["sha256"] and block["report"].endswith("report.json")
