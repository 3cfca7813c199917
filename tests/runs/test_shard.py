"""`--shard K/N` and `merge-reports` over shards (harness/runs/shard.py, docs/sharding.md).

The partition: every unit in exactly one shard whatever N is, contiguous, balanced
by weight (cases), the same on every call. `merge-reports` refuses overlapping and
missing shards with one line (exit 2). The end-to-end check (oracle-backed) runs a
small selection unsharded and as 3 shards and compares the merged report.json with
the unsharded one case for case, timings and report paths aside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.compare.result import ModelResult
from harness.errors import SetupError
from harness.runs import shard

ROOT = Path(__file__).resolve().parents[2]


def units(weights: dict[str, list[int]]) -> list[shard.Unit]:
    return [shard.Unit(group, f"c{i}", w) for group, ws in weights.items() for i, w in enumerate(ws)]


WORK = units({"a": [1] * 40, "b": [1] * 7, "c": [1] * 300 + [20], "d": [1] * 3, "e": [1] * 90})


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 19, 500])
def test_every_unit_lands_in_exactly_one_shard(count):
    owned = [shard.partition("run", WORK, shard.Shard(k, count)).owned for k in range(1, count + 1)]
    keys = [(g, i) for part in owned for g, items in part.items() for i in items]
    assert sorted(keys) == sorted((u.group, u.item) for u in WORK)  # no unit twice, none missing


@pytest.mark.parametrize("count", [2, 3, 5])
def test_shards_are_contiguous_and_balanced_by_weight(count):
    assigned = shard.cut(WORK, count)
    assert assigned == sorted(assigned) and set(assigned) == set(range(1, count + 1))
    total, heaviest = sum(u.weight for u in WORK), max(u.weight for u in WORK)
    for k in range(1, count + 1):
        weight = sum(u.weight for u, s in zip(WORK, assigned, strict=True) if s == k)
        assert abs(weight - total / count) <= heaviest


def test_balance_is_by_cases_not_by_vocabulary():
    # one big vocabulary and four small ones: a per-vocabulary split would put >= 320 cases in one shard
    parts = [shard.partition("run", WORK, shard.Shard(k, 3)) for k in (1, 2, 3)]
    assert [p.owned_weight for p in parts] == [153, 154, 153]
    assert parts[0].owns("c", "c0") and parts[1].owns("c", "c200") and parts[2].owns("c", "c300")


def test_partition_identity_is_stable_and_names_the_work():
    one = shard.partition("run", WORK, shard.Shard(1, 3))
    assert one.digest == shard.partition("run", list(WORK), shard.Shard(2, 3)).digest
    assert one.digest != shard.partition("compare", WORK, shard.Shard(1, 3)).digest
    assert one.digest != shard.partition("run", WORK[:-1], shard.Shard(1, 3)).digest
    assert one.meta() == {"index": 1, "count": 3, "kind": "run", "partition": one.digest, "units": len(WORK),
                          "weight": 460, "owned_units": 153, "owned_weight": 153}


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2"])
def test_bad_shard_is_a_setup_error(text):
    with pytest.raises(SetupError, match="--shard"):
        shard.Shard.parse(text)


def test_case_part_keeps_only_case_level_outcomes():
    result = ModelResult("m", "spm", cases=2)
    result.capabilities = {"ids": {"status": "checked", "checked": 2, "agree": 2, "differ": 0, "errors": 0,
                                   "not_applicable": 0},
                           "text": {"status": "checked", "checked": 1, "agree": 0, "differ": 1, "errors": 0,
                                    "not_applicable": 0}}
    result.add("engine_errors", {"case_id": "<load>", "error": "x"})
    result.add("vocab_mismatches", {"field": "text", "token": 3})
    result.add("mismatches", {"case_id": "edge-1"})
    result.notes += ["engine failed to load: X", "fuzz: minimal failing input f after 3 examples",
                     "llama.cpp crashed loading the vocabulary", "harness fault on edge-2: worker died"]
    result.not_checked = "why"
    shard.case_part(result)
    assert [e["case_id"] for e in result.mismatches] == ["edge-1"] and not result.engine_errors
    assert not result.vocab_mismatches and result.not_checked is None
    assert result.notes == ["fuzz: minimal failing input f after 3 examples", "harness fault on edge-2: worker died"]
    assert result.capabilities["ids"]["checked"] == 2
    assert result.capabilities["text"] == {"status": "not checked", "checked": 0, "agree": 0, "differ": 0,
                                           "errors": 0, "not_applicable": 0}



def test_case_part_keeps_every_flake_and_fault():
    """A flake or fault is an event of this shard's own run: it stays, even on <load> or <vocab>."""
    result = ModelResult("m", "spm", cases=1)
    result.add_flake({"case_ids": ["<load>"], "op": "hello", "first": "exit 3", "recheck": "answered"})
    result.add_flake({"case_ids": ["edge-1", "edge-2"], "op": "tokenize", "first": "hung", "recheck": "answered"})
    result.add_fault({"case_id": "<vocab>", "op": "inspect", "crash": {}, "reason": "worker died"})
    shard.case_part(result)
    assert [f["case_ids"] for f in result.engine_flakes] == [["<load>"], ["edge-1", "edge-2"]]
    assert [f["case_id"] for f in result.harness_faults] == ["<vocab>"]
    assert sum(n.startswith(("engine flake", "harness fault")) for n in result.notes) == 3

