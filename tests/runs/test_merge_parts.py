"""merge-reports believes nothing (harness/runs/merge_parts.py, docs/sharding.md "What a part must be").

A part comes from another machine: every malformed part is one line and exit 2 naming
the part and the field, never exit 3; a part whose counts disagree with its entries is
refused, so negative counts cannot cancel another part's findings; the same part twice,
two runs of the same cases, mixed llama.cpp builds and absurd shard records are refused.
The corpus of malformed parts is generated here from legit parts of each kind, one
malformation per row; a sweep puts a hostile value in every field of a legit part.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.compare.result import ModelResult
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN
from harness.report import build, reference_summary
from harness.subjects import capabilities as caps

ROOT = Path(__file__).resolve().parents[2]
RUN = "python -m harness run --model llama-spm"


# --- legit parts, one of each kind, with every kind of entry ---------------------------------------

def model_result(model: str = "llama-spm", *, cases: int = 20) -> ModelResult:
    """One model with an entry in every list a report carries, each shaped as the harness writes it."""
    r = ModelResult(model, "spm", cases=cases)
    base = {"text": "a b", "bytes": None, "command": f"{RUN} --case c"}
    aligned = [{"index": 0, "expected": 1, "expected_text": "a", "got": 2, "got_text": "b", "differs": True}]
    detok = [{"remove_special": False, "unparse_special": False, "expected": "a", "got": "b"}]
    r.add("mismatches", {**base, "case_id": "m1", "add_special": True, "parse_special": False, "expected": [1],
                         "got": [2], "first_diff": 0, "category": "merge order", "aligned": aligned,
                         "detokenize": detok, "expected_piece": "a", "got_piece": "b", "expected_piece_hex": "61",
                         "got_piece_hex": "62"})
    r.add("engine_errors", {**base, "case_id": "e1", "error": "boom", "traceback": "tb", "capability": "tokenize"})
    r.add("oracle_crashes", {**base, "case_id": "c1", "bytes": "f4908080", "crash": {
        "kind": "signal", "signal": "SIGABRT", "reason": "killed by SIGABRT", "stderr": "GGML_ASSERT", "call": "tok"}})
    r.add("known_oracle_crashes", {**base, "case_id": "k1", "known_crash": "demo",
                                   "crash": {"reason": "killed by SIGABRT", "stderr": "what():  invalid codepoint"}})
    r.add("vocab_mismatches", {"field": "score", "token": 3, "category": "vocabulary", "sides": True,
                               "expected": {"text": "a", "score": 0.5, "attr": 1, "value": 0.5},
                               "got": {"text": "a", "score": 0.25, "attr": 1, "value": 0.25}})
    r.add("vocab_mismatches", {"field": "pre", "token": None, "category": "vocabulary", "expected": "x", "got": "y"})
    token_rows = [{"side": side, "ids": [1], "tokens": [{"id": 1, "text": "a", "piece": "a"}]}
                  for side in ("engine", "llama.cpp", "original")]
    decode = [{"remove_special": False, "unparse_special": False, "llama_hex": "61", "original_hex": "62",
               "llama_text": "a", "original_text": "b", "original_raw": "b", "original_cleaned": "b"}]
    r.add("reference_findings", {**base, "case_id": "r1", "class": "conversion", "category": "conversion",
                                 "add_special": True, "parse_special": False, "compared": ["llama.cpp", "original"],
                                 "expected": [1], "got": [2], "first_diff": 0, "rows": token_rows,
                                 "gguf_keys": ["tokenizer.ggml.pre"], "text_window": [0, 3, 3], "decode": decode,
                                 "cause": {"cause": "pre-name", "evidence": [
                                     {"add_special": True, "parse_special": False, "original": [1],
                                      "llama.cpp": [1]}]}})
    r.add_flake({"case_ids": ["f1"], "op": "tokenize", "first": "exit 3", "recheck": "a fresh process answered"})
    r.add_fault({"case_id": "h1", "op": "tokenize", "crash": {"kind": "timeout", "timeout": 5.0}, "reason": "hung"})
    r.capabilities = caps.new_tally(caps.ALL)
    for outcome in ("agree", "agree", "differ", "errors", "not_applicable"):
        caps.count(r.capabilities, "ids", outcome)
    caps.count(r.capabilities, "text", "agree")
    r.not_applicable.add("n1")
    block = reference_summary.empty()
    block["cases"] = 4
    block["classes"]["conversion"].update(checked=4, agree=3, differ=1)
    block["decode"] = {"agree": 10, "differ": 1}
    r.reference = block
    r.fuzz = {"asked": 20, "ran": 3, "stopped": "at the first failing input"}
    r.notes.append("a note")
    return r


def chat_finding(target: str = "tmpl-x") -> dict:
    return {"target": target, "model": "llama-spm", "case": "hello/0", "verdict": "prompt differs",
            "expected_status": "ok", "actual_status": "ok", "expected_error": None, "actual_error": None,
            "reproduce": "python -m harness chat tmpl-x", "diff": [["=", "a"], ["-", "b"], ["+", "c"]],
            "conversation": {"messages": [{"role": "user", "content": "hi"}], "tools": None,
                             "add_generation_prompt": True},
            "count_expected": 2, "count_actual": 2,
            "tokens": [{"index": 0, "expected": 1, "expected_piece": "a", "actual": 2, "actual_piece": "b",
                        "differs": True}]}


def messages_part(**shard: Any) -> dict:
    return {"targets": 2, "cases": 10, "matched": 8, "oracle_errors": 1, "legacy_recognised": 4,
            "legacy_differs": 1, "seconds": 1.5, "findings": [chat_finding()],
            "oracle_crashes": [{**chat_finding("tmpl-y"), "verdict": "llama.cpp crashed"}], "shard": shard or None,
            "three_way": [], "lines": ["messages: ..."]}


def report_part(model: str = "llama-spm", command: str = RUN, **meta: Any) -> dict:
    report = build.build([model_result(model)], meta={"command": command, "llama_cpp_python": PIN, **meta},
                         known_crashes={})
    report["messages"] = messages_part()
    return report


def selftest_part(ids: tuple[str, ...] = ("m-a", "m-b"), **shard: Any) -> dict:
    cells = {"golden": {"killed": True, "outcome": "killed", "vocab": "llama-spm", "tried": ["llama-spm"],
                        "seconds": 1.0, "detail": "exit 1", "implied": False},
             "live+fuzz": {"killed": False, "outcome": "survived", "vocab": None, "tried": ["a", "b"],
                           "seconds": 2.0, "detail": "", "implied": False}}
    rows = [{"id": i, "area": "spm", "file": "tokenizer/engines/spm.py", "description": "d", "blind_spot": False,
             "results": {**copy.deepcopy(cells), "main job": {"killed": True, "outcome": "killed"}}} for i in ids]
    from harness.selftest.report import summarize
    columns = ["golden", "live+fuzz", "main job"]
    return {"settings": {"scope": "main", "detectors": ["golden", "live+fuzz"], "fuzz": 20, "seed": 0, "jobs": 1,
                         "timeout": 900.0, "baseline": True, "likely_only": False, "until_main_kill": False},
            "vocabularies": {"golden": ["llama-spm"]}, "baseline_failures": {"golden": {}}, "seconds": 3.0,
            "columns": columns, "mutants": rows, "summary": summarize(rows, columns), "shard": shard or None}


def drift_part(files: tuple[str, ...] = ("a.json", "b.json"), **shard: Any) -> dict:
    from harness.golden import drift
    entries = [drift.entry(f, cases=3, changes=[f"{f}: record changed"], faults=[{"case_id": "x"}]) for f in files]
    return drift.result("golden", entries, shard=shard or None)


LEGIT: dict[str, Callable[[], dict]] = {"report.json": report_part, "messages.json": messages_part,
                                       "selftest.json": selftest_part, "drift.json": drift_part}


def write(folder: Path, kind: str, data: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = data if isinstance(data, str) else json.dumps(data, allow_nan=True)
    (folder / kind).write_text(text, encoding="utf-8")
    return folder


def merge(capsys, *parts: Path, out: Path) -> tuple[int, str]:
    code = main(["merge-reports", *map(str, parts), "--out", str(out)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("kind", sorted(LEGIT))
def test_a_legit_part_of_each_kind_merges(tmp_path, capsys, kind):
    code, err = merge(capsys, write(tmp_path / "a", kind, LEGIT[kind]()), out=tmp_path / "m")
    assert code in (0, 1), err
    assert (tmp_path / "m" / kind).is_file()


# --- the corpus of malformed parts --------------------------------------------------------------------

def at(path: str) -> Callable[[dict], Any]:
    """The container of `path` ("a.b.0.c") in a part, and the last key, for a mutation."""
    def find(data: dict) -> tuple[Any, Any]:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        for key in keys[:-1]:
            data = data[key]
        return data, keys[-1]
    return find


def setting(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(data: dict) -> None:
        container, key = at(path)(data)
        container[key] = value
    return mutate


def dropping(path: str) -> Callable[[dict], None]:
    def mutate(data: dict) -> None:
        container, key = at(path)(data)
        del container[key]
    return mutate


PM = "summary.per_model.llama-spm"
# (id, kind, the malformation, what the one line must name)
MALFORMED: list[tuple[str, str, Callable[[dict], None] | str, str]] = [
    ("top-level-list", "report.json", "[1, 2]", "not a gguf-parity report.json"),
    ("not-json", "report.json", "{\"version\": 1,", "not JSON"),
    ("not-utf8", "report.json", "\udcff", "not"),
    ("deep-nesting", "report.json", '{"version": 1, "meta": {}, "summary": {"per_model": {}}, "x": '
     + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than"),
    ("per-model-a-list", "report.json", setting("summary.per_model", [1, 2]), "summary.per_model"),
    ("counts-an-int", "report.json", setting(PM, 5), PM),
    ("cases-a-string", "report.json", setting(f"{PM}.cases", "12"), f"{PM}.cases"),
    ("cases-negative", "report.json", setting(f"{PM}.cases", -279), f"{PM}.cases"),
    ("mismatches-nan", "report.json", setting(f"{PM}.mismatches", math.nan), f"{PM}.mismatches"),
    ("cases-infinite", "report.json", setting(f"{PM}.cases", math.inf), f"{PM}.cases"),
    ("cases-a-float", "report.json", setting(f"{PM}.cases", 20.0), f"{PM}.cases"),
    ("cases-a-boolean", "report.json", setting(f"{PM}.failing_cases", True), f"{PM}.failing_cases"),
    ("cases-huge", "report.json", setting(f"{PM}.cases", 10 ** 30), f"{PM}.cases"),
    ("notes-an-int", "report.json", setting(f"{PM}.notes", 7), f"{PM}.notes"),
    ("list-an-int", "report.json", setting("mismatches", 3), "mismatches"),
    ("entry-a-list", "report.json", setting("mismatches.0", [1]), "mismatches[0]"),
    ("entry-model-a-list", "report.json", setting("engine_errors.0.model", ["llama-spm"]), "engine_errors[0].model"),
    ("entry-model-unknown", "report.json", setting("engine_errors.0.model", "other"), "engine_errors[0].model"),
    ("missing-summary", "report.json", dropping("summary"), "summary"),
    ("missing-cases", "report.json", dropping(f"{PM}.cases"), PM),
    ("crash-a-string", "report.json", setting("oracle_crashes.0.crash", "boom"), "oracle_crashes[0].crash"),
    ("bytes-not-hex", "report.json", setting("mismatches.0.bytes", "zz"), "mismatches[0].bytes"),
    ("aligned-rows-strings", "report.json", setting("mismatches.0.aligned", ["x"]), "mismatches[0].aligned"),
    ("flake-case-ids-an-int", "report.json", setting("engine_flakes.0.case_ids", 4), "engine_flakes[0].case_ids"),
    ("capabilities-a-list", "report.json", setting(f"{PM}.capabilities", [1]), f"{PM}.capabilities"),
    ("capability-negative", "report.json", setting(f"{PM}.capabilities.ids.differ", -1), "capabilities.ids.differ"),
    ("capability-not-adding-up", "report.json", setting(f"{PM}.capabilities.ids.agree", 9), "capabilities.ids"),
    ("fuzz-asked-nan", "report.json", setting(f"{PM}.fuzz.asked", math.nan), f"{PM}.fuzz.asked"),
    ("reference-classes-an-int", "report.json", setting(f"{PM}.reference.classes", 3), f"{PM}.reference.classes"),
    ("summary-disagrees-with-entries", "report.json", setting(f"{PM}.mismatches", 0), f"{PM}.mismatches is 0"),
    ("failing-below-the-findings", "report.json", setting(f"{PM}.failing_cases", 1), f"{PM}.failing_cases"),
    ("failing-above-the-cases", "report.json", setting(f"{PM}.failing_cases", 21), f"{PM}.failing_cases"),
    ("totals-disagree", "report.json", setting("summary.cases", 99), "summary.cases"),
    ("version-2", "report.json", setting("version", 2), "report version 2"),
    ("meta-a-list", "report.json", setting("meta", [1]), "meta"),
    ("shard-partition-unhashable", "report.json", setting("meta.shard", {"index": 1, "count": 1, "partition": [1]}),
     "meta.shard"),
    ("shard-0-of-0", "report.json", setting("meta.shard", {"index": 0, "count": 0, "partition": "abc"}),
     "meta.shard"),
    ("shard-index-above-count", "report.json", setting("meta.shard", {"index": 5, "count": 4, "partition": "abc"}),
     "5/4"),
    ("shard-count-absurd", "report.json", setting("meta.shard", {"index": 1, "count": 10 ** 12, "partition": "a"}),
     "meta.shard.count"),
    ("messages-cases-disagree", "report.json", setting("messages.cases", 3), "messages: cases is 3"),
    ("messages-seconds-nan", "report.json", setting("messages.seconds", math.nan), "messages.seconds"),
    ("chat-finding-diff-an-int", "report.json", setting("messages.findings.0.diff", 5), "messages.findings[0].diff"),
    ("chat-cases-negative", "messages.json", setting("cases", -10), "cases"),
    ("chat-cases-disagree", "messages.json", setting("matched", 2), "cases is 10"),
    ("chat-findings-an-int", "messages.json", setting("findings", 1), "findings"),
    ("chat-shard-0-of-0", "messages.json", setting("shard", {"index": 0, "count": 0, "partition": "p"}), "shard"),
    ("selftest-killed-a-string", "selftest.json", setting("mutants.0.results.golden.killed", "yes"),
     "mutants[0].results.golden.killed"),
    ("selftest-seconds-infinite", "selftest.json", setting("seconds", math.inf), "seconds"),
    ("selftest-mutants-a-dict", "selftest.json", setting("mutants", {"a": 1}), "mutants"),
    ("drift-cases-negative", "drift.json", setting("goldens.0.cases", -3), "goldens[0].cases"),
    ("drift-changes-an-int", "drift.json", setting("goldens.0.changes", 2), "goldens[0].changes"),
    ("drift-summary-disagrees", "drift.json", setting("summary.changed", 0), "summary.changed"),
]


def malformed(kind: str, how: Callable[[dict], None] | str) -> str | dict:
    if isinstance(how, str):
        return how
    data = LEGIT[kind]()
    how(data)
    return data


@pytest.mark.parametrize("kind, how, names", [row[1:] for row in MALFORMED], ids=[row[0] for row in MALFORMED])
def test_a_malformed_part_is_one_line_naming_the_part_and_the_field(tmp_path, capsys, kind, how, names):
    data = malformed(kind, how)
    part = tmp_path / "part"
    if data == "\udcff":
        part.mkdir()
        (part / kind).write_bytes(b'{"version": 1, "x": "\xff"}')
    else:
        write(part, kind, data)
    code, err = merge(capsys, part, out=tmp_path / "m")
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert str(part) in err and names in err, err
    assert not (tmp_path / "m" / kind).exists()


def test_negative_counts_no_longer_cancel_another_parts_findings(tmp_path, capsys):
    """The probe of issue 47: 279 failing cases in one part, -279 in another: was "all match", exit 0."""
    failing = ModelResult("gpt-2", "bpe", cases=279)
    for i in range(279):
        failing.add("mismatches", {"case_id": f"c{i}", "text": "x", "expected": [1], "got": [2], "first_diff": 0,
                                   "category": "merge order"})
    first = build.build([failing], meta={"command": "python -m harness run --model gpt-2"})
    cancelling = copy.deepcopy(first)
    cancelling["meta"]["command"] = "python -m harness compare --golden golden --model gpt-2"
    for kind in ("mismatches",):
        cancelling[kind] = []
    row = cancelling["summary"]["per_model"]["gpt-2"]
    row.update(failing_cases=-279, mismatches=-279)
    a, b = write(tmp_path / "a", "report.json", first), write(tmp_path / "b", "report.json", cancelling)
    code, err = merge(capsys, a, b, out=tmp_path / "m")
    assert code == 2 and str(b) in err and "summary.per_model.gpt-2." in err, err


# --- the sweep: a hostile value in every field of a legit part -----------------------------------------

HOSTILE = (None, -1, 1.5, math.nan, math.inf, "x", [], {}, [["x"]], 10 ** 30, True, {"a": [1]})


def paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:2]):
            yield from paths(child, (*prefix, i))


def swapped(data: dict, path: tuple, value: Any) -> dict:
    out = copy.deepcopy(data)
    container = out
    for key in path[:-1]:
        container = container[key]
    container[path[-1]] = value
    return out


def sweep(kind: str, tmp_path: Path, capsys, every: int = 1) -> tuple[int, int]:
    """Every field of the legit part swapped for each hostile value (every `every`-th pair): (parts, refused)."""
    legit = LEGIT[kind]()
    pairs = [(p, v) for p in paths(legit) if p for v in HOSTILE][::every]
    refused = 0
    for n, (path, value) in enumerate(pairs):
        part = write(tmp_path / f"p{n}", kind, swapped(legit, path, value))
        code, err = merge(capsys, part, out=tmp_path / f"m{n}")
        assert code in (0, 1, 2) and "internal error" not in err, (path, value, err)
        assert code != 2 or (err.count("\n") == 1 and str(part) in err), (path, value, err)
        refused += code == 2
    return len(pairs), refused


@pytest.mark.parametrize("kind, every", [("report.json", 29), ("messages.json", 7), ("selftest.json", 11),
                                         ("drift.json", 3)])
def test_no_hostile_value_in_any_field_ends_in_exit_3(tmp_path, capsys, kind, every):
    """Every `every`-th (field, value) pair (a prime stride: each field meets several values); the nightly
    sweeps every pair of every kind (6,852 for the report part alone, about 10 minutes)."""
    count, refused = sweep(kind, tmp_path, capsys, every)
    assert count > 100 and refused > count // 3


@pytest.mark.nightly
@pytest.mark.parametrize("kind", sorted(LEGIT))
def test_no_hostile_value_in_any_field_ends_in_exit_3_whole(tmp_path, capsys, kind):
    count, refused = sweep(kind, tmp_path, capsys)
    assert count > 300 and refused > count // 3


# --- the parts together -----------------------------------------------------------------------------------

def test_the_same_part_twice_is_refused_by_path_link_and_content(tmp_path, capsys):
    a = write(tmp_path / "a", "report.json", report_part())
    (tmp_path / "link").symlink_to(a / "report.json")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "report.json").write_bytes((a / "report.json").read_bytes())
    for other, how in ((a, "the same file"), (tmp_path / "link", "the same file"), (tmp_path / "copy", "content")):
        code, err = merge(capsys, a, other, out=tmp_path / "m")
        assert code == 2 and "same part" in err and how in err, err


def test_two_runs_of_the_same_models_are_refused_and_point_to_comparing(tmp_path, capsys):
    """`merge-reports main pr`: two live runs of llama-spm were added up with exit 0."""
    main_run = write(tmp_path / "main", "report.json", report_part())
    pr_run = write(tmp_path / "pr", "report.json", report_part(command=f"{RUN} --fuzz 5"))
    code, err = merge(capsys, main_run, pr_run, out=tmp_path / "m")
    assert code == 2 and "both hold live results for model llama-spm" in err and "report_identity" in err, err
    plugin = write(tmp_path / "plugin", "report.json", report_part(command="pytest (gguf-parity plugin)"))
    assert merge(capsys, main_run, plugin, out=tmp_path / "m")[0] == 2  # the plugin's live check is a run too


def test_a_golden_replay_and_a_live_run_of_one_model_still_merge(tmp_path, capsys):
    """The main job folds `compare --golden` and `run` over the same vocabularies: two checks, not two runs."""
    live = write(tmp_path / "live", "report.json", report_part())
    golden = write(tmp_path / "golden", "report.json",
                   report_part(command="python -m harness compare --golden golden --model llama-spm"))
    other = write(tmp_path / "other", "report.json", report_part("gpt-2"))
    code, err = merge(capsys, golden, live, other, out=tmp_path / "m")
    assert code == 1, err
    merged = json.loads((tmp_path / "m" / "report.json").read_text())
    assert merged["summary"]["per_model"]["llama-spm"]["cases"] == 40
    again = write(tmp_path / "again", "report.json", report_part(command="python -m harness run --model x"))
    code, err = merge(capsys, tmp_path / "m", again, out=tmp_path / "m2")  # the merge held a live llama-spm
    assert code == 2 and "live results for model llama-spm" in err, err


def test_parts_of_different_llama_cpp_builds_are_refused(tmp_path, capsys):
    a = write(tmp_path / "a", "report.json", report_part())
    b = write(tmp_path / "b", "report.json", report_part("gpt-2", llama_cpp_python="0.3.20"))
    code, err = merge(capsys, a, b, out=tmp_path / "m")
    assert code == 2 and "0.3.20" in err and PIN in err, err


def test_shards_of_one_model_still_merge_and_a_second_run_beside_them_does_not(tmp_path, capsys):
    shards = [write(tmp_path / f"s{k}", "report.json", report_part(shard={"index": k, "count": 2, "kind": "run",
                                                                          "partition": "p1"})) for k in (1, 2)]
    # the two shards' parts differ only by their record, as two halves of one model's cases would
    code, err = merge(capsys, *shards, out=tmp_path / "m")
    assert code == 1, err
    lone = write(tmp_path / "lone", "report.json", report_part(command=f"{RUN} --seed 1"))
    code, err = merge(capsys, *shards, lone, out=tmp_path / "m2")
    assert code == 2 and "not shards of one --shard partition" in err, err


def test_drift_parts_of_the_same_golden_outside_a_partition_are_refused(tmp_path, capsys):
    a = write(tmp_path / "a", "drift.json", drift_part(("a.json",)))
    b = write(tmp_path / "b", "drift.json", drift_part(("a.json", "c.json")))
    code, err = merge(capsys, a, b, out=tmp_path / "m")
    assert code == 2 and "golden a.json" in err, err
    c = write(tmp_path / "c", "drift.json", drift_part(("c.json",)))
    assert merge(capsys, a, c, out=tmp_path / "m2")[0] == 1  # sessions of distinct goldens fold


def test_a_part_claiming_a_billion_shards_costs_what_one_claiming_three_does(tmp_path):
    """A shard count of 10^12 took 3.6 GB before a MemoryError; 10^9 (the most a record may claim) is named in
    one line, within a 1 GiB address space, in seconds."""
    parts = [write(tmp_path / f"s{k}", "report.json", report_part(f"m{k}", shard={
        "index": k, "count": 10 ** 9, "kind": "run", "partition": "p"})) for k in (1, 2)]
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from harness.cli import main; sys.exit(main(sys.argv[1:]))")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, "merge-reports", *map(str, parts), "--out",
                           str(tmp_path / "m")], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr
    assert "missing shard(s) 3/1000000000, 4/1000000000" in done.stderr, done.stderr
    assert "and 999,999,988 more" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert time.monotonic() - started < 60


def test_a_fifo_given_as_a_part_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "harness", "merge-reports", str(fifo), "--out", str(tmp_path / "m")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "FIFO" in done.stderr, done.stderr


@pytest.mark.parametrize("unchecked", [{"not_asked": {"the deadline passed": 4}}, {"deadline_passed": True},
                                       {"interrupted": "SIGTERM"}], ids=["not-asked", "deadline", "interrupted"])
def test_a_chat_part_that_left_cases_unchecked_never_merges_to_a_pass(tmp_path, capsys, unchecked):
    clean = {**messages_part(), "cases": 8, "findings": [], "oracle_crashes": [], **unchecked}
    code, err = merge(capsys, write(tmp_path / "a", "messages.json", clean), out=tmp_path / "m")
    merged = json.loads((tmp_path / "m" / "messages.json").read_text())
    assert code == 2 and "not every case was checked" in err
    assert {k: merged[k] for k in unchecked} == unchecked
