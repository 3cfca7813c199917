"""Capabilities (harness.subjects.capabilities): what an engine offers, and figures that never count the unchecked."""

from __future__ import annotations

import pytest

from harness.report import build as reporting
from harness.subjects import capabilities as caps
from harness.subjects.guard import EngineLoadError, InProcessEngine, checked_engine


class StrOnly:
    def tokenize(self, text: str, *, add_special, parse_special):
        return [len(text.encode())]


class Declares:
    capabilities = ("tokenize", "bogus")

    def tokenize(self, text, *, add_special, parse_special):
        return []


def test_detection_finds_methods_and_probes_bytes():
    _, found = checked_engine(StrOnly(), "t:StrOnly")
    assert found == {"tokenize"}  # str.encode on bytes raises AttributeError: str only


def test_an_unknown_declared_capability_is_a_load_error_naming_it():
    with pytest.raises(EngineLoadError, match="unknown capability 'bogus'"):
        checked_engine(Declares(), "t:Declares")


def test_invalid_utf8_is_not_applicable_for_a_str_only_engine():
    engine = InProcessEngine(*checked_engine(StrOnly(), "t:StrOnly"))
    got = engine.evaluate_one({"id": "x", "bytes": "ff"})
    result = reporting.ModelResult("m", "spm")
    caps.start(result, engine.caps)
    result.cases = 2
    caps.tally_case(result, engine.caps, {"id": "x"}, {"encode": []}, got)
    assert result.not_applicable == {"x"}
    summary = reporting.build([result], meta={})["summary"]
    assert summary["passed"] == 1 and summary["not_applicable"] == 1  # 2 cases: 1 n/a, never a pass
    assert summary["capabilities"]["ids"]["not_applicable"] == 1


@pytest.mark.parametrize("ids", [[1.0], ["1"], [True], (i for i in [1]), 7, None])
def test_ids_that_are_not_plain_ints_are_engine_errors(ids):
    class Returns(StrOnly):
        def tokenize(self, text, *, add_special, parse_special):
            return ids
    engine = InProcessEngine(Returns(), frozenset({"tokenize", "bytes_input"}))
    got = engine.evaluate_one({"id": "x", "text": "a"})
    assert got.error.startswith("ContractError")


def test_figures_say_not_offered_and_never_count_it_as_agreement():
    tally = caps.new_tally({"tokenize"})
    caps.count(tally, "ids", "agree")
    caps.count(tally, "ids", "differ")
    line = caps.figures(tally)
    assert line.startswith("ids 1/2 agree; detokenize not offered")
    assert not caps.all_checked_agree(tally)
    assert not caps.all_checked_agree(caps.new_tally({"tokenize"}))  # nothing checked is not "all agree"


def test_merged_reports_add_their_figures():
    a, b = (reporting.ModelResult(m, "spm") for m in ("a", "b"))
    for result, outcome in ((a, "agree"), (b, "differ")):
        caps.start(result, {"tokenize"})
        caps.count(result.capabilities, "ids", outcome)
    merged = reporting.merge([reporting.build([a], meta={}), reporting.build([b], meta={})], meta={})
    ids = merged["summary"]["capabilities"]["ids"]
    assert (ids["checked"], ids["agree"], ids["differ"]) == (2, 1, 1)


@pytest.mark.parametrize(("engine", "found", "db"), [
    pytest.param(None, "REPORT/found", None, id="ours"),  # never the checkout's harness/data/corpora/found
    pytest.param("mypkg:load", "REPORT/found", "REPORT/found/.hypothesis", id="theirs"),
    pytest.param("cmd:node x.mjs", "REPORT/found", "REPORT/found/.hypothesis", id="child"),
])
def test_a_user_engines_fuzz_finds_stay_under_the_report(tmp_path, monkeypatch, engine, found, db):
    import argparse

    from harness.environment import project_root
    from harness.inputs.fuzz import DB_ENV
    from harness.runs.config import found_fields
    monkeypatch.delenv(DB_ENV, raising=False)
    fields = found_fields(argparse.Namespace(engine=engine, found_dir=None, report=tmp_path))
    def spelled(path):
        return None if path is None else str(path).replace(str(tmp_path), "REPORT").replace(
            str(project_root()) + "/", "")
    assert spelled(fields["found_dir"]) == found
    assert spelled(fields.get("hypothesis_db")) == db


def test_our_tokenizer_declares_every_capability():
    from tokenizer import Tokenizer
    assert caps.declared(Tokenizer.capabilities) == caps.ALL