# --- merge-reports ---------------------------------------------------------------------------

def shard_report(tmp_path: Path, name: str, index: int, count: int, *, digest: str = "abc") -> Path:
    """A shard's report.json: one model of 2 cases, named after the partition and the shard; the part's
    own name in its meta (two parts are never the same bytes: merge-reports refuses one part twice)."""
    report = {"version": 1, "meta": {"shard": {"index": index, "count": count, "kind": "run", "partition": digest},
                                     "part": name},
              "summary": {"per_model": {f"{digest}-m{index}": {"family": "spm", "cases": 2}}}}
    folder = tmp_path / name
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    return folder


@pytest.mark.parametrize("given, message", [
    ([(1, 3), (2, 3)], "missing shard(s) 3/3 (have 1/3, 2/3)"),
    ([(1, 2), (1, 2), (2, 2)], "overlapping shards: 1/2 is in both"),
    ([(1, 2), (2, 3), (3, 3)], "shards of different N (2, 3)"),
])
def test_merge_refuses_shards_that_do_not_add_up(tmp_path, capsys, given, message):
    dirs = [shard_report(tmp_path, f"r{i}", k, n) for i, (k, n) in enumerate(given)]
    assert main(["merge-reports", *map(str, dirs), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "m" / "report.json").exists()


def test_merge_puts_shards_in_order_beside_unsharded_parts(tmp_path):
    three, one = (shard_report(tmp_path, f"s{k}", k, 3) for k in (3, 1))
    other = shard_report(tmp_path, "other", 1, 1, digest="zzz")
    two = shard_report(tmp_path, "s2", 2, 3)
    assert main(["merge-reports", str(three), str(other), str(one), str(two), "--out", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "report.json").read_text())
    assert merged["meta"]["merged"] == [str(one), str(two), str(three), str(other)]
    assert [s["partition"] for s in merged["meta"]["shards"]] == ["abc", "zzz"]
    assert merged["summary"]["cases"] == 8


# --- end to end: unsharded == merge of 3 shards ---------------------------------------------

TIMING = {"seconds", "elapsed", "duration", "started", "finished"}


def harness(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=900, check=False)


def comparable(report: dict, report_dirs: list[Path]) -> dict:
    """report.json without meta and timings; report folders (in reproduce commands) made one."""
    text = json.dumps({k: v for k, v in report.items() if k != "meta"}, sort_keys=True)
    for folder in report_dirs:
        text = text.replace(str(folder), "<report>")
    return _drop_timing(json.loads(text))


def _drop_timing(value):
    if isinstance(value, dict):
        return {k: _drop_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_drop_timing(v) for v in value]
    return value


def run_sharded(tmp_path: Path, command: list[str], count: int) -> tuple[dict, dict, list[dict]]:
    """(unsharded report, merge of `count` shards, the shards' meta.shard)."""
    whole = tmp_path / "whole"
    done = harness(*command, "--report", str(whole), "--found-dir", str(tmp_path / "found-whole")) \
        if command[0] == "run" else harness(*command, "--report", str(whole))
    assert done.returncode in (0, 1), done.stderr
    parts = []
    for k in range(1, count + 1):
        part = tmp_path / f"shard-{k}"
        extra = ["--found-dir", str(tmp_path / f"found-{k}")] if command[0] == "run" else []
        done = harness(*command, "--shard", f"{k}/{count}", "--report", str(part), *extra)
        assert done.returncode in (0, 1), done.stderr
        parts.append(part)
    done = harness("merge-reports", *map(str, parts), "--out", str(tmp_path / "merged"))
    assert done.returncode in (0, 1), done.stderr
    read = [json.loads((d / "report.json").read_text(encoding="utf-8")) for d in [whole, tmp_path / "merged"]]
    metas = [json.loads((p / "report.json").read_text(encoding="utf-8"))["meta"]["shard"] for p in parts]
    dirs = [whole, *parts]
    return comparable(read[0], dirs), comparable(read[1], dirs), metas


SMALL = ["--model", "llama-spm", "--model", "bert-bge", "--model", "gpt-2"]


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
@pytest.mark.usefixtures("default_environment")  # a default run, also in the nightly
def test_three_shards_merge_to_the_unsharded_run(tmp_path, require_vocab):
    for name in ("llama-spm", "bert-bge", "gpt-2"):
        require_vocab(name)
    corpus = tmp_path / "planted.jsonl"  # planted faults, so the lists compared are not empty
    corpus.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n"
                              for i, t in enumerate(["a ZQXWRONG b", "ZQXRAISE", "\tx"])), encoding="utf-8")
    # Without the long phases: they run per model in the shard holding the model, on that shard's cases
    # (docs/long-inputs.md), so only the phases' notes and the documents' counts would differ.
    whole, merged, metas = run_sharded(tmp_path, ["run", *SMALL, "--corpus", str(corpus), "--fuzz", "5", "--seed",
                                                  "0", "--engine", "tests.broken_engine:load_tab", "--quiet",
                                                  "--long-docs", "0", "--calls", "0"], 3)
    assert whole["mismatches"] and whole["engine_errors"] and whole["summary"]["cases"] > 100
    assert [m["index"] for m in metas] == [1, 2, 3] and len({m["partition"] for m in metas}) == 1
    assert sum(m["owned_units"] for m in metas) == metas[0]["units"]
    assert merged == whole


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
def test_three_shards_of_the_golden_replay_merge_to_the_unsharded_one(tmp_path, require_vocab):
    for name in ("llama-spm", "bert-bge", "gpt-2"):
        require_vocab(name)
    whole, merged, metas = run_sharded(tmp_path, ["compare", "--golden", str(ROOT / "golden"), *SMALL,
                                                  "--engine", "tests.broken_engine:load_tab", "--quiet"], 3)
    assert whole["mismatches"] and whole["summary"]["cases"] > 100
    assert [m["kind"] for m in metas] == ["compare"] * 3 and len({m["partition"] for m in metas}) == 1
    assert merged == whole


