"""The pytest plugin (harness/pytest_plugin.py, docs/pytest-plugin.md), run as a user runs it.

Every test starts `python -m pytest` in a folder of its own, with the plugin loaded
through its `pytest11` entry point (the nox venv has the project installed), and reads
the outcome from the JUnit XML pytest writes. The engine is the Node.js reference
child on llama-spm, a greedy toy that differs from llama.cpp on some cases, so both
passing and failing items are there; the failing ones must be exactly those
`python -m harness run` reports. Expected ids come from llama.cpp only (live).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.compare import item_verdicts
from harness.compare.result import ModelResult

ROOT = Path(__file__).resolve().parents[2]
NODE_CHILD = ROOT / "harness" / "children" / "node_child.mjs"
NODE = f"cmd:node {NODE_CHILD}"
EXAMPLE = ROOT / "examples" / "third-party"
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (apt-get install nodejs)")


def pytest_in(folder: Path, *args: str, env: dict | None = None,
              cache: bool = False) -> tuple[subprocess.CompletedProcess, dict]:
    """`python -m pytest ARGS --junitxml` in `folder`: the process and {(classname, name): (outcome, message)}."""
    junit = folder / "junit.xml"
    junit.unlink(missing_ok=True)
    no_cache = [] if cache else ["-p", "no:cacheprovider"]
    done = subprocess.run([sys.executable, "-m", "pytest", *no_cache, f"--junitxml={junit}", *args],
                          cwd=folder, capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})
    return done, outcomes(junit) if junit.is_file() else {}


def outcomes(junit: Path) -> dict[tuple[str, str], tuple[str, str]]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind = "xfailed" if child.get("type") == "pytest.xfail" else child.tag
                outcome, message = kind, (child.get("message") or "") + "\n" + (child.text or "")
        out[(case.get("classname", ""), case.get("name", ""))] = (outcome, message)
    return out


def failed(results: dict) -> set[tuple[str, str]]:
    return {key for key, (outcome, _) in results.items() if outcome in ("failure", "error")}


# The items of the corpus cases only: the long phases (documents, many calls) have tests of their own
# (tests/compare/test_long_inputs.py), and here cost minutes through the Node.js child.
SHORT = ("--parity-long-docs", "0", "--parity-calls", "0")
NO_DOCUMENTS = {"GGUF_PARITY_DOCUMENTS": "off"}


@pytest.fixture(scope="module")
def serial(tmp_path_factory, require_vocab):
    """The plugin on llama-spm with the Node.js child, every default case, once for the module."""
    require_vocab("llama-spm")
    folder = tmp_path_factory.mktemp("serial")
    done, results = pytest_in(folder, "--parity-model", "llama-spm", "--parity-engine", NODE, *SHORT,
                              env=NO_DOCUMENTS)
    return folder, done, results


# --- the plugin against the CLI --------------------------------------------------------------------

@needs_node
@pytest.mark.oracle
def test_junit_failures_are_the_failing_cases_of_harness_run(serial, tmp_path):
    """Same model, same engine, fuzz 0: JUnit's failed items are report.json's failing cases, nothing else."""
    _, done, results = serial
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    run = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "llama-spm", "--engine", NODE,
                          "--fuzz", "0", "--long-docs", "0", "--calls", "0", "--report", str(tmp_path / "run"),
                          "--quiet"], capture_output=True, text=True, timeout=900, env={**os.environ, **NO_DOCUMENTS})
    assert run.returncode == 1, run.stdout + run.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text(encoding="utf-8"))
    lines = (tmp_path / "run" / "findings" / "llama-spm.jsonl").read_text(encoding="utf-8").splitlines()
    # every finding is in findings/<model>.jsonl (report.json's lists are cut to 40 per model)
    failing = {f["case_id"] for f in map(json.loads, lines) if f["list"] in ("mismatches", "engine_errors",
                                                                             "oracle_crashes")}
    assert failed(results) == {("llama-spm", case_id) for case_id in failing}
    assert len(failed(results)) == report["summary"]["failing_cases"] > 0
    passed_cases = {k for k, (o, _) in results.items() if o == "passed" and k[0] == "llama-spm"} - {
        ("llama-spm", "<model>"), ("llama-spm", "<calls>")}
    assert len(passed_cases) == report["summary"]["passed"]
    not_offered = {c for c, row in report["summary"]["capabilities"].items() if row["status"] == "not offered"}
    skipped = {name for (cls, name), (o, _) in results.items() if cls == "llama-spm.vocab" and o == "skipped"}
    assert skipped == not_offered == {"pieces", "attr", "specials", "eog", "control"}


@needs_node
@pytest.mark.oracle
def test_a_failing_item_shows_the_per_token_diff_and_the_reproduce_line(serial):
    _, _, results = serial
    outcome, message = results[("llama-spm", "inp-000")]
    assert outcome == "failure"
    assert "first differing position: 0" in message and "llama.cpp" in message
    assert "> " in message  # the differing token rows are marked
    assert "reproduce: python -m harness run --model llama-spm" in message and "--case inp-000" in message
    assert "Traceback" not in message


@needs_node
@pytest.mark.oracle
def test_failure_texts_are_bounded_and_the_terminal_lists_each_difference_once(serial):
    """A failing item's text names its difference and the reproduce line within `FAILURE_LINES` lines of
    `LINE_CHARS` characters (a planted bug once printed 123,327 lines, a 6.2 MB <failure>); the terminal
    summary lists the run's differences, each once."""
    folder, done, _ = serial
    report = json.loads((folder / "parity-report" / "report.json").read_text(encoding="utf-8"))
    texts = [f.text or "" for f in ET.parse(folder / "junit.xml").getroot().iter("failure")]
    assert texts and all(len(t.splitlines()) <= item_verdicts.FAILURE_LINES for t in texts)
    assert all(len(line) <= item_verdicts.LINE_CHARS for t in texts for line in t.splitlines()
               if not line.startswith("reproduce: "))
    assert all(t.startswith("difference d-") and "\nreproduce: python -m harness run" in t for t in texts)
    assert (folder / "junit.xml").stat().st_size < 20_000 * len(texts)  # the text, and again as the message
    ids = [r["id"] for r in report["differences"]]
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  d-")]
    assert done.stdout.count("distinct difference(s):") == 1 and listed == ids[:10] and len(set(listed)) == len(listed)


