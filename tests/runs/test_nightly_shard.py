"""The nightly's own steps sharded: 4 parts merged by merge-reports equal the unsharded step.

For `drift`, `chat` and `selftest` (docs/sharding.md), each on a small input with a
planted finding, so the lists compared are not empty: the unsharded result, then
`--shard K/4` for K = 1..4, then `merge-reports` over the four parts. The merged
file must hold the same cases, the same findings in the same order and give the
same exit status as the unsharded one (timings, the shard records and the merged
folder names aside); a part must say it is one. And `pytest --shard K/4` runs each
selected test in exactly one part.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.golden import files as goldens

ROOT = Path(__file__).resolve().parents[2]
PARTS = 4
NOT_COMPARED = {"seconds", "shard", "shards", "merged", "lines", "jobs", "meta"}  # meta: date, duration, command
SCRATCH = re.compile(r"gguf-parity-selftest-[^/]+/")  # a selftest part's own scratch folder in its commands


def comparable(value):
    """`value` without timings and the shard and merge records (lines are compared by their counts)."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in NOT_COMPARED}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return SCRATCH.sub("gguf-parity-selftest-*/", value) if isinstance(value, str) else value


def sharded(capsys, tmp_path: Path, command: list[str], name: str, report: str = "--report") -> tuple[dict, dict, int]:
    """(unsharded result, merge of the 4 parts, the two exit codes equal): each part checked to name its shard."""
    whole = main([*command, report, str(tmp_path / "whole")])
    capsys.readouterr()
    for k in range(1, PARTS + 1):
        assert main([*command, "--shard", f"{k}/{PARTS}", report, str(tmp_path / f"part-{k}")]) in (0, 1)
        assert f"shard {k}/{PARTS}" in capsys.readouterr().out  # a part says it is one
    merged = main(["merge-reports", *(str(tmp_path / f"part-{k}") for k in range(1, PARTS + 1)),
                   "--out", str(tmp_path / "merged")])
    assert merged == whole, capsys.readouterr()
    read = [json.loads((tmp_path / d / name).read_text(encoding="utf-8")) for d in ("whole", "merged")]
    assert read[1]["shards"][0]["count"] == PARTS
    return read[0], read[1], whole


# --- drift ----------------------------------------------------------------------------------------

FEW = [{"id": "hello", "text": "Hello world"}, {"id": "special", "text": " <s>x</s> "},
       {"id": "bad-utf8", "bytes": "ff41"}, {"id": "empty", "text": ""}, {"id": "digits", "text": "12345 678"},
       {"id": "mixed", "text": "naïve café, 東京"}]


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
@pytest.mark.vocab
def test_drift_in_four_shards_merges_to_the_unsharded_drift(require_vocab, tmp_path: Path, capsys):
    """Two goldens of 6 cases, one changed case and one changed vocabulary entry planted; one golden is split."""
    for name in ("llama-spm", "gpt-2"):
        require_vocab(name)
    corpus = tmp_path / "few.jsonl"
    corpus.write_text("".join(json.dumps(c) + "\n" for c in FEW), encoding="utf-8")
    folder = tmp_path / "golden"
    assert main(["record", "--model", "llama-spm", "--model", "gpt-2", "--corpus", str(corpus),
                 "--out", str(folder)]) == 0
    file = folder / "ggml-vocab-gpt-2.json"
    older = copy.deepcopy(goldens.load_golden(file))  # as if an older llama.cpp had said otherwise
    older["cases"][-1]["encode"][0]["ids"] = [1, 2, 3]
    older["tokenizer"]["clean_spaces"] = not older["tokenizer"]["clean_spaces"]
    goldens.write_golden(file, older)
    whole, merged, code = sharded(capsys, tmp_path, ["drift", "--golden", str(folder)], "drift.json")
    assert code == 1
    assert comparable(merged) == comparable(whole)
    [gpt2] = [g for g in merged["goldens"] if g["file"] == file.name]
    assert gpt2["cases"] == len(older["cases"]) and len(gpt2["changes"]) == 2
    assert gpt2["changes"][0].startswith("tokenizer.")  # the model's own line first, as unsharded
    parts = [json.loads((tmp_path / f"part-{k}" / "drift.json").read_text()) for k in range(1, PARTS + 1)]
    assert sum(len(p["goldens"]) for p in parts) > len(whole["goldens"]), "no golden was split: a weak test"


# --- chat -----------------------------------------------------------------------------------------

