"""`RunConfig` from the command line (`harness.runs.config`): where a run's fuzz finds go, and what it reads."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.runs.config import FOUND_DIR, found_fields


@pytest.mark.parametrize("engine", [None, "tests.broken_engine:load", "cmd:node x.mjs"])
def test_finds_are_written_under_the_report_unless_asked_and_the_committed_ones_still_read(tmp_path, engine):
    fields = found_fields(argparse.Namespace(engine=engine, found_dir=None, report=tmp_path / "r"))
    assert fields["found_dir"] == tmp_path / "r" / "found"
    assert fields.get("found_corpora", ()) == ((FOUND_DIR,) if engine is None else ())  # ours replays them
    asked = found_fields(argparse.Namespace(engine=engine, found_dir=Path(FOUND_DIR), report=tmp_path / "r"))
    assert asked["found_dir"] == FOUND_DIR  # --found-dir harness/data/corpora/found: into the committed corpus