@needs_node
@pytest.mark.oracle
def test_k_selects_cases_and_only_those_are_checked(serial, tmp_path):
    _, _, everything = serial
    done, results = pytest_in(tmp_path, "--parity-model", "llama-spm", "--parity-engine", NODE, *SHORT,
                              "-k", "inp-00 and not inp-000", env=NO_DOCUMENTS)
    wanted = {k for k in everything if k[0] == "llama-spm" and k[1].startswith("inp-00") and k[1] != "inp-000"}
    assert set(results) == wanted and len(wanted) == 9, sorted(results)
    assert all(results[k][0] == everything[k][0] for k in wanted)
    report = json.loads((tmp_path / "parity-report" / "report.json").read_text(encoding="utf-8"))
    assert report["summary"]["cases"] == 9  # the harness checked the selection, not the whole corpus
    assert done.returncode == (1 if failed(results) else 0)


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@needs_node
@pytest.mark.oracle
def test_xdist_gives_the_serial_results(serial, tmp_path):
    """`-n 2` (workers share a model's items; each worker checks the model whole) equals the serial run."""
    pytest.importorskip("xdist")
    _, _, expected = serial
    done, results = pytest_in(tmp_path, "-n", "2", "--parity-model", "llama-spm", "--parity-engine", NODE, *SHORT,
                              env=NO_DOCUMENTS)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert {k: o for k, (o, _) in results.items()} == {k: o for k, (o, _) in expected.items()}


@pytest.mark.oracle
def test_a_known_llama_cpp_crash_is_an_xfail_with_its_reason(tmp_path, require_vocab):
    require_vocab("bert-bge")
    done, results = pytest_in(tmp_path, "--parity-model", "bert-bge", "--parity-engine", "ours",
                              "-k", "edge-invalid-09")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    outcome, message = results[("bert-bge", "edge-invalid-09")]
    assert outcome == "xfailed" and "known llama.cpp crash invalid-codepoint" in message, message


