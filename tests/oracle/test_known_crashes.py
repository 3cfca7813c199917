"""The known llama.cpp crashes list: shown in every report, never a failure; a new crash still fails.

- the loader rejects a malformed list with a message naming the entry and the field;
- every entry of the shipped list matches at least one crash record in the committed goldens
  (so an entry whose crash went away, or whose signature drifted, is caught);
- `compare` and `run` (live llama.cpp) count a listed crash under `known_oracle_crashes`, show it
  in report.html, and exit 0; an unlisted one (or `--known-crashes none`) still exits 1;
- `merge-reports` applies its own list to the reports it folds;
- the fuzzer passes over a known crash and hunts on.

The crashes themselves come from llama.cpp: the golden records and the live oracle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.compare.findings import crash_info
from harness.golden.files import golden_files, load_golden
from harness.models.families import FAMILIES
from harness.models.shipped import short_name
from harness.oracle import known_crashes
from harness.report import build as report
from tests.commands.test_run_cli import harness, report_of, write_corpus

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden"
SHIPPED_LIST = ROOT / "harness" / "data" / "corpora" / "known_crashes.json"
ENTRY = {"id": "some-crash", "models": ["*"], "signature": "GGML_ASSERT(x) failed",
         "description": "what it is", "upstream": "what upstream knows"}


# --- the loader -------------------------------------------------------------------------------

@pytest.mark.parametrize(("data", "message"), [
    pytest.param({"id": "x"}, "top level must be a JSON list", id="not-a-list"),
    pytest.param(["x"], "entry 0: must be an object", id="entry-not-object"),
    pytest.param([{k: v for k, v in ENTRY.items() if k != "signature"}],
                 "entry 0 (id 'some-crash'): missing field 'signature'", id="missing-field"),
    pytest.param([{**ENTRY, "signatur": "x"}], "unknown field 'signatur'", id="typo-field"),
    pytest.param([{**ENTRY, "models": "*"}], "field 'models' must be a non-empty list", id="models-string"),
    pytest.param([{**ENTRY, "models": []}], "field 'models' must be a non-empty list", id="models-empty"),
    pytest.param([{**ENTRY, "models": ["gpt-2", 3]}], "field 'models' holds 3", id="models-non-string"),
    pytest.param([{**ENTRY, "signature": "abort"}], "field 'signature' 'abort' is too short", id="short-signature"),
    pytest.param([{**ENTRY, "upstream": " "}], "field 'upstream' must be a non-empty string", id="blank-upstream"),
    pytest.param([{**ENTRY, "id": "Bad Id"}], "field 'id' 'Bad Id' must be lowercase", id="bad-id"),
    pytest.param([ENTRY, ENTRY], "entry 1: id 'some-crash' is used twice", id="duplicate-id"),
])
def test_loader_rejects_a_malformed_list(tmp_path, data, message):
    path = tmp_path / "known.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(known_crashes.KnownCrashesError) as caught:
        known_crashes.load(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_loader_rejects_bad_json_and_a_missing_file(tmp_path):
    (tmp_path / "bad.json").write_text("[{", encoding="utf-8")
    with pytest.raises(known_crashes.KnownCrashesError, match="is not valid JSON"):
        known_crashes.load(tmp_path / "bad.json")
    with pytest.raises(known_crashes.KnownCrashesError, match="cannot read the known-crashes file"):
        known_crashes.load(tmp_path / "missing.json")


NO_FILE_PROBE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_a_known_crashes_path_that_is_no_file_is_one_line_in_bounded_time_and_memory(tmp_path, kind):
    """issue 47: `run --known-crashes /dev/zero` read until memory ran out (3.3 GB, then MemoryError)."""
    from harness.models import gguf_writer
    model = tmp_path / "tiny.gguf"
    gguf_writer.write(model, {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2",
                         "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.token_type": [1, 1]})
    path = Path("/dev/zero") if kind == "dev-zero" else tmp_path / "fifo"
    if kind == "fifo":
        os.mkfifo(path)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", NO_FILE_PROBE, "run", "--model", str(model), "--known-crashes",
                           str(path), "--report", str(tmp_path / "report")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 2, done.stderr
    said = "a character device" if kind == "dev-zero" else "a FIFO"
    assert done.stderr.strip().splitlines() == [
        f"error: cannot read the known-crashes file: {path}: known-crashes file is {said}, not a regular file; "
        "not read"]
    assert time.monotonic() - started < 60


def test_a_malformed_list_is_a_set_up_error(tmp_path, capsys):
    path = tmp_path / "known.json"
    path.write_text(json.dumps([{**ENTRY, "models": []}]), encoding="utf-8")
    report.write(report.build([report.ModelResult("qwen2", "bpe", cases=1)], meta={}), tmp_path / "a")
    code = main(["merge-reports", str(tmp_path / "a"), "--out", str(tmp_path / "m"), "--known-crashes", str(path)])
    assert code == 2
    assert "field 'models'" in capsys.readouterr().err


@pytest.mark.parametrize(("models", "model", "stderr", "hit"), [
    pytest.param(["*"], "gpt-2", "x\n  what():  GGML_ASSERT(x)   failed\n", True, id="whitespace-squeezed"),
    pytest.param(["pre-*"], "pre-whitespace", "GGML_ASSERT(x) failed", True, id="glob"),
    pytest.param(["pre-*"], "gpt-2", "GGML_ASSERT(x) failed", False, id="other-model"),
    pytest.param(["*"], "gpt-2", "GGML_ASSERT(y) failed", False, id="other-assert"),
])
def test_matching(models, model, stderr, hit):
    known = known_crashes.KnownCrashes(known_crashes.parse([{**ENTRY, "models": models}]))
    found = known.match(model, {"reason": "killed by SIGABRT", "stderr": stderr})
    assert (found is not None) == hit


# --- the shipped list against the committed goldens -------------------------------------------

def golden_crashes() -> list[tuple[str, str, dict]]:
    """(model, case id, crash record) for every crash llama.cpp left in the committed goldens."""
    out = []
    for path in golden_files(GOLDEN):
        golden = load_golden(path, check=False)
        model = short_name(golden["gguf"]["file"])
        out += [(model, c["id"], crash_info(c["crash"])) for c in golden["cases"] if c.get("crash")]
    return out


SHIPPED = known_crashes.load(SHIPPED_LIST)


@pytest.mark.parametrize("entry", [pytest.param(e, id=e.id) for e in SHIPPED.entries])
def test_each_shipped_entry_matches_a_golden_crash(entry):
    hits = [(m, case) for m, case, crash in golden_crashes() if entry.matches(m, crash)]
    assert hits, f"known crash {entry.id} matches no crash record in golden/: retire it (docs/known-crashes.md)"


def test_shipped_list_covers_exactly_the_recorded_crashes():
    """Today every crash in the goldens is one of the two known upstream bugs; a new one would show here."""
    by_entry = {}
    for model, case, crash in golden_crashes():
        found = SHIPPED.match(model, crash)
        assert found is not None, f"{model} {case}: crash not on the known list: {crash.get('stderr')!r}"
        by_entry.setdefault(found.id, set()).add(model)
    assert by_entry["whitespace-pre-bpe-rank-space"] == {"pre-whitespace"}
    # the 14 shipped BPE vocabularies, bert-bge, and the two BPE vocabularies of the sensitivity family
    assert by_entry["invalid-codepoint"] == {*FAMILIES["bpe"], "bert-bge", "sens-bpe-specials",
                                             "sens-starcoder-digits"}


# --- compare (offline, goldens) ---------------------------------------------------------------

def _need_golden_gguf(name: str) -> None:
    from harness.runs.replay import locate
    golden = next(p for p in golden_files(GOLDEN) if short_name(p.name.removesuffix(".json")) == name)
    if locate(load_golden(golden, check=False)["gguf"]) is None:
        pytest.skip(f"{name} is not in the vocabulary cache: python -m harness fetch")


def test_compare_known_crash_is_shown_but_passes(tmp_path):
    _need_golden_gguf("gpt-2")
    done = harness("compare", "--golden", "golden", "--model", "gpt-2", "--report", str(tmp_path / "r"), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 new llama.cpp crashes (1 known crashes, see report)" in done.stdout
    got = report_of(tmp_path / "r")
    assert got["oracle_crashes"] == []
    assert [(e["case_id"], e["known_crash"]) for e in got["known_oracle_crashes"]] == [
        ("edge-invalid-09", "invalid-codepoint")]
    model = got["summary"]["per_model"]["gpt-2"]
    assert (model["known_oracle_crashes"], model["known_crash_cases"], model["failing_cases"]) == (1, 1, 0)
    assert model["passed"] == model["cases"] - 1  # nothing could be compared on the crash case
    assert got["summary"]["per_family"]["bpe"]["known_oracle_crashes"] == 1
    assert got["known_crash_list"]["invalid-codepoint"]["upstream"]
    html = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "Known llama.cpp crashes, not counted as failures" in html and "edge-invalid-09" in html
    assert 'class="entry"' not in html  # no finding entries
    cases = (tmp_path / "r" / "cases" / "gpt-2.jsonl").read_text(encoding="utf-8")
    assert "edge-invalid-09" in cases  # the reproduce command finds its input


def test_compare_without_the_list_fails_on_the_same_crash(tmp_path):
    _need_golden_gguf("gpt-2")
    done = harness("compare", "--golden", "golden", "--model", "gpt-2", "--report", str(tmp_path / "r"), "--quiet",
                   "--known-crashes", "none")
    assert done.returncode == 1
    got = report_of(tmp_path / "r")
    assert [e["case_id"] for e in got["oracle_crashes"]] == ["edge-invalid-09"]
    assert got["known_oracle_crashes"] == [] and got["summary"]["failing_cases"] == 1


def test_compare_crash_of_another_kind_still_fails(tmp_path):
    """A list entry matches only its own signature: a different crash on the same model is new."""
    _need_golden_gguf("gpt-2")
    other = tmp_path / "known.json"
    other.write_text(json.dumps([{**ENTRY, "signature": "GGML_ASSERT(something else) failed"}]), encoding="utf-8")
    done = harness("compare", "--golden", "golden", "--model", "gpt-2", "--report", str(tmp_path / "r"), "--quiet",
                   "--known-crashes", str(other))
    assert done.returncode == 1
    assert "1 oracle crashes" in done.stdout


# --- merge-reports ----------------------------------------------------------------------------

def _crash_report(model: str, stderr: str, *, cases: int = 3) -> dict:
    result = report.ModelResult(model, "bpe", cases=cases)
    result.add("oracle_crashes", {"case_id": "c1", "bytes": "f4908080", "text": "",
                                  "crash": {"reason": "killed by SIGABRT", "stderr": stderr}})
    return report.build([result], meta={})


def test_merge_reports_applies_its_list(tmp_path):
    report.write(_crash_report("gpt-2", "terminate called ...\n  what():  invalid codepoint\n"), tmp_path / "a")
    report.write(_crash_report("qwen2", "GGML_ASSERT(brand new) failed"), tmp_path / "b")
    assert main(["merge-reports", str(tmp_path / "a"), "--out", str(tmp_path / "m1")]) == 0
    merged = report_of(tmp_path / "m1")
    assert merged["summary"]["known_oracle_crashes"] == 1 and merged["summary"]["failing_cases"] == 0
    assert merged["known_oracle_crashes"][0]["known_crash"] == "invalid-codepoint"
    assert main(["merge-reports", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m2")]) == 1
    both = report_of(tmp_path / "m2")["summary"]
    assert (both["oracle_crashes"], both["known_oracle_crashes"], both["failing_cases"]) == (1, 1, 1)
    assert main(["merge-reports", str(tmp_path / "m1"), "--out", str(tmp_path / "m3"),
                 "--known-crashes", "none"]) == 1
    undone = report_of(tmp_path / "m3")["summary"]["per_model"]["gpt-2"]
    assert (undone["oracle_crashes"], undone["known_oracle_crashes"], undone["failing_cases"]) == (1, 0, 1)


# --- run (live llama.cpp) ---------------------------------------------------------------------

def _whitespace_vocab(tmp_path) -> Path:
    from harness.models import synth
    try:
        return synth.write("pre-whitespace", tmp_path)
    except Exception as exc:  # noqa: BLE001 - needs the shipped vocabularies
        pytest.skip(f"cannot build the pre-whitespace vocabulary ({exc}); run: python -m harness fetch")


@pytest.mark.oracle
def test_run_known_crash_does_not_fail(tmp_path):
    pytest.importorskip("tokenizer.api", reason="tokenizer.Tokenizer has not landed yet")
    path = _whitespace_vocab(tmp_path)
    corpus = write_corpus(tmp_path / "c.jsonl", [
        {"id": "plain", "text": "Hello"},
        {"id": "double-space", "text": "Hello  world"},
    ])
    done = harness("run", "--model", str(path), "--corpus", str(corpus), "--no-default-corpora",
                   "--report", str(tmp_path / "r"), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(1 known crashes, see report)" in done.stdout
    got = report_of(tmp_path / "r")
    assert got["oracle_crashes"] == []
    [known] = got["known_oracle_crashes"]
    assert (known["case_id"], known["known_crash"]) == ("double-space", "whitespace-pre-bpe-rank-space")
    assert "GGML_ASSERT" in known["crash"]["stderr"]  # the live stderr carries the signature
    assert "Known llama.cpp crashes" in (tmp_path / "r" / "report.html").read_text(encoding="utf-8")


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
@pytest.mark.usefixtures("default_environment")  # a default run, also in the nightly
def test_run_fuzz_passes_over_a_known_crash(tmp_path):
    """pre-whitespace aborts on most inputs with two spaces; a known crash is no fuzz finding."""
    pytest.importorskip("tokenizer.api", reason="tokenizer.Tokenizer has not landed yet")
    path = _whitespace_vocab(tmp_path)
    args = ("run", "--model", str(path), "--no-default-corpora", "--fuzz", "15", "--seed", "2",
            "--found-dir", str(tmp_path / "found"), "--quiet")
    listed = harness(*args, "--report", str(tmp_path / "r1"))
    unlisted = harness(*args, "--report", str(tmp_path / "r2"), "--known-crashes", "none")
    assert unlisted.returncode == 1 and report_of(tmp_path / "r2")["oracle_crashes"]
    assert listed.returncode == 0, listed.stdout + listed.stderr
    got = report_of(tmp_path / "r1")
    assert got["oracle_crashes"] == [] and 0 < got["summary"]["cases"] <= 15 + 1  # the fuzz's and one document
    assert any("known llama.cpp crash whitespace-pre-bpe-rank-space" in n
               for n in got["summary"]["per_model"]["pre-whitespace"]["notes"])
