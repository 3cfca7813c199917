"""The self-test's run (`harness.selftest.run`): `--until-main-kill` and the baselines run when first needed.

The fast tests stand in for the detector and baseline subprocesses (`detect`, `baseline`), so that
they count what was run; the `vocab` one runs the real command on one mutant that golden kills.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.environment import project_root
from harness.selftest import run as selftest_run
from harness.selftest.mutants import Edit, Mutant
from harness.selftest.run import Baselines, judge
from harness.selftest.settings import Settings, Verdict

ROOT = project_root()
MUTANT = Mutant("m", "spm", "tokenizer/engines/spm.py", "d", (Edit("a", "b"),), ("llama-spm",))
ORDER = ("golden", "live+fuzz")


@pytest.fixture
def detected(monkeypatch, tmp_path) -> list[str]:
    """The detectors `judge` ran on MUTANT (golden kills it, any other lets it through)."""
    calls: list[str] = []

    def detect(detector, vocabs, workdir, s, *, alone):
        calls.append(detector)
        return Verdict("killed", vocab="llama-spm") if detector == "golden" else Verdict("survived")

    monkeypatch.setattr(selftest_run, "detect", detect)
    monkeypatch.setattr(selftest_run, "mutant_copy", lambda base, mutant, into: tmp_path)
    return calls


def judged(until_main_kill: bool, detectors: tuple[str, ...] = ORDER) -> dict[str, Verdict]:
    s = Settings(detectors=detectors, until_main_kill=until_main_kill, baseline=False)
    usable = Baselines(Path("base"), Path("scratch"), {d: ["llama-spm"] for d in detectors}, s, print,
                       run_them=False)
    return judge(MUTANT, Path("base"), Path("scratch"), usable, s)


def test_a_mutant_golden_kills_runs_no_live_fuzz(detected):
    verdicts = judged(until_main_kill=True)
    assert detected == ["golden"]
    assert verdicts["golden"].killed
    assert verdicts["live+fuzz"].outcome == "skipped" and not verdicts["live+fuzz"].killed
    assert "the main job already kills it (golden)" in verdicts["live+fuzz"].detail


def test_without_the_flag_every_detector_runs(detected):
    verdicts = judged(until_main_kill=False)
    assert detected == ["golden", "live+fuzz"]
    assert verdicts["live+fuzz"].outcome == "survived"


def test_detectors_before_the_kill_run_in_the_order_given(detected):
    verdicts = judged(until_main_kill=True, detectors=("live", "golden", "vectors", "live+fuzz"))
    assert detected == ["live", "golden"]
    assert [verdicts[d].outcome for d in ("vectors", "live+fuzz")] == ["skipped", "skipped"]


def test_a_baseline_runs_once_when_first_needed(monkeypatch):
    """Four threads ask for golden's vocabularies at once: one baseline run; live+fuzz's is never asked for."""
    runs: list[str] = []

    def baseline(detector, base, scratch, candidates, s, say):
        runs.append(detector)
        time.sleep(0.2)   # the other threads arrive while it runs
        return candidates[:1], {candidates[1]: "exit 1"}

    monkeypatch.setattr(selftest_run, "baseline", baseline)
    candidates = {"golden": ["llama-spm", "phi-3"], "live+fuzz": ["llama-spm", "phi-3"]}
    baselines = Baselines(Path("base"), Path("scratch"), candidates, Settings(detectors=ORDER), print, run_them=True)
    seen: list[list[str]] = []
    threads = [threading.Thread(target=lambda: seen.append(baselines["golden"])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert runs == ["golden"]
    assert seen == [["llama-spm"]] * 4
    assert baselines.known(ORDER) == ({"golden": ["llama-spm"]}, {"golden": {"phi-3": "exit 1"}})


def test_skipped_cells_count_in_no_rate():
    from harness.selftest.report import build, markdown, text_table
    results = {"m": {"golden": Verdict("killed", "llama-spm"), "live+fuzz": Verdict("skipped", detail="x")}}
    report = build([MUTANT], results, Settings(detectors=ORDER, until_main_kill=True), {}, {}, 1.0)
    totals = report["summary"]["per_detector"]
    assert (totals["live+fuzz"]["judged"], totals["live+fuzz"]["skipped"]) == (0, ["m"])
    assert totals["main job"]["killed"] == 1
    assert "1/1 run (100%)" in text_table(report) and "- (none run)" in markdown(report)


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.vocab
def test_selftest_until_main_kill_skips_live_fuzz_and_its_baseline(require_vocab, tmp_path):
    """Two SPM mutants that golden kills, judged two at a time: golden's baseline runs once, live+fuzz
    (its baseline included) never; the verdict is 0."""
    require_vocab("llama-spm")
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "selftest", "--mutant", "spm-no-byte-fallback",
         "--mutant", "spm-merge-score-sign", "--detector", "golden", "--detector", "live+fuzz",
         "--until-main-kill", "--likely-only", "--jobs", "2", "--report", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("baseline: golden passes") == 1
    assert "baseline: live+fuzz" not in proc.stdout
    report = json.loads((tmp_path / "selftest.json").read_text(encoding="utf-8"))
    assert list(report["vocabularies"]) == ["golden"]
    for row in report["mutants"]:
        assert row["results"]["golden"]["killed"], row
        assert row["results"]["live+fuzz"]["outcome"] == "skipped", row
        assert row["results"]["main job"]["killed"]
    assert report["summary"]["per_detector"]["live+fuzz"]["judged"] == 0
    page = (tmp_path / "selftest.html").read_text(encoding="utf-8")
    assert page.count("<td class=n>not run<br><small>the main job already kills it</small></td>") == 2

    # --reuse of that report, adding vectors first: golden's verdicts and baseline are taken, not run
    # again; live+fuzz (skipped there, and no baseline) joins the table and is skipped again
    again = subprocess.run(
        [sys.executable, "-m", "harness", "selftest", "--mutant", "spm-no-byte-fallback",
         "--mutant", "spm-merge-score-sign", "--detector", "vectors", "--until-main-kill", "--likely-only",
         "--jobs", "2", "--reuse", str(tmp_path / "selftest.json"), "--report", str(tmp_path / "again")],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "baseline: golden" not in again.stdout and "baseline: live+fuzz" not in again.stdout
    assert again.stdout.count("baseline: vectors passes") == 1
    reused = json.loads((tmp_path / "again" / "selftest.json").read_text(encoding="utf-8"))
    assert reused["columns"] == ["vectors", "golden", "live+fuzz", "main job"]
    before = {row["id"]: row["results"]["golden"] for row in report["mutants"]}
    for row in reused["mutants"]:
        assert row["results"]["golden"] == before[row["id"]]
        assert row["results"]["vectors"]["outcome"] in ("killed", "survived")
        assert row["results"]["live+fuzz"]["outcome"] == "skipped"