@pytest.mark.oracle
@pytest.mark.parametrize("allow", [False, True], ids=["fails", "allowed"])
def test_an_engine_flake_is_its_own_outcome(tmp_path, require_vocab, allow):
    """The engine's process exits once on a case and a fresh one answers: 'engine flake', not a mismatch."""
    require_vocab("llama-spm")
    corpus = tmp_path / "cases.jsonl"
    corpus.write_text('{"id": "flaky", "text": "planted flake"}\n{"id": "steady", "text": "hello"}\n',
                      encoding="utf-8")
    args = ["--parity-model", "llama-spm", "--parity-engine", "tests.flaky_engines:load_exit_once",
            "--parity-engine-arg", f"state={tmp_path / 'state'}", "--parity-corpus", str(corpus),
            "--parity-no-default-corpora", "-k", "flaky or steady"]
    done, results = pytest_in(tmp_path, *args, *(["--parity-allow-flakes"] if allow else []),
                              env={"PYTHONPATH": str(ROOT)})
    # one request held both cases: the flake names both (which one set it off cannot be known)
    for case_id in ("flaky", "steady"):
        outcome, message = results[("llama-spm", case_id)]
        if allow:
            assert outcome == "passed", message
        else:
            assert outcome == "failure" and message.lstrip().startswith("engine flake on tokenize"), message
            assert "first differing position" not in message
    if allow:
        assert done.returncode == 0, done.stdout[-3000:]
        assert "ParityEngineFlake" in done.stdout and "engine flake on tokenize" in done.stdout
    else:
        assert done.returncode == 1, done.stdout[-3000:]


FUZZ = ("--parity-model", "llama-spm", "--parity-no-default-corpora", "--parity-fuzz", "40", "--parity-seed", "3",
        *SHORT)


def properties(junit: Path, name: str) -> dict[str, str]:
    """The <property> elements of the JUnit testcase called `name`."""
    [case] = [c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == name]
    return {p.get("name", ""): p.get("value", "") for p in case.iter("property")}


