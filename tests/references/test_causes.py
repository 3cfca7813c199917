"""harness.references.causes: each conversion finding's cause is the smallest change that makes it agree.

Tiny originals built in the test (tests/reference_files.py's byte-level BPE
tokenizer.json; a WordPiece one from tests/references/test_conversion_causes.py) and GGUF
twins with one fault planted each, as the converter writes them. The ids
compared are llama.cpp's (in an oracle worker, on the GGUF or its rewritten
copy) and `tokenizers`' (in the reference child), never our engine's; the
evidence is what those two gave after the change.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.references import cause_candidates, causes
from tests import reference_files as rf
from tests.references.test_conversion_causes import wpm_pair

pytestmark = pytest.mark.oracle

ALL = [(False, False), (False, True), (True, False), (True, True)]


def finder(tmp: Path, gguf: Path, original: Path) -> causes.Finder:
    return causes.Finder(gguf, f"hf:{original.parent}", tmp / "work")


@pytest.fixture(scope="module")
def smaug(tmp_path_factory):
    """smaug-bpe for an original with ignore_merges on, and <tool> (special=false) typed CONTROL."""
    tmp = tmp_path_factory.mktemp("smaug")
    original = rf.bpe_json(tmp / "o" / "tokenizer.json", ignore_merges=True, bos=False)
    gguf = rf.bpe_gguf(original, tmp / "smaug.gguf", pre="smaug-bpe", add_bos=False, retype={rf.TOOL: 3})
    (tmp / "work").mkdir()
    with finder(tmp, gguf, original) as f:
        yield f


def test_the_candidates_are_read_from_the_two_files(smaug):
    names = [c.name for c in smaug.candidates]
    assert names[:2] == ["pre-name", "token-types"]  # GGUF keys first: a cause repair can write comes first
    assert "original-ignore-merges" in names
    pre = smaug.candidates[0]
    assert pre.side == "gguf" and pre.exact
    assert smaug.changes([pre]) == {"tokenizer.ggml.pre": "llama-bpe"}  # add_bos_token is in the file: kept


def test_a_dropped_ignore_merges_is_named_by_the_pre_name_that_fixes_it(smaug):
    found = smaug.explain({"id": "z", "text": " zebra"}, ALL)
    assert found.cause == "pre-name"
    assert ("original-ignore-merges",) in found.sets  # the same difference, switched on the original's side
    assert len(found.evidence) == 4
    for row in found.evidence:
        assert row["original"] == row["llama.cpp"] == [smaug.data["model"]["vocab"][rf.WORD]]


def test_a_special_false_token_typed_control_is_named_by_its_token_type(smaug):
    found = smaug.explain({"id": "t", "text": "x <tool>"}, [(False, False)])
    assert found.cause == "token-types" and found.sides == {"token-types": "gguf"}


def test_a_case_that_agrees_unchanged_is_not_given_a_cause(smaug):
    assert smaug.explain({"id": "t", "text": "x <tool>"}, [(False, True)]).cause == causes.AGREES


def test_a_case_no_candidate_fixes_is_unexplained_with_what_was_tried(tmp_path):
    """An original whose merges the GGUF lost: no candidate rewrites merges, so nothing makes it agree."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=False, bos=False)
    gguf = rf.bpe_gguf(original, tmp_path / "x.gguf", pre="gpt-2", add_bos=False)
    from harness.models.gguf_writer import rewrite
    from tokenizer.gguf.reader import read
    merges = list(read(gguf).metadata["tokenizer.ggml.merges"])
    rewrite(gguf, tmp_path / "fewer.gguf", {"tokenizer.ggml.merges": merges[:5]})
    (tmp_path / "work").mkdir()
    with finder(tmp_path, tmp_path / "fewer.gguf", original) as f:
        found = f.explain({"id": "c", "text": "the cat sat on the mat"}, [(False, False)])
    assert found.cause == causes.UNEXPLAINED and found.evidence == ()
    assert found.as_dict()["tried"] == [c.name for c in f.candidates]
    # both sides spell the same text in different pieces: classed by experiment, not left unexplained
    assert found.as_dict()["class"] == "segmentation-only"


def test_a_missing_bos_is_named_by_add_bos(tmp_path):
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=True, bos=True)
    gguf = rf.bpe_gguf(original, tmp_path / "x.gguf", pre="llama-bpe", add_bos=False)
    (tmp_path / "work").mkdir()
    with finder(tmp_path, gguf, original) as f:
        found = f.explain({"id": "h", "text": "hello world"}, [(True, False), (True, True)])
    assert found.cause == "add-bos"
    assert all(row["llama.cpp"][0] == row["original"][0] for row in found.evidence)


@pytest.mark.parametrize(("text", "cause"), [
    ("a" * 101, "word-length"),
    ("a\x0bb", "control-whitespace"),
    ("한", "hangul-nfd"),
    ("का", "spacing-marks"),
    ("a\u2581b", "phantom-space"),
])
def test_each_wordpiece_class_is_named(tmp_path_factory, text, cause):
    tmp = tmp_path_factory.mktemp("wpm")
    gguf, original = wpm_pair(tmp)
    (tmp / "work").mkdir()
    with finder(tmp, gguf, original) as f:
        assert f.explain({"id": "w", "text": text}, [(False, False)]).cause == cause


