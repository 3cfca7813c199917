"""Golden files: schema, canonical bytes, deterministic recording, drift.

Policy (docs/golden.md): goldens are recorded by `python -m harness record`
from llama.cpp and never edited by hand to make a test pass; a changed golden
is re-recorded and its diff reviewed.  The tests that edit a golden do so on
a temporary copy, to check that drift notices.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.golden import files as goldens
from harness.golden.records import SPECIALS, diff_vocab, unpack_array, vocab_record
from harness.models.shipped import SHIPPED

COMMITTED = sorted(goldens.GOLDEN_DIR.glob("ggml-vocab-*.json"))
FEW = [{"id": "hello", "text": "Hello world"}, {"id": "special", "text": " <s>x</s> "},
       {"id": "bad-utf8", "bytes": "ff41"}, {"id": "empty", "text": ""}]


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in SHIPPED])
def test_every_shipped_vocabulary_has_a_golden(name):
    assert (goldens.GOLDEN_DIR / f"ggml-vocab-{name}.json").is_file()


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in COMMITTED])
def test_committed_golden_validates_and_is_canonical(path: Path):
    golden = goldens.load_golden(path)  # validates the on-disk form against the schema
    assert golden["gguf"]["file"] == path.stem + ".gguf"
    assert goldens.dumps_golden(golden) == path.read_text(encoding="utf-8")
    assert len(golden["cases"]) >= 150 and golden["vocab"]["n_tokens"] > 0


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in COMMITTED])
def test_packing_round_trips_every_committed_case(path: Path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    for case in raw["cases"]:
        full = goldens.unpack_case(case)
        if "encode" in full:
            assert [len(e["detokenize"]) for e in full["encode"]] == [4, 4, 4, 4]
        assert goldens.pack_case(full) == case, case["id"]


def _small_golden() -> dict:
    return goldens.load_golden(goldens.GOLDEN_DIR / "ggml-vocab-llama-spm.json", check=False)


@pytest.mark.parametrize("breakage, where", [
    pytest.param(lambda g: g.pop("vocab"), "top level", id="missing-vocab"),
    pytest.param(lambda g: g["gguf"].update(sha256="xyz"), "gguf/sha256", id="bad-sha256"),
    pytest.param(lambda g: g["cases"][0].update(bytes="zz"), "cases/0", id="bad-hex"),
    pytest.param(lambda g: g["cases"][0]["encode"].pop(), "cases/0", id="three-encodings"),
    pytest.param(lambda g: g["vocab"]["specials"].update(bos=-1), "vocab", id="negative-special"),
])
def test_schema_rejects_broken_goldens(breakage, where):
    golden = _small_golden()
    breakage(golden)
    with pytest.raises(goldens.GoldenError, match=where):
        goldens.validate(golden)


def test_encode_items_out_of_order_are_refused():
    golden = _small_golden()
    case = golden["cases"][0]
    case["encode"].reverse()
    with pytest.raises(goldens.GoldenError, match="order"):
        goldens.pack_case(case)


def test_unreadable_golden_names_the_file(tmp_path: Path):
    path = tmp_path / "broken.json"
    path.write_text("{", encoding="utf-8")
    with pytest.raises(goldens.GoldenError, match=r"broken\.json"):
        goldens.load_golden(path)


class ListVocab:
    """A tiny object with the vocabulary part of the Tokenizer API, for digest tests."""

    def __init__(self, n: int) -> None:
        self.n_tokens, self.vocab_type, self.pre = n, "bpe", "gpt-2"
        self.add_bos = self.add_eos = self.add_sep = False
        self.texts = [f"tok{t}".encode() for t in range(n)]
        self.scores = [float(-t) for t in range(n)]
        for name in SPECIALS:
            setattr(self, name, None)

    def token_text(self, t): return self.texts[t]
    def token_to_piece(self, t, *, lstrip=0, special): return self.texts[t]
    def token_score(self, t): return self.scores[t]
    def token_attr(self, t): return 4
    def is_eog(self, t): return False
    def is_control(self, t): return False


def test_diff_vocab_pins_a_changed_score_and_text_to_their_token():
    api = ListVocab(3000)
    expected = vocab_record(api)
    api.scores[2500] = 0.5
    for candidate in (b"x", b"y", b"z", b"w", b"v"):  # one whose 4-bit digest differs
        api.texts[1234] = candidate
        got = vocab_record(api)
        if got["token_digest"] != expected["token_digest"]:
            break
    found = {(d["field"], d.get("token")) for d in diff_vocab(expected, got)}
    assert ("score", 2500) in found
    assert ("text", 1234) in found and ("piece", 1234) in found
    assert unpack_array(got["scores"], "<f4")[2500] == 0.5


# -- with llama.cpp ------------------------------------------------------------------

@pytest.mark.oracle
@pytest.mark.vocab
def test_recording_twice_gives_identical_bytes(require_vocab):
    from harness.commands.record import record_model

    path = require_vocab("llama-spm")
    first = goldens.dumps_golden(record_model(path, FEW))
    second = goldens.dumps_golden(record_model(path, FEW, jobs=2))
    assert first == second
    goldens.validate(json.loads(first) | {"cases": [goldens.unpack_case(c) for c in json.loads(first)["cases"]]})


@pytest.mark.oracle
@pytest.mark.vocab
def test_committed_golden_still_matches_llama_cpp(require_vocab):
    """A fast drift check on one vocabulary: its vocab record and a dozen cases."""
    from harness.oracle.workers import inspect_model, run_cases

    golden = _small_golden()
    path = require_vocab("llama-spm")
    sample = golden["cases"][::20]
    live = run_cases(path, [goldens.case_input_of(c) for c in sample])
    assert [goldens.diff_cases(a, b) for a, b in zip(sample, live)] == [[]] * len(sample)
    assert diff_vocab(golden["vocab"], inspect_model(path)["vocab"]) == []


@pytest.mark.oracle
@pytest.mark.vocab
def test_drift_reports_a_changed_case_and_exits_1(require_vocab, tmp_path: Path, capsys):
    from harness.cli import main

    path = require_vocab("llama-spm")
    corpus = tmp_path / "few.jsonl"
    corpus.write_text("".join(json.dumps(c) + "\n" for c in FEW), encoding="utf-8")
    out = tmp_path / "golden"
    assert main(["record", "--model", str(path), "--corpus", str(corpus), "--out", str(out)]) == 0
    file = out / "ggml-vocab-llama-spm.json"
    assert main(["drift", "--golden", str(out)]) == 0
    assert main(["drift", "--golden", str(out), "--model", "gpt-2"]) == 2  # nothing to replay
    older = copy.deepcopy(goldens.load_golden(file))  # pretend an older llama.cpp said otherwise
    older["cases"][0]["encode"][0]["ids"] = [1, 2, 3]
    goldens.write_golden(file, older)
    capsys.readouterr()
    assert main(["drift", "--golden", str(out)]) == 1
    report = capsys.readouterr().out
    assert "case few-hello: [add_special=False parse_special=False] ids [1, 2, 3] -> " in report


def test_records_that_differ_only_outside_ids_and_outputs_name_the_fields():
    cases = _small_golden()["cases"]
    doc = next(c for c in cases if "digest" in c)
    assert goldens.diff_cases(doc, copy.deepcopy(doc)) == []
    assert goldens.diff_cases({**doc, "text": "rebuilt"}, doc) == ["record changed (fields: text)"]
    shorter = {**doc, "digest": doc["digest"][:3]}
    assert goldens.diff_cases(doc, shorter) == ["record changed (fields: digest)"]
    case = next(c for c in cases if "encode" in c)
    assert goldens.diff_cases(case, {**case, "id": "other"}) == ["record changed (fields: id)"]


@pytest.mark.oracle
@pytest.mark.vocab
def test_drift_on_a_document_golden_finds_no_change_until_a_block_differs(require_vocab, tmp_path: Path, capsys):
    """A digested document replays unchanged; a recorded block that differs is named by its ids.

    Drift once compared the committed record with its rebuilt text attached against the
    re-recorded one (no text), so every document was "record changed" with the same ids.
    """
    from harness.cli import main
    from harness.commands.record import record_model
    from harness.inputs import documents

    path = require_vocab("llama-spm")
    mixed = [c for c in documents.documents(path, "default") if c["id"] == "doc-mixed"]  # 96 KiB, not 462 KB
    file = goldens.write_golden(goldens.golden_path(tmp_path, path), record_model(path, mixed))
    argv = ["drift", "--golden", str(tmp_path), "--models-dir", str(path.parent)]
    assert main(argv) == 0, capsys.readouterr().out
    assert "1 cases, 0 change(s)" in capsys.readouterr().out
    older = copy.deepcopy(goldens.load_golden(file))  # pretend an older llama.cpp said otherwise from id 768 on
    older["cases"][0]["digest"][0]["ids"]["blocks"][3] = "0" * 16
    goldens.write_golden(file, older)
    assert main(argv) == 1
    report = capsys.readouterr().out
    assert ("case doc-mixed: [add_special=False parse_special=False] document digest changed "
            "from ids [768, 1024) on") in report
    assert "record changed" not in report


@pytest.mark.oracle
def test_a_file_llama_cpp_refuses_gets_a_golden_with_its_load_error(tmp_path: Path, capsys):
    from harness.cli import main

    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    out = tmp_path / "golden"
    assert main(["record", "--model", str(bad), "--out", str(out)]) == 0
    assert "did not load it" in capsys.readouterr().out
    golden = goldens.load_golden(out / "truncated.json")
    assert golden["vocab"] is None and golden["cases"] == []
    message = golden["load_error"]["message"]
    assert "truncated.gguf" in message and str(tmp_path) not in message


@pytest.mark.oracle
@pytest.mark.nightly
@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in COMMITTED])
def test_golden_has_not_drifted(path: Path):
    """Nightly: every case and the vocab record of each shipped golden, replayed on llama.cpp (as `drift` does)."""
    from harness.commands.drift import find_gguf, replay_inputs
    from harness.commands.record import record_model
    from harness.errors import SetupError
    from harness.models.shipped import models_dir

    old = goldens.load_golden(path)
    try:
        gguf = find_gguf(old["gguf"], [models_dir()])
    except SetupError as exc:  # not fetched
        pytest.skip(f"{exc} (fetch with: python -m harness fetch)")
    new = record_model(gguf, replay_inputs(old["cases"], gguf), jobs=2)  # a document's text rebuilt
    assert goldens.diff_goldens(old, new) == []


class ByteTokenizer:
    """A toy tokenizer (one id per byte, BOS 256) to pin evaluate_case's layout without llama.cpp."""

    def tokenize(self, text, *, add_special, parse_special):
        return ([256] if add_special else []) + list(text)

    def detokenize(self, ids, *, remove_special, unparse_special):
        specials = b"<s>" if unparse_special else b""
        return b"".join(specials if t == 256 else bytes([t]) for t in ids if not (remove_special and t == 256))


def test_evaluate_case_layout_is_fixed_and_exact():
    from harness.golden.records import FLAGS, evaluate_case

    record = evaluate_case(ByteTokenizer(), {"id": "x", "bytes": "ff41"})
    assert record["id"] == "x" and record["bytes"] == "ff41" and "text" not in record
    assert [(e["add_special"], e["parse_special"]) for e in record["encode"]] == list(FLAGS)
    assert record["encode"][2]["ids"] == [256, 255, 65]
    outputs = record["encode"][2]["detokenize"]
    assert [(d["remove_special"], d["unparse_special"]) for d in outputs] == list(FLAGS)
    assert outputs[1] == {"remove_special": False, "unparse_special": True, "bytes": "3c733eff41"}
    assert goldens.unpack_case(goldens.pack_case(record)) == record


def test_evaluate_and_golden_do_not_need_llama_cpp():
    import subprocess
    import sys

    code = ("import sys, harness.golden.records, harness.golden.files, harness.inputs.corpus, harness.commands.drift; "
            "sys.exit('llama_cpp' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=goldens.GOLDEN_DIR.parent).returncode == 0