@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
def test_chat_in_four_shards_merges_to_the_unsharded_check(tmp_path: Path, capsys, monkeypatch):
    """Three templates, 2 fuzzed conversations each, one rendering bug planted: the same findings."""
    from harness.chat import helper_build
    from harness.chat.run import select
    from tests.chat_plants import plant_one_character_change

    if not helper_build.helper_path().is_file():
        pytest.skip("chat helper not built: python -m harness chat --build-helper")
    plant_one_character_change(monkeypatch)
    targets = [t.name for t in select(None) if t.name.startswith("tmpl-")][:3]
    command = ["chat", *(a for t in targets for a in ("--target", t)), "--no-corpus", "--fuzz", "2", "--seed", "3"]
    whole, merged, code = sharded(capsys, tmp_path, command, "messages.json")
    assert code == 1 and whole["findings"]
    assert comparable(merged) == comparable(whole)
    assert len(merged["lines"]) == len(whole["lines"]) and not merged["lines"][0].startswith("messages, shard")


def test_chat_shard_refuses_the_three_way_check(capsys):
    assert main(["chat", "--real", "--shard", "1/2"]) == 2
    assert "--shard" in capsys.readouterr().err


# --- selftest -------------------------------------------------------------------------------------

@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.vocab
def test_selftest_in_four_shards_merges_to_the_unsharded_kill_table(require_vocab, tmp_path: Path, capsys):
    """Two mutants under the vectors detector: one killed, one survivor (so the verdict is 1 both ways)."""
    for name in ("llama-spm", "bert-bge"):
        require_vocab(name)
    command = ["selftest", "--mutant", "spm-no-byte-fallback", "--mutant", "wpm-accents-kept",
               "--detector", "vectors", "--no-baseline"]
    whole, merged, code = sharded(capsys, tmp_path, command, "selftest.json")
    assert code == 1
    assert comparable(merged) == comparable(whole)
    kills = {r["id"]: r["results"]["vectors"]["killed"] for r in merged["mutants"]}
    assert kills == {"spm-no-byte-fallback": True, "wpm-accents-kept": False}


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.vocab
def test_selftest_until_main_kill_in_four_shards_merges_to_the_unsharded_kill_table(require_vocab, tmp_path: Path,
                                                                                      capsys):
    """The nightly's way (`--until-main-kill`, golden then live+fuzz): each part runs golden's baseline for
    its own mutants only when one needs it, never live+fuzz's; the merge is the unsharded table."""
    require_vocab("llama-spm")
    command = ["selftest", "--mutant", "spm-no-byte-fallback", "--mutant", "spm-merge-score-sign",
               "--detector", "golden", "--detector", "live+fuzz", "--until-main-kill", "--likely-only"]
    whole, merged, code = sharded(capsys, tmp_path, command, "selftest.json")
    assert code == 0
    assert comparable(merged) == comparable(whole)
    assert "baseline_differs" not in merged and list(merged["vocabularies"]) == ["golden"]
    assert {r["results"]["live+fuzz"]["outcome"] for r in merged["mutants"]} == {"skipped"}


def test_selftest_merge_refuses_parts_of_different_runs(tmp_path: Path, capsys):
    from harness.selftest.report import summarize
    for name, fuzz in (("a", 20), ("b", 5)):
        rows = [{"id": name, "area": "spm", "results": {}}]
        data = {"settings": {"scope": "main", "detectors": ["vectors"], "fuzz": fuzz, "seed": 0},
                "vocabularies": {}, "baseline_failures": {}, "seconds": 1, "columns": ["vectors"],
                "mutants": rows, "summary": summarize(rows, ["vectors"])}
        (tmp_path / name).mkdir()
        (tmp_path / name / "selftest.json").write_text(json.dumps(data))
    assert main(["merge-reports", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")]) == 2
    assert "fuzz=5" in capsys.readouterr().err


def test_merge_refuses_folders_of_different_kinds(tmp_path: Path, capsys):
    for name, file in (("a", "drift.json"), ("b", "messages.json")):
        (tmp_path / name).mkdir()
        (tmp_path / name / file).write_text("{}")
    assert main(["merge-reports", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")]) == 2
    assert "different results" in capsys.readouterr().err


# --- pytest ---------------------------------------------------------------------------------------

def collected(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--nightly", "-m", "nightly", *args, "tests/golden/test_golden.py",
                           "tests/inputs/test_fuzz.py"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
def test_pytest_shards_run_every_selected_test_once():
    whole = collected()
    parts = [collected("--shard", f"{k}/{PARTS}") for k in range(1, PARTS + 1)]
    assert len(whole) >= PARTS and all(parts)
    assert [t for part in parts for t in part] == whole  # contiguous, in order, each once