def test_the_findings_of_a_run_are_given_their_case_cause_once(smaug):
    entries = [{"class": "conversion", "case_id": "z", "text": " zebra", "bytes": None,
                "add_special": a, "parse_special": p} for a, p in ALL]
    entries.append({"class": "engine_vs_original", "case_id": "z", "text": " zebra"})
    entries.append({"class": "conversion", "case_id": "b", "text": "", "bytes": "00ff",
                    "add_special": False, "parse_special": False})
    counts = causes.explain_findings(entries, smaug)
    assert counts == {"pre-name": 1, "not traced": 1}
    assert all(e["cause"]["cause"] == "pre-name" for e in entries[:4]) and "cause" not in entries[4]
    json.dumps(entries)  # what report.json holds
    again = [{**e, "case_id": f"{e['case_id']}{i}"} for i, e in enumerate(entries[:2])]
    assert causes.explain_findings(again, smaug, limit=1) == {"pre-name": 1, "not traced": 1}
    assert again[1]["cause"]["why"] == "past the first 1 cases searched"


def test_each_distinct_difference_is_searched_before_a_repeat_of_one(smaug):
    def entry(case: str, signature: str) -> dict:
        return {"class": "conversion", "case_id": case, "text": " zebra", "bytes": None, "add_special": False,
                "parse_special": False, "signature": signature}

    entries = [entry("first", "d-a"), entry("repeat", "d-a"), entry("late", "d-b")]
    assert causes.explain_findings(entries, smaug, limit=2) == {"pre-name": 2, "not traced": 1}
    assert [e["cause"]["cause"] for e in entries] == ["pre-name", "not traced", "pre-name"]


def test_prepends_space_reads_the_sentencepiece_layouts():
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    prepend = {"type": "Prepend", "prepend": "\u2581"}
    assert cause_candidates.prepends_space({"normalizer": {"type": "Sequence", "normalizers": [prepend, replace]}})
    assert cause_candidates.prepends_space({"normalizer": {"type": "Sequence", "normalizers": [replace]}}) is False
    assert cause_candidates.prepends_space({"pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "never"}}) is False
    assert cause_candidates.prepends_space({"pre_tokenizer": {"type": "ByteLevel"}}) is None


def test_the_converters_own_mismatch_lines_are_read_from_its_record(tmp_path):
    from harness.references import gguf_keys
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    assert gguf_keys.converter_warnings(gguf) == []  # no X.convert.json: nothing to say
    line = "WARNING:gguf.vocab:Mismatch between add_bos_token (True) and tokenizer_config.json, opting for the latter"
    (tmp_path / "m.convert.json").write_text(json.dumps({"output_tail": ["INFO:hf-to-gguf:Set meta model", line,
                                                                         line]}))
    assert gguf_keys.converter_warnings(gguf) == [line]


def test_a_tokenizer_json_sentencepiece_layout_names_placeholder_scores_and_a_missing_space_prefix():
    """The converter's fallback for a folder without tokenizer.model: every score -1000.0, no add_space_prefix."""
    from types import SimpleNamespace

    from harness.references import gguf_keys
    vocab = SimpleNamespace(metadata={"tokenizer.ggml.scores": [-1000.0] * 3}, add_space_prefix=True)
    data = {"normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}, "model": {"merges": ["a b"]}}
    lines = [d.line() for d in gguf_keys._spm_layout(SimpleNamespace(vocab=vocab), data)]
    assert [line.split(":")[0] for line in lines] == ["tokenizer.ggml.scores", "tokenizer.ggml.add_space_prefix"]
    vocab.metadata = {"tokenizer.ggml.scores": [0.0, -1.0, -2.0], "tokenizer.ggml.add_space_prefix": False}
    assert gguf_keys._spm_layout(SimpleNamespace(vocab=vocab), data) == []


def test_a_tokenizer_json_sentencepiece_folder_is_blamed_on_its_space_prefix_and_placeholder_scores(tmp_path):
    """llama.cpp reads the missing add_space_prefix as on ("Hello" becomes ▁Hello), and with every score
    equal it merges in another order than the original's merges."""
    original = rf.spm_style_json(tmp_path / "o" / "tokenizer.json")
    gguf = rf.spm_style_gguf(original, tmp_path / "x.gguf")
    (tmp_path / "work").mkdir()
    with finder(tmp_path, gguf, original) as f:
        assert [c.name for c in f.candidates] == ["add-space-prefix", "scores", "original-normalizer",
                                                  "unicode-version"]
        assert f.explain({"id": "h", "text": "Hello world"}, [(False, False)]).cause == "add-space-prefix"
        merged = f.explain({"id": "m", "text": "mathematics"}, [(False, False)])
    assert merged.cause == "add-space-prefix+scores" and merged.sides == {"add-space-prefix": "gguf", "scores": "gguf"}
    assert not next(c for c in f.candidates if c.name == "scores").exact  # derived: repair names it, applies nothing
