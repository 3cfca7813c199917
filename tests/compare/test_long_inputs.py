"""Long inputs and many calls: documents composed from short parts, a failing one cut to its smallest
window, and one engine object asked thousands of calls in a row.

The end-to-end tests run `python -m harness run` with default options on a user's engine with a
planted fault (tests/long_engines.py): one that appears only past 64 KiB of input, one only from the
10,000th call of one object on. Expected ids come from llama.cpp (the planted engines are llama.cpp
itself, with the fault); the faults define which cases must fail.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings

from harness.cli import main
from harness.compare.result import ModelResult
from harness.inputs import strategies
from harness.inputs.shrink import smallest_window, spell
from harness.runs import documents
from harness.runs.calls import call_order
from tests import reference_files as rf
from tests.commands.test_run_cli import harness, report_of

VIEW = strategies.VocabView("toy", pieces=(b"\xe2\x96\x81he", b"llo"), specials=("<s>", "<|im_end|>"),
                            byte_fallback=True)


# --- composing long documents ---------------------------------------------------------------------

def test_long_documents_repr_shows_the_call_and_the_docstring_names_the_trap():
    assert repr(strategies.long_documents(VIEW)) == "long_documents(view=VocabView('toy'))"
    assert "Buffers" in (strategies.long_documents.__doc__ or "")


@settings(max_examples=15, database=None, deadline=None)
@given(strategies.long_documents(VIEW, texts=("Hello world", "naïve café"), max_bytes=200_000))
def test_long_documents_are_long_replayable_text(value):
    assert isinstance(value, str)
    assert 66_000 <= len(value.encode("utf-8", "surrogatepass")) <= 200_000 + 10_000
    case = strategies.as_case(value)
    assert strategies.case_input(case) == value


def test_numbered_documents_hold_thousands_of_distinct_words():
    text = strategies.compose_document(["the", "quick"], sep=" ", shape="numbered", size=100_000)
    assert len(set(text.split())) > 5000


def test_the_hard_part_is_planted_where_drawn():
    text = strategies.compose_document(["ab"], sep=" ", shape="repeat", size=90_000, hard="<HARD>", where=50)
    at = text.index("<HARD>")
    assert 0.45 < at / len(text) < 0.55 and text.count("<HARD>") == 1


# --- shrinking to the smallest failing window -------------------------------------------------------

def _document() -> str:
    return strategies.compose_document(["lorem", "ipsum", "dolor"], sep=" ", shape="numbered", size=300_000)


def test_a_length_threshold_shrinks_to_one_byte_past_it():
    def fails(value):
        return len(value.encode()) > 65_536
    window = smallest_window(_document(), fails)
    assert len(window.value.encode()) == 65_537
    assert window.judged <= 80


def test_a_planted_hard_part_shrinks_to_itself():
    document = _document()
    document = document[:150_000] + "xZQXy" + document[150_000:]
    window = smallest_window(document, lambda value: "ZQX" in value)
    assert window.value == "ZQX"
    assert document[window.start:window.end] == "ZQX"
    assert window.judged <= 80


def test_bytes_shrink_the_same_way():
    document = _document().encode() + b"\xff" + _document().encode()
    window = smallest_window(document, lambda value: b"\xff" in value)
    assert window.value == b"\xff"


def test_the_window_always_fails_even_when_failing_is_not_monotone():
    document = _document()
    def fails(value):  # fails on the whole text and on windows whose length is odd: not monotone
        return value == document or len(value) % 2 == 1
    window = smallest_window(document, fails)
    assert fails(window.value)


def test_the_budget_bounds_the_judgements():
    calls = []
    window = smallest_window(_document(), lambda value: calls.append(1) or len(value) > 65_536, budget=5)
    assert len(calls) == 5 and len(window.value) > 65_536


@pytest.mark.parametrize("value", [
    pytest.param("ab " * 30_000 + "x", id="repeated-then-tail"),
    pytest.param("head " + "xyz" * 5000 + " middle " + "q" * 4000, id="two-runs"),
    pytest.param(b"\x00\x01" * 40_000 + b"\xff", id="bytes"),
])
def test_a_spelling_is_short_and_builds_the_window_exactly(value):
    spelled, exact = spell(value)
    assert exact and len(spelled) < 200
    assert eval(spelled) == value  # our own spelling of our own test text


def test_a_spelling_without_repeats_is_cut_and_says_so():
    value = "".join(chr(0x4E00 + i) for i in range(5000))
    spelled, exact = spell(value)
    assert not exact and "..." in spelled and len(spelled) < 400


# --- the long phase: every document judged, only a new difference cut to a window (harness.runs.documents)

def _documents(known: set[str]) -> ModelResult:
    """Two documents of "ZQX word" lines judged by a planted judge: every input shows d-old, one holding
    ZQX d-new as well."""
    def judge(case: dict) -> list:
        value = strategies.case_input(case)
        entry = {"case_id": case["id"], "text": value}
        return [("mismatches", {**entry, "signature": "d-old"})] + (
            [("mismatches", {**entry, "signature": "d-new"})] if "ZQX" in value else [])
    result = ModelResult("toy", "bpe")
    judged = documents.check_documents("toy", judge, VIEW, ("ZQX word",), result, docs=2, max_bytes=70_000,
                                       seed=1, database=False, known=known)
    assert judged == 2
    return result


def _whole(entry: dict) -> bool:
    return entry["long"]["window_bytes"] == entry["long"]["document_bytes"]


def test_every_document_is_judged_and_only_a_new_difference_is_cut_to_a_window():
    result = _documents({"d-old"})
    whole = [e for e in result.mismatches if _whole(e)]
    assert len({e["case_id"] for e in whole}) == 2  # both documents recorded, shown windowed
    assert {e["signature"] for e in whole} == {"d-old", "d-new"}
    [window] = {e["case_id"]: e for e in result.mismatches if not _whole(e)}.values()
    assert window["text"] == "ZQX" and window["long"]["exact"]  # the first document of d-new, cut
    assert any(n.startswith("long documents: a new difference in document 1 of 2") for n in result.notes)


def test_documents_that_repeat_known_differences_are_recorded_not_cut():
    result = _documents({"d-old", "d-new"})
    assert all(_whole(e) for e in result.mismatches) and len({e["case_id"] for e in result.mismatches}) == 2
    assert result.notes == ["long documents: 2 of 2 differ, each only as shorter cases differ already "
                            "(not cut to a window)"]


@pytest.mark.oracle
def test_long_documents_are_checked_though_a_short_case_differs(tmp_path, capsys):
    """A short case shows the tab bug; the document (of the corpus's texts) shows it again: it is judged
    and recorded under the same difference, not left "not checked" as it was."""
    pytest.importorskip("tokenizers")
    gguf = rf.bpe_gguf(rf.bpe_json(tmp_path / "o" / "tokenizer.json"), tmp_path / "tiny.gguf")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "tab", "text": "a\tb"}) + "\n", encoding="utf-8")
    status = main(["run", "--model", str(gguf), "--no-default-corpora", "--corpus", str(corpus), "--seed", "0",
                   "--engine", "tests.broken_engine:load_tab_as_newline", "--report", str(tmp_path / "r"), "--quiet",
                   "--no-messages", "--long-docs", "1", "--long-bytes", "66000", "--calls", "0"])
    capsys.readouterr()
    report = report_of(tmp_path / "r")
    assert status == 1
    short = {m["signature"] for m in report["mismatches"] if m["case_id"] == "tab"}
    long = [m for m in report["mismatches"] if m.get("long")]
    assert long and {m["signature"] for m in long} == short
    notes = report["summary"]["per_model"]["tiny"]["notes"]
    assert "long documents: 1 of 1 differ, each only as shorter cases differ already (not cut to a window)" in notes
    assert report["summary"]["cases"] == 2


# --- many calls -----------------------------------------------------------------------------------

def test_calls_go_in_order_then_reversed_then_shuffled():
    order = list(call_order(4, 14, seed=1))
    assert order[:4] == [0, 1, 2, 3] and order[4:8] == [3, 2, 1, 0]
    assert sorted(order[8:12]) == [0, 1, 2, 3] and len(order) == 14


def test_a_long_text_is_called_in_the_first_pass_only():
    order = list(call_order(4, 14, seed=1, once=frozenset({1})))
    assert order[:4] == [0, 1, 2, 3] and order[4:7] == [3, 2, 0]
    assert order.count(1) == 1 and len(order) == 14


def test_long_texts_alone_are_called_until_the_count_or_not_at_all_again():
    assert list(call_order(2, 5, seed=1, once=frozenset({0, 1}))) == [0, 1]


# --- end to end: a user's engine that fails only past 64 KiB, or only from the 10,000th call -------

def _run(tmp_path, engine: str, *extra: str):
    report = tmp_path / "r"
    done = harness("run", "--model", "llama-spm", "--engine", engine, "--report", str(report), "--quiet", *extra)
    return done, report


def _findings_of(tmp_path, require_vocab, engine: str, phase: str) -> tuple[dict, list[dict]]:
    """`run --engine ENGINE` with default options on llama-spm: exit 1, the report and the phase's mismatches."""
    require_vocab("llama-spm")
    done, report_dir = _run(tmp_path, engine)
    assert done.returncode == 1, done.stderr
    report = report_of(report_dir)
    found = [m for m in report["mismatches"] if m.get(phase)]
    assert found, report["mismatches"][:1]
    return report, found


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
def test_a_bug_past_64_kib_is_found_by_the_default_corpora_documents(tmp_path, require_vocab):
    """With the default corpora's long documents the corpus phase finds it first (on a document); the long
    phase runs all the same, and its document shows the same difference: exit 1, never a pass."""
    require_vocab("llama-spm")
    done, report_dir = _run(tmp_path, "tests.long_engines:load_past_64k")
    assert done.returncode == 1, done.stderr
    report = report_of(report_dir)
    assert {m["case_id"] for m in report["mismatches"]} & {"doc-diverse", "doc-mixed"}
    notes = report["summary"]["per_model"]["llama-spm"]["notes"]
    assert not any(n.startswith("long documents: not checked") for n in notes), notes


@pytest.mark.oracle
def test_a_bug_past_64_kib_is_found_with_default_options_and_shrunk(tmp_path, require_vocab, monkeypatch):
    """Without documents in the corpora (GGUF_PARITY_DOCUMENTS=off), the long phase finds it, records the
    document and cuts it to its smallest window."""
    monkeypatch.setenv("GGUF_PARITY_DOCUMENTS", "off")
    report, found = _findings_of(tmp_path, require_vocab, "tests.long_engines:load_past_64k", "long")
    [cut] = {m["case_id"]: m for m in found if m["long"]["window_bytes"] < m["long"]["document_bytes"]}.values()
    [document] = {m["case_id"] for m in found} - {cut["case_id"]}
    assert {m["case_id"] for m in report["mismatches"]} == {cut["case_id"], document}  # no short case fails
    window = cut["long"]
    assert 65_537 <= window["window_bytes"] <= 65_540  # one character past the buffer
    assert window["exact"] and len(window["spelled"]) < 300
    notes = [n for n in report["summary"]["per_model"]["llama-spm"]["notes"] if n.startswith("long documents:")]
    assert notes and window["spelled"] in notes[0]
    argv = shlex.split(cut["command"])
    saved = [json.loads(line) for line in Path(argv[argv.index("--corpus") + 1]).read_text().splitlines()]
    case = next(c for c in saved if c["id"] == cut["case_id"])
    assert len(case["text"].encode()) == window["window_bytes"]  # the cases file holds the window whole
    assert len(cut["text"]) < window["window_bytes"]  # while the report shows a part of it
    again = harness(*argv[3:], "--report", str(tmp_path / "again"), "--quiet", "--long-docs", "0", "--calls", "0")
    assert again.returncode == 1, again.stderr  # the window alone reproduces it


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
@pytest.mark.usefixtures("default_environment")  # a default run, also in the nightly
def test_a_bug_from_the_10000th_call_is_found_with_default_options(tmp_path, require_vocab):
    report, found = _findings_of(tmp_path, require_vocab, "tests.long_engines:load_late", "calls")
    assert all(m.get("calls") for m in report["mismatches"])  # every corpus case agreed first
    assert found[0]["calls"]["call"] >= 10_000 - 4
    command = found[0]["command"]
    assert "--calls" in command
    again = harness(*shlex.split(command)[3:], "--report", str(tmp_path / "again"), "--quiet")
    assert again.returncode == 1, again.stderr  # one text asked that many times reproduces it
    assert [m["case_id"] for m in report_of(tmp_path / "again")["mismatches"]][:1] == [found[0]["case_id"]]


@pytest.mark.oracle
def test_an_engine_without_such_bugs_passes_both_phases(tmp_path, require_vocab):
    require_vocab("llama-spm")
    done, report_dir = _run(tmp_path, "tests.long_engines:load_clean")
    assert done.returncode == 0, done.stderr
    notes = report_of(report_dir)["summary"]["per_model"]["llama-spm"]["notes"]
    assert any(n.startswith("long documents: 1 of") for n in notes), notes
    assert any(n.startswith("calls: 12,0") for n in notes), notes
    assert json.loads((report_dir / "report.json").read_text())["meta"]["calls"] == 12_000


# --- a finding on a long input keeps a window of it (harness.compare.long_inputs) -------------------

class _OneByte:
    """A token table whose every token spells one byte."""

    def piece(self, token: int) -> bytes:
        return b"a"


def test_a_cards_rows_keep_the_ids_around_the_first_difference():
    from harness.compare.long_inputs import ID_WINDOW, rows_window

    ids = list(range(5000))
    other = ids[:3000] + [-1] + ids[3001:]
    assert rows_window([ids, other, None]) == (3000 - ID_WINDOW, 3000 + ID_WINDOW)
    assert rows_window([ids, ids], at=100) == (100 - ID_WINDOW, 100 + ID_WINDOW)  # a decode: the same ids
    assert rows_window([ids[:50], ids[:50]]) is None  # short: kept whole


def test_a_long_decode_finding_keeps_the_part_where_the_decodes_differ():
    from harness.compare.long_inputs import ID_WINDOW, TEXT_WINDOW, trimmed_decode

    llama, original = "a" * 5000, "a" * 2500 + "b" + "a" * 2499
    decode = {"llama_text": llama, "original_text": original, "llama_hex": llama.encode().hex(),
              "original_hex": original.encode().hex()}
    entry = {"ids": list(range(5000)), "decode": [decode], "text": llama}
    out = trimmed_decode(entry, _OneByte())
    assert out["ids_window"] == [2500 - ID_WINDOW, 2500 + ID_WINDOW] and out["ids_n"] == 5000
    assert out["ids"] == list(range(2500 - ID_WINDOW, 2500 + ID_WINDOW))
    cut = out["decode"][0]
    assert cut["window"][0] == 2500 - TEXT_WINDOW and "b" in cut["original_text"]
    assert cut["llama_chars"] == 5000 and len(cut["llama_text"]) == 2 * TEXT_WINDOW
    assert bytes.fromhex(cut["original_hex"]).count(b"b") == 1 and cut["hex_window"][0] <= 2500
    assert out["text_window"] == [2500 - TEXT_WINDOW, 2500 + TEXT_WINDOW, 5000]
    short = {"ids": [1, 2], "decode": [{**decode, "llama_text": "a", "original_text": "b"}], "text": "a"}
    assert trimmed_decode(short, _OneByte()) is short
