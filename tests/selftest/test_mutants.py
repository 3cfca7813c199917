"""The mutation self-test's own checks.

Fast: every curated mutant of tests/mutants/ still applies to tokenizer/ as it
stands (each search text occurs exactly once, the result compiles and differs),
so a refactor breaks a mutant loudly here instead of turning it into a silent
no-op; and the self-test never touches the working tree.

Nightly: `python -m harness selftest --scope nightly` over every mutant; any
mutant that no detector kills fails the test.
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.environment import project_root
from harness.errors import SetupError
from harness.models.paths import resolve
from harness.selftest import mutants as mutants_mod
from harness.selftest.mutants import AREAS, Edit, Mutant, MutantError

ROOT = project_root()
ALL = mutants_mod.load(ROOT)


def test_at_least_forty_mutants_over_every_area():
    assert len(ALL) >= 40
    counts = collections.Counter(m.area for m in ALL)
    assert set(counts) == set(AREAS), f"areas without a mutant: {set(AREAS) - set(counts)}"


@pytest.mark.parametrize("mutant", ALL, ids=[m.id for m in ALL])
def test_mutant_applies_cleanly(mutant: Mutant):
    path = ROOT / mutant.file
    assert path.is_file(), f"{mutant.id}: no such file {mutant.file}"
    assert mutant.file.startswith("tokenizer/"), "mutants plant bugs in the product only"
    source = path.read_text(encoding="utf-8")
    mutated = mutant.apply_to(source)  # MutantError unless each search occurs exactly once
    assert mutated != source
    compile(mutated, mutant.file, "exec")
    assert mutant.description and "\n" not in mutant.description


def test_apply_refuses_a_missing_or_repeated_anchor():
    twice = Mutant("x", "spm", "f.py", "d", (Edit("a", "b"),))
    with pytest.raises(MutantError, match="occurs 2 times"):
        twice.apply_to("a a")
    with pytest.raises(MutantError, match="occurs 0 times"):
        twice.apply_to("zzz")


def test_select_names_unknown_ids():
    with pytest.raises(MutantError, match="no-such-mutant"):
        mutants_mod.select(ALL, ["no-such-mutant"])


def _tree_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*.py")):
        h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@pytest.mark.vocab
def test_selftest_kills_a_mutant_in_a_scratch_copy(tmp_path):
    """One cheap mutant through the vectors detector: killed, and tokenizer/ is untouched."""
    try:
        resolve("llama-spm")
    except SetupError as exc:
        pytest.skip(str(exc))
    before = _tree_digest(ROOT / "tokenizer")
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "selftest", "--mutant", "spm-no-byte-fallback",
         "--detector", "vectors", "--no-baseline", "--report", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vectors killed (llama-spm)" in proc.stdout
    assert (tmp_path / "selftest.json").is_file() and (tmp_path / "selftest.html").is_file()
    assert _tree_digest(ROOT / "tokenizer") == before


@pytest.mark.nightly
def test_no_mutant_survives_every_detector(tmp_path):
    """Nightly: every shipped mutant is killed by some detector over the nightly vocabularies.

    The kill table goes to $GGUF_PARITY_SELFTEST_REPORT when set, else to a temporary directory.
    (`nox -s nightly` runs `selftest` as its own step, sharded with GGUF_PARITY_SHARD, and deselects this.)
    """
    report = os.environ.get("GGUF_PARITY_SELFTEST_REPORT") or str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "selftest", "--scope", "nightly", "--jobs", "2",
         "--report", report],
        cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_live_detectors_run_the_token_level_main_job():
    """The live detectors are `run` as the main job runs it: token level, no chat-template check
    (whose presence depends on a built helper, and whose last line would hide the verdict)."""
    from harness.selftest.run import command
    from harness.selftest.settings import Settings
    for detector in ("live", "live+fuzz"):
        cmd = command(detector, ["gpt-2"], ROOT / "reports" / "x", Settings())
        assert cmd[cmd.index("harness") + 1] == "run" and "--no-messages" in cmd


def test_only_an_undocumented_survivor_fails_the_selftest():
    from harness.commands.selftest import split_survivors

    def row(mid, killed, blind=""):
        cell = {"outcome": "killed" if killed else "survived", "killed": killed}
        return {"id": mid, "blind_spot": blind, "results": {"golden": cell, "live": dict(cell)}}
    report = {"mutants": [row("a", True), row("b", False), row("c", False, "no such token"),
                          row("d", True, "was a blind spot")]}
    assert split_survivors(report, None) == (["b"], {"c": "no such token"})
    assert split_survivors(report, "golden") == (["b"], {"c": "no such token"})


def blind_spot_section() -> str:
    """docs/mutation-selftest.md's "Blind spots" section."""
    docs = (ROOT / "docs" / "mutation-selftest.md").read_text(encoding="utf-8")
    start = docs.index("### Blind spots")
    return docs[start:docs.index("\n### ", start + 1)]


def documented_blind_spots(section: str, mutants) -> tuple[set[str], bool]:
    """The mutant ids the section names in backticks, and whether it says that none is marked."""
    ids = {m.id for m in mutants}
    return set(re.findall(r"`([\w-]+)`", section)) & ids, "No mutant is marked now" in section


def test_blind_spots_are_documented():
    """The Blind spots section names exactly the marked mutants, each with a reason, or says none is."""
    named, none_claimed = documented_blind_spots(blind_spot_section(), ALL)
    blind = {m.id for m in ALL if m.blind_spot}
    assert named == blind
    assert none_claimed == (not blind)
    assert all(len(m.blind_spot) > 40 for m in ALL if m.blind_spot)


def test_the_blind_spot_check_sees_an_undocumented_mark():
    marked = [replace(ALL[0], blind_spot="x" * 50), *ALL[1:]]
    named, none_claimed = documented_blind_spots(blind_spot_section(), marked)
    assert named != {m.id for m in marked if m.blind_spot} and none_claimed