@pytest.mark.oracle
def test_a_failing_fuzz_input_is_a_testcase_of_its_own(tmp_path, require_vocab):
    """tests/broken_engine.py:load_tab drops the last token of an input with a tab: the hunt shrinks a failure
    to a short input, which JUnit shows as its own failing testcase; <fuzz> passes, saying how many ran."""
    require_vocab("llama-spm")
    done, results = pytest_in(tmp_path, *FUZZ, "--parity-engine", "tests.broken_engine:load_tab",
                              env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    saved = (tmp_path / "parity-report" / "found" / "llama-spm.jsonl").read_text(encoding="utf-8")
    [case] = [json.loads(line) for line in saved.splitlines()]
    # Where the shrinker stops depends on the strategies' draws; what must hold is a short input
    # with the planted trigger (a tab), an item of its own, and saved under found/.
    assert "\t" in case["text"] and len(case["text"]) <= 8, case
    assert failed(results) == {("llama-spm.<fuzz>", case["id"])}, sorted(failed(results))
    message = results[("llama-spm.<fuzz>", case["id"])][1]
    assert f"shrunk to {case['text']!r}" in message and "first differing position" in message, message
    assert "reproduce: python -m harness run --model llama-spm" in message and f"--case {case['id']}" in message
    assert "Traceback" not in message
    assert results[("llama-spm", "<fuzz>")][0] == "passed"
    summary = properties(tmp_path / "junit.xml", "<fuzz>")["gguf-parity"]
    assert "fuzzed inputs ran" in summary and f"failing: {case['id']}, each an item of its own" in summary, summary
    report = json.loads((tmp_path / "parity-report" / "report.json").read_text(encoding="utf-8"))
    assert f"{report['summary']['fuzz']['ran']} of 40 fuzzed inputs ran" in summary
    assert len({e["signature"] for e in report["mismatches"]}) == 1  # the harness found it, nothing else


@pytest.mark.oracle
def test_a_clean_engine_gives_passing_items_only(tmp_path, require_vocab):
    """The same hunt on llama.cpp itself (tests/broken_engine.py:load_clean): no fuzz input item, <fuzz> passes
    saying how many inputs ran."""
    require_vocab("llama-spm")
    done, results = pytest_in(tmp_path, *FUZZ, "--parity-engine", "tests.broken_engine:load_clean",
                              env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert {o for o, _ in results.values()} <= {"passed", "skipped"} and not failed(results)
    assert not [k for k in results if k[0] == "llama-spm.<fuzz>"]
    summary = properties(tmp_path / "junit.xml", "<fuzz>")["gguf-parity"]
    report = json.loads((tmp_path / "parity-report" / "report.json").read_text(encoding="utf-8"))
    assert report["summary"]["fuzz"]["ran"] > 20 and report["summary"]["failing_cases"] == 0
    # Hypothesis may stop short of the budget when it draws no new distinct input; the summary says so
    assert summary.startswith(f"{report['summary']['fuzz']['ran']} of 40 fuzzed inputs ran"), summary
    assert summary.endswith("; none failed"), summary


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
def test_under_xdist_the_fuzz_item_lists_each_failing_input(tmp_path, require_vocab):
    """A pytest-xdist worker checks at the first item (workers must collect the same items): no item per input,
    <fuzz> fails with the input's diff and reproduce line instead."""
    pytest.importorskip("xdist")
    require_vocab("llama-spm")
    done, results = pytest_in(tmp_path, "-n", "2", *FUZZ, "--parity-engine", "tests.broken_engine:load_tab",
                              env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert failed(results) == {("llama-spm", "<fuzz>")}, sorted(failed(results))
    message = results[("llama-spm", "<fuzz>")][1]
    assert "fuzzing found a failing input, shrunk to" in message and "first differing position" in message
    assert "reproduce: python -m harness run --model llama-spm" in message, message


@pytest.mark.oracle
def test_a_deselected_fuzz_item_hunts_nothing(tmp_path, require_vocab):
    """-k leaving <fuzz> out: the model is not checked at collection, no input is fuzzed."""
    require_vocab("llama-spm")
    corpus = tmp_path / "short.jsonl"
    corpus.write_text('{"id": "short", "text": "Hello world"}\n', encoding="utf-8")
    done, results = pytest_in(tmp_path, *FUZZ, "--parity-corpus", str(corpus),
                              "--parity-engine", "tests.broken_engine:load_tab", "-k", "not fuzz",
                              env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert results[("llama-spm", "short")][0] == "passed"
    assert ("llama-spm", "<model>") in results and not [k for k in results if "fuzz" in k[0] + k[1]]
    report = json.loads((tmp_path / "parity-report" / "report.json").read_text(encoding="utf-8"))
    assert "fuzz" not in report["summary"] and not (tmp_path / "parity-report" / "found").exists()


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
def test_the_long_item_fails_with_the_smallest_failing_window(tmp_path, require_vocab):
    """tests/long_engines.py:load_past_64k drops what follows 65,536 bytes: the corpus item passes, <long>
    fails, naming the window it shrank the document to."""
    require_vocab("llama-spm")
    corpus = tmp_path / "short.jsonl"
    corpus.write_text('{"id": "short", "text": "Hello world"}\n', encoding="utf-8")
    done, results = pytest_in(tmp_path, "--parity-model", "llama-spm", "--parity-no-default-corpora",
                              "--parity-corpus", str(corpus), "--parity-long-docs", "1", "--parity-calls", "0",
                              "--parity-engine", "tests.long_engines:load_past_64k",
                              env={"PYTHONPATH": str(ROOT), **NO_DOCUMENTS})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert results[("llama-spm", "short")][0] == "passed"
    assert failed(results) == {("llama-spm", "<long>")}
    message = results[("llama-spm", "<long>")][1]
    assert "shrinks to a 65,537-byte window" in message and "first differing position" in message, message[:2000]


# --- staying out of the way, and bad options -------------------------------------------------------

def test_without_parity_model_the_plugin_adds_nothing(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gguf-parity" not in done.stdout and done.stdout.splitlines()[0] == "test_one.py::test_one"
    plugins = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--help"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    assert "--parity-model" in plugins  # loaded through the entry point, just idle


@pytest.mark.parametrize("args, says", [
    (["--parity-model", "no-such-vocab"], "no-such-vocab"),
    (["--parity-model", "llama-spm", "--parity-golden", "golden", "--parity-fuzz", "5"], "--parity-fuzz"),
    (["--parity-model", "llama-spm", "--parity-engine", "cmd:/no/such/program"], "/no/such/program"),
    # values that start with `-` were parsed a second time as options: pytest's "caught unexpected SystemExit"
    (["--parity-model=llama-spm", "--parity-engine-arg=-x"], "'-x': expected KEY=VALUE"),
    (["--parity-model=-x"], "unknown vocabulary '-x'"),
    (["--parity-model=--engine=tests.broken_engine:load_tab"], "unknown vocabulary '--engine=tests.broken_engine"),
    (["--parity-model=llama-spm", "--parity-corpus=-x.jsonl"], "-x.jsonl"),
    (["--parity-model=llama-spm", "--parity-engine-timeout=-1"], "--engine-timeout"),
    (["--parity-model=llama-spm", "--parity-known-crashes=/dev/zero"], "/dev/zero"),
    # the report folder, checked before anything is collected (it failed at the end, after every item ran)
    (["--parity-model=llama-spm", "--parity-report=/dev/null", "--co"], "--parity-report /dev/null: is a character"),
], ids=["unknown-model", "fuzz-with-golden", "missing-program", "engine-arg-dash", "model-dash",
        "model-like-an-option", "corpus-dash", "timeout-negative", "known-crashes-dev-zero", "report-a-device"])
def test_a_bad_option_is_one_line_usage_error(tmp_path, args, says):
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr + done.stdout, done.stderr
    assert "SystemExit" not in done.stdout + done.stderr


def test_a_report_folder_that_is_a_file_is_refused_before_collection(tmp_path, require_vocab):
    require_vocab("llama-spm")
    (tmp_path / "taken").write_text("a file", encoding="utf-8")
    started = time.monotonic()
    done, results = pytest_in(tmp_path, "--parity-model", "llama-spm", "--parity-report", "taken", *SHORT)
    assert done.returncode == 4 and "is a regular file, not a folder" in done.stderr, done.stderr
    assert not results and time.monotonic() - started < 60  # nothing checked: not one item ran


def test_a_model_file_named_with_colons_gets_readable_item_ids(tmp_path, require_vocab):
    """`::` separates pytest's node names: `odd::name.gguf` was `odd::name::<model>`, read back as a model `odd`
    with a group `name` (JUnit's classname `odd.name`)."""
    shutil.copy(require_vocab("llama-spm"), tmp_path / "odd::name.gguf")
    shutil.copy(require_vocab("llama-spm"), tmp_path / "odd:.gguf")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q", *SHORT,
                           f"--parity-model={tmp_path / 'odd::name.gguf'}", f"--parity-model={tmp_path / 'odd:.gguf'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    ids = done.stdout.splitlines()
    assert "odd%3A%3Aname::<model>" in ids and "odd%3A::vocab::text" in ids, done.stdout
    assert not any(i.startswith(("odd::", "odd:::")) for i in ids), done.stdout


def test_two_models_of_one_name_are_a_usage_error(tmp_path, require_vocab):
    """Two files `a/x.gguf` and `b/x.gguf` made the same items: the second model's were judged on the first's result."""
    for folder, vocab in (("a", "llama-spm"), ("b", "bert-bge")):
        (tmp_path / folder).mkdir()
        shutil.copy(require_vocab(vocab), tmp_path / folder / "x.gguf")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q", *SHORT,
                           "--parity-model", str(tmp_path / "a" / "x.gguf"), "--parity-model",
                           str(tmp_path / "b" / "x.gguf")], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 4 and "have the same name 'x'" in done.stderr, done.stdout + done.stderr


@pytest.mark.oracle
def test_goldens_replay_as_items(tmp_path, require_vocab):
    """--parity-golden: the recorded cases are the items, judged by compare's replay; ours agrees on all."""
    require_vocab("llama-spm")
    goldens = sorted((ROOT / "golden").glob("ggml-vocab-llama-spm.json*"))
    if not goldens:
        pytest.skip("no llama-spm golden (python -m harness record --model llama-spm)")
    done, results = pytest_in(tmp_path, "--parity-model", "llama-spm", "--parity-golden", str(ROOT / "golden"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    cases = [k for k in results if k[0] == "llama-spm" and not k[1].startswith("<")]
    assert len(cases) > 100 and all(results[k][0] == "passed" for k in cases)


# --- the third-party example (examples/third-party), both ways -----------------------------------

@needs_node
@pytest.mark.oracle
def test_the_third_party_example_passes_and_fails_as_it_should(tmp_path, require_vocab):
    require_vocab("llama-spm")
    folder = tmp_path / "example"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("parity-report", "junit.xml", ".pytest_cache"))
    done, good = pytest_in(folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert len(good) == 18 and failed(good) == set()  # 17 parity items (<calls> among them), the repository's test
    assert good[("llama-spm", "<calls>")][0] == "passed"
    assert {n for (c, n), (o, _) in good.items() if o == "skipped"} == {"pieces", "attr", "specials", "eog", "control"}
    done, bad = pytest_in(folder, env={"EXAMPLE_ENGINE": "broken"}, cache=True)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert failed(bad) == {("llama-spm", "dog")}
    message = bad[("llama-spm", "dog")][1]
    assert "first differing position" in message and "reproduce: python -m harness run" in message
    done, again = pytest_in(folder, "--lf", env={"EXAMPLE_ENGINE": "broken"}, cache=True)  # --lf: the failed one
    assert set(again) == {("llama-spm", "dog")} and failed(again) == {("llama-spm", "dog")}, done.stdout[-3000:]


# --- verdicts on a hand-made result (no pytest run) ------------------------------------------------

def test_verdicts_for_each_outcome():
    result = ModelResult("m", "spm", cases=5)
    result.add("known_oracle_crashes", {"case_id": "k", "crash": {"reason": "killed by SIGABRT"}, "known_crash": "x"})
    result.not_applicable.add("na")
    result.add_flake({"case_ids": ["fl"], "op": "tokenize", "first": "exited with status 3", "recheck": "answered"})
    result.add_fault({"case_id": "hf", "op": "tokenize", "crash": {}, "reason": "worker died, a fresh one answered"})
    result.capabilities = {"attr": {"capability": "token_attr", "status": "not offered", "errors": 0, "differ": 0}}
    known = {"x": {"description": "llama.cpp aborts here"}}
    assert item_verdicts.case_verdict(result, "k", known=known) == item_verdicts.Verdict(
        "xfail", "known llama.cpp crash x (killed by SIGABRT): llama.cpp aborts here")
    assert item_verdicts.case_verdict(result, "na").outcome == "skip"
    assert "bytes_input" in item_verdicts.case_verdict(result, "na").message
    flake = item_verdicts.case_verdict(result, "fl")
    assert flake.outcome == "flake" and flake.message.startswith("engine flake on tokenize: exited with status 3")
    fault = item_verdicts.case_verdict(result, "hf")
    assert fault.outcome == "pass" and fault.warnings == ("harness fault: worker died, a fresh one answered",)
    assert item_verdicts.case_verdict(result, "ok") == item_verdicts.Verdict("pass")
    attr = item_verdicts.vocab_verdict(result, "attr")
    assert attr.outcome == "skip" and "token_attr not offered" in attr.message


def test_fuzz_verdicts_list_a_failing_input_unless_it_has_its_own_item():
    """<fuzz> passes when each failing input is an item; listed in full when not (a pytest-xdist worker)."""
    result = ModelResult("m", "spm", cases=3)
    result.fuzz = {"asked": 40, "ran": 3, "stopped": "at the first failing input fuzz-ab (shrunk)"}
    entry = {"case_id": "fuzz-ab", "text": "a\tb", "fuzz": True, "add_special": False, "parse_special": False,
             "first_diff": 1, "aligned": [], "command": "python -m harness run --case fuzz-ab"}
    result.add("mismatches", entry)
    result.add("mismatches", {**entry, "case_id": "fuzz-long", "long": "a window"})  # a long document's
    assert item_verdicts.fuzz_inputs(result) == ["fuzz-ab"]
    alone = item_verdicts.fuzz_input_verdict(result, "fuzz-ab")
    assert alone.outcome == "fail" and alone.message.startswith("fuzzing found a failing input, shrunk to 'a\\tb'")
    assert "reproduce: python -m harness run --case fuzz-ab" in alone.message
    assert item_verdicts.fuzz_verdict(result, itemized=frozenset({"fuzz-ab"})) == item_verdicts.Verdict(
        "pass", "3 of 40 fuzzed inputs ran (stopped: at the first failing input fuzz-ab (shrunk)); "
                "failing: fuzz-ab, each an item of its own")
    listed = item_verdicts.fuzz_verdict(result)
    assert listed.outcome == "fail" and alone.message in listed.message
    assert item_verdicts.fuzz_verdict(ModelResult("m", "spm")).outcome == "skip"  # never fuzzed


def test_an_engine_that_cannot_load_fails_every_item_with_the_reason():
    from harness.runs.outcomes import engine_load_error
    result = ModelResult("m", "spm")
    engine_load_error(result, "UnsupportedVocab: no such pre-tokenizer 'x'")
    result.failing.update({"a", "b"})
    for verdict in (item_verdicts.case_verdict(result, "a"), item_verdicts.model_verdict(result),
                    item_verdicts.vocab_verdict(result, "text")):
        assert verdict.outcome == "fail" and "UnsupportedVocab: no such pre-tokenizer 'x'" in verdict.message, verdict


def test_a_failure_text_is_bounded_whatever_the_findings():
    """Five differences on one long case under four flag pairs: the text names the first two, each with its
    flag pairs, diff and reproduce line, and counts the rest, within `FAILURE_LINES` lines."""
    from tests import synthetic_reports as sr
    result = ModelResult("toy", "bpe", cases=1)
    found = [sr.digit_split("toy", 0, before=5000), sr.tab_bug("toy", 0, (False, False), words=5000)]
    found += [sr.finding("toy", "c", "a", [sr.A], [len(sr.PIECES) + i], tokens=sr.BIG_TABLE) for i in range(3)]
    for entry in found:
        for add_special, parse_special in sr.FLAG_PAIRS:
            result.add("mismatches", {**entry, "case_id": "c", "add_special": add_special,
                                      "parse_special": parse_special})
    verdict = item_verdicts.case_verdict(result, "c")
    lines = verdict.message.splitlines()
    assert verdict.outcome == "fail" and len(lines) <= item_verdicts.FAILURE_LINES, len(lines)
    assert max(len(line) for line in lines) <= item_verdicts.LINE_CHARS
    assert lines[0] == (f"difference {found[0]['signature']} {found[0]['signature_title']} under 4 flag pairs "
                        "(add_special,parse_special F,F F,T T,F T,T)")
    assert sum(line.startswith("reproduce: ") for line in lines) == 2 and "... and 3 more differences" in lines[-1]
    assert "differing pieces: llama.cpp '048', engine '04' '8'" in lines  # each side's own pieces
    assert item_verdicts.bounded("\n".join(["x"] * 500 + ["reproduce: r"]), 12).splitlines()[-2:] == [
        "reproduce: r", "... (494 more lines: report.html and report.json have them)"]


def test_a_fuzz_difference_is_one_item_however_many_inputs_showed_it():
    result = ModelResult("m", "spm", cases=3)
    for n in range(3):
        result.add("mismatches", {"case_id": f"fuzz-{n}", "text": "a\tb", "fuzz": True, "add_special": False,
                                  "parse_special": False, "first_diff": 1, "signature": "d-1"})
    result.add("mismatches", {"case_id": "fuzz-x", "text": "x", "fuzz": True, "first_diff": 0, "signature": "d-2",
                              "add_special": False, "parse_special": False})
    assert item_verdicts.fuzz_inputs(result) == ["fuzz-0", "fuzz-x"]
