"""`python -m harness repair`: the causes a GGUF key fixes written into a new file, then the check run again.

The twin is tests/reference_files.py's byte-level BPE original (ignore_merges
on, no BOS) converted as `smaug-bpe` (ignore_merges off in llama.cpp), with
its one non-special added token typed CONTROL: two causes a key fixes. The ids
compared are llama.cpp's and `tokenizers`', before and after; the repaired
file must also load in our engine and agree with llama.cpp there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests import reference_files as rf
from tokenizer.gguf.reader import read

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["the cat sat on the mat", " zebra", "a zebra, the zebra", "x <tool> y", "hello world"]

pytestmark = pytest.mark.oracle


def twin(tmp: Path, *, pre: str = "smaug-bpe") -> tuple[Path, Path, Path]:
    original = rf.bpe_json(tmp / "o" / "tokenizer.json", ignore_merges=True, bos=False)
    gguf = rf.bpe_gguf(original, tmp / "x.gguf", pre=pre, add_bos=False, retype={rf.TOOL: 3})
    corpus = tmp / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    return original, gguf, corpus


def repair(tmp: Path, original: Path, gguf: Path, corpus: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "repair", str(gguf), "--reference",
                           f"hf:{original.parent}", "--out", str(tmp / "x.fixed.gguf"), "--corpus", str(corpus),
                           "--no-default-corpora", "--json", str(tmp / "repair.json"), *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_the_key_causes_are_repaired_and_the_file_then_agrees_three_ways(tmp_path):
    original, gguf, corpus = twin(tmp_path)
    done = repair(tmp_path, original, gguf, corpus)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "repair.json").read_text())
    assert report["before"]["conversion_differ"] == 3  # " zebra" twice (ignore_merges), "x <tool> y" (CONTROL)
    assert {r["cause"]: (r["before"], r["after"]) for r in report["per_cause"]} == {
        "pre-name": (2, 0), "token-types": (1, 0)}
    assert {k: v for k, v in report["after"].items() if k != "layers"} == {
        "compared": 5, "conversion_differ": 0, "parity_differ": 0, "parity_cases": [], "llama_failed": []}
    assert all(row["after"] is None or row["after"] <= row["before"] for row in report["layers"]), report["layers"]
    assert [a["name"] for a in report["applied"]] == ["pre-name", "token-types"]
    assert "pre-name" in done.stdout and "wrote" in done.stdout
    before, after = read(gguf), read(tmp_path / "x.fixed.gguf")
    assert after.metadata["tokenizer.ggml.pre"] == "llama-bpe"
    tool = json.loads(original.read_text())["added_tokens"]
    tool_id = next(t["id"] for t in tool if t["content"] == rf.TOOL)
    assert int(after.metadata["tokenizer.ggml.token_type"][tool_id]) == 4
    changed = {"tokenizer.ggml.pre", "tokenizer.ggml.token_type"}
    assert set(report["changed_keys"]) == changed
    for key, value in before.metadata.items():
        if key not in changed:
            assert np.array_equal(np.asarray(after.metadata[key]), np.asarray(value)), key
    assert report["loads"]["ours"].startswith("loaded")


def test_a_file_that_agrees_already_is_left_alone(tmp_path):
    original, _, corpus = twin(tmp_path, pre="llama-bpe")
    gguf = rf.bpe_gguf(original, tmp_path / "y.gguf", pre="llama-bpe", add_bos=False)  # <tool> not retyped
    corpus.write_text(json.dumps({"id": "ok", "text": "the cat"}) + "\n")
    done = repair(tmp_path, original, gguf, corpus)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing to repair" in done.stdout and not (tmp_path / "x.fixed.gguf").exists()


def test_ids_that_agree_with_a_layer_that_does_not_are_said_and_exit_1(tmp_path):
    # <tool> typed CONTROL: llama.cpp gives it no piece unless special is asked, the original decodes it
    original, gguf, corpus = twin(tmp_path, pre="llama-bpe")
    corpus.write_text(json.dumps({"id": "ok", "text": "the cat"}) + "\n")
    done = repair(tmp_path, original, gguf, corpus)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "nothing to repair" not in done.stdout and not (tmp_path / "x.fixed.gguf").exists()
    assert "give the same ids on every case, but pieces 1 differ; no key fix is tried" in done.stdout


def test_a_difference_no_key_fixes_writes_nothing_and_exits_1(tmp_path):
    """Merges the GGUF lost: no candidate change brings them back, so the case is unexplained."""
    original, gguf, corpus = twin(tmp_path, pre="llama-bpe")
    from harness.models.gguf_writer import rewrite
    merges = list(read(gguf).metadata["tokenizer.ggml.merges"])
    rewrite(gguf, tmp_path / "fewer.gguf", {"tokenizer.ggml.merges": merges[:5]})
    corpus.write_text(json.dumps({"id": "c", "text": "the cat sat on the mat"}) + "\n")
    done = repair(tmp_path, original, tmp_path / "fewer.gguf", corpus)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no key fix applies" in done.stdout and "unexplained" in done.stdout
    assert not (tmp_path / "x.fixed.gguf").exists()


# --- every layer measured; a fix that makes one worse is not written (issue 42, section 3) ---------------------

RUNS_ALONE = ["\u2581\u2581", "\u2581\u2581\u2581", "a  b", "x   y"]


def gemma_twin(tmp: Path, texts: list[str], *, add_space_prefix: bool | None = None) -> tuple[Path, Path, Path]:
    """tests/reference_files.py's Gemma-style original and its GGUF as the converter's tokenizer.json path writes
    it: the whitespace-run added tokens typed NORMAL, add_space_prefix absent (so on) unless given."""
    original = rf.gemma_style_json(tmp / "o" / "tokenizer.json")
    gguf = rf.gemma_style_gguf(original, tmp / "g.gguf", add_space_prefix=add_space_prefix)
    corpus = tmp / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return original, gguf, corpus


def test_a_fix_that_makes_a_layer_worse_is_not_written_and_the_cause_s_other_fix_is(tmp_path):
    """The issue's Gemma file in small: the runs of U+2581 alone differ, and both `added-token-types` (first in the
    candidates' order) and `add-space-prefix` make them agree. Retyped USER_DEFINED, a run is detokenized
    literally by llama.cpp (`'▁▁'` for `'  '`): repair wrote that fix before; now it measures every layer, names
    the regression with its counts and keeps `add_space_prefix = false`, which breaks nothing."""
    original, gguf, corpus = gemma_twin(tmp_path, RUNS_ALONE)
    done = repair(tmp_path, original, gguf, corpus)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "repair.json").read_text())
    first, kept = report["trials"]
    assert first["set"] == ["added-token-types"] and first["verdict"].startswith("not kept: makes a layer worse")
    pieces = first["worse"]["pieces"]
    assert (pieces["before"], pieces["after"], pieces["new"]) == (0, 4, 4)  # each run, unparse_special off and on
    run = json.loads(original.read_text())["model"]["vocab"][rf.WHITESPACE_RUNS[0]]
    assert f"token {run} (unparse_special off): llama.cpp '▁▁', original '  '" in pieces["examples"]
    assert first["worse"]["detokenize"]["new"] > 0  # a run detokenized literally: '▁▁' where the original has '  '
    assert "c0: llama.cpp '▁▁', original '  '" in first["worse"]["detokenize"]["examples"]
    assert kept["set"] == ["add-space-prefix"] and kept["verdict"] == "kept" and not kept["worse"]
    assert [a["name"] for a in report["applied"]] == ["add-space-prefix"]
    assert report["changed_keys"] == ["tokenizer.ggml.add_space_prefix"]
    layers = {row["layer"]: (row["before"], row["after"]) for row in report["layers"]}
    assert layers["ids"] == (16, 0) and layers["detokenize"][1] == 0 and layers["pieces"] == (0, 0)
    assert layers["specials"] == (0, 0) and layers["eog"] == (0, 0) and layers["messages"] == (None, None)
    fixed = read(tmp_path / "x.fixed.gguf").metadata
    assert fixed["tokenizer.ggml.add_space_prefix"] is False
    runs = [fixed["tokenizer.ggml.tokens"].index(r) for r in rf.WHITESPACE_RUNS]
    assert [int(fixed["tokenizer.ggml.token_type"][i]) for i in runs] == [1, 1]  # left NORMAL
    assert "tried: added-token-types for cause added-token-types" in done.stdout
    assert "makes a layer worse: detokenize " in done.stdout and "pieces 0 -> 4 (4 new)" in done.stdout
    assert "end-of-generation" in done.stdout and "not measured: the original has no chat template" in done.stdout


def test_a_fix_only_a_regression_makes_is_refused_unless_allowed(tmp_path):
    """With add_space_prefix already false, the literal runs inside words need the retyping alone: not written
    (exit 1, the layer and the counts named); `--allow-regression` writes it and says so (exit 1 still)."""
    texts = ["a\u2581\u2581b", "x\u2581\u2581\u2581y", "the cat"]
    original, gguf, corpus = gemma_twin(tmp_path, texts, add_space_prefix=False)
    done = repair(tmp_path, original, gguf, corpus)
    assert done.returncode == 1, done.stdout + done.stderr
    assert not (tmp_path / "x.fixed.gguf").exists()
    assert "no key fix applies without making a layer worse" in done.stdout
    assert "not applied: added-token-types: makes a layer worse: detokenize 0 -> " in done.stdout
    assert "pieces 0 -> 4 (4 new) (--allow-regression writes it anyway)" in done.stdout
    allowed = repair(tmp_path, original, gguf, corpus, "--allow-regression")
    assert allowed.returncode == 1, allowed.stdout + allowed.stderr
    report = json.loads((tmp_path / "repair.json").read_text())
    assert report["trials"][0]["verdict"].startswith("kept with --allow-regression, though it makes a layer worse")
    assert report["after"]["conversion_differ"] == 0 and report["after"]["layers"]["pieces"]["differ"] == 4


def test_a_tekken_original_is_repaired_as_the_others_are(tmp_path):
    """`repair --reference tekken:` was refused ("reads hf: or spm:"). The tekken twin's one cause is llama.cpp's
    own rewrite of the pattern (the combining marks left out): measured, named, not written, exit 1."""
    original = rf.tekken_json(tmp_path / "o" / "tekken.json")
    gguf = rf.tekken_gguf(original, tmp_path / "t.gguf")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n"
                              for i, t in enumerate([rf.KI, "the cat", "hello world"])))
    done = subprocess.run([sys.executable, "-m", "harness", "repair", str(gguf), "--reference", f"tekken:{original}",
                           "--out", str(tmp_path / "x.fixed.gguf"), "--corpus", str(corpus), "--no-default-corpora",
                           "--reference-arg", "add_bos=true", "--json", str(tmp_path / "repair.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "repair.json").read_text())
    assert report["per_cause"] == [{"cause": "original-pattern", "before": 1, "after": None}]
    assert report["before"]["layers"]["ids"]["differ"] == 4 and report["before"]["layers"]["pieces"]["checked"] > 0
    assert "not applied: original-pattern: a llama.cpp behaviour no GGUF key carries" in done.stdout
    assert not (tmp_path / "x.fixed.gguf").exists()


@pytest.mark.parametrize("bad", ["same-file", "not-gguf", "tekken"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, bad):
    original, gguf, corpus = twin(tmp_path)
    out = tmp_path / "x.fixed.gguf"
    if bad == "same-file":
        out = gguf
    reference = f"hf:{original.parent}"
    if bad == "not-gguf":
        gguf = tmp_path / "junk.gguf"
        gguf.write_bytes(b"not a gguf at all")
    if bad == "tekken":
        reference = f"tekken:{original}"
    done = subprocess.run([sys.executable, "-m", "harness", "repair", str(gguf), "--reference", reference,
                           "--out", str(out), "--corpus", str(corpus), "--no-default-corpora"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "Traceback" not in done.stderr



@pytest.mark.nightly
def test_the_early_llama3_gguf_repaired_agrees_with_its_original(tmp_path):
    """The real set's smaug-bpe conversion (`fetch --real`, `convert --real`): repaired, " jeho" is [101503]
    in llama.cpp too, as in the original (docs/conversion-findings.md: the 588 vocabulary words)."""
    from harness.models.real_set import real_dir, real_gguf_dir
    original, gguf = real_dir() / "llama3-early", real_gguf_dir() / "llama3-early.gguf"
    for path in (original / "tokenizer.json", gguf):
        if not path.is_file():
            pytest.skip(f"{path} missing (python -m harness fetch --real; python -m harness convert --real)")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n"
                              for i, t in enumerate([" jeho", "Tiếng Việt", "Hello world"])))
    done = repair(tmp_path, original / "tokenizer.json", gguf, corpus)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "repair.json").read_text())
    assert report["per_cause"] == [{"cause": "pre-name", "before": 2, "after": 0}]
    assert report["changed_keys"] == ["tokenizer.ggml.pre"]
    jeho = report["causes"]["c0"]["evidence"][0]
    assert jeho["original"] == jeho["llama.cpp"] == [101503]


# --- NaN and infinite values (issue 47: "repair and NaN") --------------------------------------------

def test_a_nan_float_key_is_named_and_the_causes_are_still_found(tmp_path):
    """One NaN in a float key made every rewrite "fail" its read-back (NaN != NaN): each key candidate could not
    be tried, another cause was blamed and "no key fix applies". Now the causes are the twin's own, the fix is
    written with the NaN kept, and the NaN is named as a finding about the file (exit 1: it is still there)."""
    from harness.models.gguf_writer import rewrite

    original, gguf, corpus = twin(tmp_path)
    rewrite(gguf, tmp_path / "nan.gguf", {"general.some_float": float("nan")})
    done = repair(tmp_path, original, tmp_path / "nan.gguf", corpus)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "repair.json").read_text(), parse_constant=_no_constant)
    assert {r["cause"]: (r["before"], r["after"]) for r in report["per_cause"]} == {
        "pre-name": (2, 0), "token-types": (1, 0)}
    assert [a["name"] for a in report["applied"]] == ["pre-name", "token-types"]
    assert report["non_finite"]["after"] == [{"key": "general.some_float", "count": 1, "first": [[None, "NaN"]]}]
    assert "finding about the file" in done.stdout and "general.some_float: 1 non-finite value (NaN)" in done.stdout
    assert "no key fix applies" not in done.stdout
    assert np.isnan(read(tmp_path / "x.fixed.gguf").metadata["general.some_float"])


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in JSON: not JSON")


def test_a_nan_score_is_refused_naming_the_key_and_the_token(tmp_path):
    """A NaN score leaves llama.cpp's merge order undefined and our engine refuses the file: exit 2 naming the
    token and the key, before any work (it was an internal error, exit 3)."""
    from harness.models.gguf_writer import write

    original = rf.spm_model(tmp_path / "o" / "tokenizer.model", config={"add_bos_token": False})
    tokens = [f"t{i}" for i in range(8)]
    scores = [0.0, -1.0, float("nan"), -3.0, float("inf"), -5.0, -6.0, -7.0]
    write(tmp_path / "nan.gguf", {"general.architecture": "llama", "tokenizer.ggml.model": "llama",
                                  "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
                                  "tokenizer.ggml.token_type": [1] * 8})
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "c", "text": "the cat"}) + "\n")
    done = subprocess.run([sys.executable, "-m", "harness", "repair", str(tmp_path / "nan.gguf"), "--reference",
                           f"spm:{original}", "--out", str(tmp_path / "x.fixed.gguf"), "--corpus", str(corpus),
                           "--no-default-corpora"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "token 2 has a NaN score" in done.stderr
    assert "tokenizer.ggml.scores: 2 non-finite values (NaN at 2, inf at 4)" in done.stderr
