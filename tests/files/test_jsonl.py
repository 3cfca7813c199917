"""JSON Lines per the spec: what the harness writes, it reads back exactly.

Records are split on "\\n" only; U+2028, U+2029, U+0085 and lone surrogates
are written as `\\uXXXX` escapes. Checked with Hypothesis over arbitrary
Unicode (surrogates included) for every JSON Lines file the harness writes:
the generic writer, report case files (`outcomes.save_failing`), found files
(`live_run._append_found`) and corpora read by `corpus.load_corpus`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.compare.result import ModelResult
from harness.errors import SetupError
from harness.files import jsonl
from harness.inputs.corpus import CorpusError, load_corpus, make_case
from harness.models.model import Model
from harness.runs.config import RunConfig
from harness.runs.live import _append_found, gather_cases
from harness.runs.outcomes import save_failing

LINE_BREAKERS = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e\r"
# Every code point, lone surrogates (category Cs) included, with the line breakers made likely.
ANY_CHAR = st.one_of(st.characters(codec=None, exclude_categories=()), st.sampled_from(LINE_BREAKERS))
ANY_TEXT = st.text(ANY_CHAR, max_size=40)
# A case input: any UTF-8 text (line breakers likely) or the lone surrogates of undecodable bytes
# (make_case turns those into a "bytes" record, as the fuzzer's inputs are).
CASE_TEXT = st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(LINE_BREAKERS),
                              st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)), max_size=40)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12,
)
TMP = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


@TMP
@given(records=st.lists(JSON_VALUES, max_size=6))
def test_any_records_round_trip(tmp_path: Path, records: list):
    path = jsonl.write(tmp_path / "x.jsonl", records)
    assert path.read_bytes().count(b"\n") == len(records)
    assert [value for _, value in jsonl.read(path)] == records


@TMP
@given(texts=st.lists(CASE_TEXT, min_size=1, max_size=5))
def test_report_case_files_round_trip(tmp_path: Path, texts: list[str]):
    """`save_failing` writes what the reproduce command (`load_corpus`) reads back, byte for byte."""
    cases = [make_case(f"c{i}", text) for i, text in enumerate(texts)]
    result = ModelResult("m", "spm", failing={c["id"] for c in cases})
    config = RunConfig(models=("m",), report_dir=tmp_path / "r")
    save_failing(result, cases, config)
    assert load_corpus(tmp_path / "r" / "cases" / "m.jsonl") == cases


@TMP
@given(texts=st.lists(CASE_TEXT, min_size=1, max_size=5, unique=True))
def test_found_files_round_trip(tmp_path: Path, texts: list[str]):
    found = tmp_path / "found"
    for path in found.glob("*"):
        path.unlink()
    config = RunConfig(models=("m",), report_dir=tmp_path / "r", found_dir=found)
    cases = [make_case(f"fuzz-{i}", text) for i, text in enumerate(texts)]
    for case in cases:
        _append_found(config, "m", case)
    assert load_corpus(found / "m.jsonl") == cases


@pytest.mark.parametrize("char", list(LINE_BREAKERS), ids=lambda c: f"U+{ord(c):04X}")
def test_raw_line_breakers_inside_strings_are_read(tmp_path: Path, char: str):
    """A valid JSON Lines corpus with a raw U+2028 (etc.) in a string, as other tools write it."""
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "a", "text": f"x{char}y"}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert load_corpus(path) == [{"id": "a", "text": f"x{char}y"}]


def test_a_found_file_with_u2028_does_not_stop_later_runs(tmp_path: Path):
    found = tmp_path / "found"
    config = RunConfig(models=("m",), report_dir=tmp_path / "r", found_dir=found)
    _append_found(config, "m", {"id": "fuzz-1", "text": "a\u2028b\u0085c"})
    cases = gather_cases(Model("m", tmp_path / "absent.gguf", "m"), config)
    assert {"id": "fuzz-1", "text": "a\u2028b\u0085c"} in cases


def test_a_report_case_file_feeds_its_reproduce_command(tmp_path: Path):
    """What `--corpus <report>/cases/m.jsonl --no-default-corpora --case ID` selects, without llama.cpp."""
    case = {"id": "fuzz-7", "text": "line\u2028sep\u2029para\u0085next"}
    result = ModelResult("m", "spm", failing={"fuzz-7"})
    save_failing(result, [case], RunConfig(models=("m",), report_dir=tmp_path / "r"))
    cases_file = tmp_path / "r" / "cases" / "m.jsonl"
    config = RunConfig(models=("m",), report_dir=tmp_path / "r2", corpora=(cases_file,),
                       default_corpora=False, case_ids=("fuzz-7",))
    assert gather_cases(Model("m", tmp_path / "absent.gguf", "m"), config) == [case]


def test_append_adds_the_missing_newline_of_a_hand_edited_file(tmp_path: Path):
    path = tmp_path / "f.jsonl"
    path.write_text('{"id": "a", "text": "x"}', encoding="utf-8")
    jsonl.append(path, {"id": "b", "text": "y"})
    assert [c["id"] for c in load_corpus(path)] == ["a", "b"]


def test_invalid_utf8_names_the_line(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "\xff"}\n')
    with pytest.raises(CorpusError, match=r"c\.jsonl:2: not UTF-8"):
        load_corpus(path)


def test_append_refuses_a_fifo_or_a_device_and_read_a_fifo(tmp_path: Path):
    """issue 47: a found file that is a FIFO blocked the run on open; one that is a device was written to."""
    fifo = tmp_path / "found.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(SetupError, match="is a FIFO"):
        jsonl.append(fifo, {"id": "a", "text": "x"})
    with pytest.raises(jsonl.JSONLError, match="is a FIFO"):
        list(jsonl.read(fifo))
    (tmp_path / "null.jsonl").symlink_to("/dev/null")
    with pytest.raises(SetupError, match="a link to a character device"):
        jsonl.append(tmp_path / "null.jsonl", {"id": "a", "text": "x"})