# --- selftest (a unit per mutant) and chat (a unit per template) ------------------------------

def test_selftest_shards_split_the_mutants(capsys):
    listed = []
    for k in (1, 2, 3):
        assert main(["selftest", "--list", "--shard", f"{k}/3"]) == 0
        listed.append([line.split()[0] for line in capsys.readouterr().out.splitlines()[:-1]])
    assert main(["selftest", "--list"]) == 0
    every = [line.split()[0] for line in capsys.readouterr().out.splitlines()[:-1]]
    assert [m for part in listed for m in part] == every and all(listed)
    assert max(map(len, listed)) - min(map(len, listed)) <= 1


def test_chat_shards_split_the_templates():
    from types import SimpleNamespace

    from harness.commands.chat import _shard
    targets = [SimpleNamespace(name=f"tmpl-{i}") for i in range(71)]
    owned = [[t.name for t in targets if _shard(targets, f"{k}/4").owns(t.name)] for k in (1, 2, 3, 4)]
    assert [n for part in owned for n in part] == [t.name for t in targets]
    assert sorted(map(len, owned)) == [17, 18, 18, 18]
    assert _shard(targets, None) is None


def test_a_models_own_unit_goes_with_its_first_case():
    # "b" starts where the cut between shards 1 and 2 falls: its <model> unit must not be left alone
    work = [shard.Unit("a", shard.MODEL), *units({"a": [1] * 4}), shard.Unit("b", shard.MODEL),
            *units({"b": [1] * 6})]
    assert shard.cut(work, 2)[5:7] == [1, 2]  # the plain cut would split them
    second = shard.partition("run", work, shard.Shard(2, 2))
    assert second.owns("b") and second.owns("b", "c0")
    first = shard.partition("run", work, shard.Shard(1, 2))
    assert not first.items("b")
