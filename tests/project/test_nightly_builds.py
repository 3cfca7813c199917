"""The nightly's build comparison: noxfile.py's `nightly_builds` runs `python -m harness builds` against
node-llama-cpp on an unsharded night, and its report goes into a ledger of its own (`builds-ledger`), so
the night a change between the two builds first appeared is kept apart from our engine's differences."""

from __future__ import annotations

from pathlib import Path

from tests.project.test_noxfile import _noxfile, nightly_commands


def test_an_unsharded_night_compares_the_builds_and_folds_them_into_their_own_ledger(tmp_path, monkeypatch):
    noxfile = _noxfile()
    ledgers = []

    def nightly_ledger(session, out, reports, *, since, name="ledger"):
        ledgers.append((name, reports))
        return True
    monkeypatch.setattr(noxfile, "nightly_ledger", nightly_ledger)
    commands, _ = nightly_commands(tmp_path, monkeypatch, None)
    [builds] = [c for c in commands if "harness builds" in c]
    assert builds.endswith(f"--report {Path('reports/nightly/builds')}") and "--jobs" in builds
    assert ("builds-ledger", [Path("reports/nightly/builds")]) in ledgers
    assert ("ledger", [Path("reports/nightly"), Path("reports/nightly/real")]) in ledgers


def test_a_shard_leaves_the_comparison_out(tmp_path, monkeypatch):
    commands, _ = nightly_commands(tmp_path, monkeypatch, "2/4")
    assert not any("harness builds" in c for c in commands)


def test_a_comparison_that_gives_no_verdict_is_a_problem_of_the_night(tmp_path):
    noxfile = _noxfile()

    class Failing:
        def run(self, *args, **kwargs):
            raise noxfile.CommandFailed("exit 2")
    assert "the build comparison" in noxfile.nightly_builds(Failing(), tmp_path)
