"""The nightly's ledger: differences remembered night by night (first seen, last seen, nights, fixed on).

The nights here are small reports built by the real judge (`harness.compare.signature.sign`) on a toy
vocabulary and written as `run` writes them, then folded with `python -m harness ledger` as the nightly
folds its merged report; the last test folds two real runs on llama.cpp (a planted bug, then a clean engine).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.compare.diff import TokenTable
from harness.compare.result import ModelResult
from harness.compare.signature import sign
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN
from harness.report import build
from harness.report import ledger as ledgers

PIECES = [b"<s>", b"a", b"\t", b"\n", b"048", b"04", b"8", b"b"]
TABLE = TokenTable(texts=PIECES, pieces=PIECES, attrs=[0] * len(PIECES), edge_ids=frozenset({0}))
BUGS = {"tab": (([1, 2, 7], [1, 3, 7]), "a\tb"), "digits": (([1, 4], [1, 5, 6]), "a048")}  # a wrong id, a split


def result(model: str, bugs: list[str], *, cases: int = 10) -> ModelResult:
    """A model's result with one failing case per planted bug (`tab`, `digits`)."""
    r = ModelResult(model, "bpe", cases=cases)
    for i, bug in enumerate(bugs):
        (expected, got), text = BUGS[bug]
        entry = {"case_id": f"{bug}-{i}", "text": text, "add_special": False, "parse_special": False,
                 "expected": expected, "got": got, "first_diff": 1, "category": "merge order",
                 "command": f"python -m harness run --model {model} --case {bug}-{i}"}
        r.add("mismatches", sign(model, "mismatches", entry, TABLE))
    return r


def night(tmp_path: Path, name: str, models: dict[str, list[str]], *, unchecked: tuple[str, ...] = ()) -> Path:
    """One night's report folder: each model with its planted bugs; the `unchecked` ones with 0 cases."""
    results = [result(m, bugs) for m, bugs in models.items()]
    results += [ModelResult(m, "bpe", cases=0) for m in unchecked]
    folder = tmp_path / "reports" / name
    build.write(build.build(results, meta={"command": "run", "llama_cpp_python": PIN}), folder)
    return folder


def fold(tmp_path: Path, folder: Path, date: str, capsys, *extra: str) -> tuple[int, str, str]:
    status = main(["ledger", str(folder), "--ledger", str(tmp_path / "ledger.jsonl"), "--night", date, *extra])
    out, err = capsys.readouterr()
    return status, out, err


def records(tmp_path: Path) -> dict[tuple[str, str], dict]:
    """(model, bug) -> the ledger's record."""
    lines = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert lines[0]["kind"] == ledgers.KIND
    bug = {"ids: bytes ⇥ / ↵": "tab", "ids: split N|N / engine only": "digits"}
    return {(r["model"], bug[r["title"]]): r for r in lines[1:]}


def test_three_nights_give_first_and_last_seen_nights_and_fixed_on(tmp_path, capsys):
    plan = [("2026-12-01", {"m1": ["tab"], "m2": ["tab"]}), ("2026-12-02", {"m1": ["tab", "digits"], "m2": ["tab"]}),
            ("2026-12-03", {"m1": ["digits"], "m2": []})]
    for date, models in plan:
        status, out, err = fold(tmp_path, night(tmp_path, date, models), date, capsys)
        assert status == 0, err
    got = records(tmp_path)
    summary = {key: (r["first_seen"], r["last_seen"], r["nights"], r["fixed_on"]) for key, r in got.items()}
    assert summary == {("m1", "tab"): ("2026-12-01", "2026-12-02", 2, "2026-12-03"),
                       ("m2", "tab"): ("2026-12-01", "2026-12-02", 2, "2026-12-03"),
                       ("m1", "digits"): ("2026-12-02", "2026-12-03", 2, None)}
    assert got[("m1", "digits")]["reproduce"] == "python -m harness run --model m1 --case digits-0"
    assert "0 new, 0 back after a fix, 2 fixed tonight, 1 open from earlier nights (the oldest since 2026-12-02)" in out
    header = json.loads((tmp_path / "ledger.jsonl").read_text().splitlines()[0])
    assert (header["last_night"], header["nights"]) == ("2026-12-03", 3)
    page = (tmp_path / "ledger.html").read_text()
    assert page.count('<tr data-id="') == 3 and 'id="fixed"' in page and "open since" in page


def test_a_model_not_checked_keeps_its_differences_open(tmp_path, capsys):
    fold(tmp_path, night(tmp_path, "1", {"m1": ["tab"], "m2": ["tab"], "m3": ["tab"]}), "2026-12-01", capsys)
    # m2 is in tonight's report but not checked (0 cases); m3 is in no report at all; m1 is checked and clean
    status, _, err = fold(tmp_path, night(tmp_path, "2", {"m1": []}, unchecked=("m2",)), "2026-12-02", capsys)
    assert status == 0, err
    got = records(tmp_path)
    assert got[("m1", "tab")]["fixed_on"] == "2026-12-02"
    assert got[("m2", "tab")]["fixed_on"] is None and got[("m3", "tab")]["fixed_on"] is None
    assert got[("m2", "tab")]["last_seen"] == "2026-12-01" and got[("m2", "tab")]["nights"] == 1
    page = (tmp_path / "ledger.html").read_text()
    assert "its model not checked tonight" in page and "<b>m2</b>: not checked" in page


def test_a_model_whose_differences_were_cut_or_not_checked_three_ways_fixes_nothing():
    ledger = ledgers.Ledger()
    first = {"summary": {"per_model": {"m": {"cases": 5, "differences": 2}}},
             "differences": [{"id": "d-000000000001", "title": "t1", "model": "m", "list": "mismatches", "cases": 1},
                             {"id": "d-000000000002", "title": "t2", "model": "m", "list": "reference_findings",
                              "cases": 1}]}
    ledgers.fold(ledger, "2026-12-01", [first])
    cut = {"summary": {"per_model": {"m": {"cases": 5, "differences": 60}}}, "differences": []}
    tonight = ledgers.fold(ledger, "2026-12-02", [cut])  # 60 differences, none listed: nothing is known fixed
    assert tonight.fixed == [] and tonight.cut == {"m": (0, 60)}
    plain = {"summary": {"per_model": {"m": {"cases": 5, "differences": 0}}}, "differences": []}
    tonight = ledgers.fold(ledger, "2026-12-03", [plain])  # checked, but without --reference
    assert tonight.fixed == ["d-000000000001"] and ledger.records["d-000000000002"]["fixed_on"] is None
    three = {"summary": {"per_model": {"m": {"cases": 5, "differences": 0, "reference": {"cases": 5}}}},
             "differences": []}
    assert ledgers.fold(ledger, "2026-12-04", [three]).fixed == ["d-000000000002"]
    ledgers.fold(ledger, "2026-12-05", [first])  # both back
    full = [{"id": f"d-{i:012x}", "title": "t", "model": "m", "list": "mismatches", "cases": 1} for i in range(3, 53)]
    merged = {"summary": {"per_model": {"m": {"cases": 5, "differences": 50}}}, "differences": full}
    tonight = ledgers.fold(ledger, "2026-12-06", [merged])  # as many as report.json keeps: maybe more, unlisted
    assert tonight.fixed == [] and tonight.cut == {"m": (50, 50)} and len(tonight.new) == 50


def test_a_fixed_difference_seen_again_is_open_again_and_the_same_night_twice_counts_once(tmp_path, capsys):
    for date, bugs in (("2026-12-01", ["tab"]), ("2026-12-02", []), ("2026-12-03", ["tab"]), ("2026-12-03", ["tab"])):
        assert fold(tmp_path, night(tmp_path, date, {"m1": bugs}), date, capsys)[0] == 0
    record = records(tmp_path)[("m1", "tab")]
    assert (record["nights"], record["fixed_on"], record["reopened"]) == (2, None, 1)
    assert record["first_seen"] == "2026-12-01"
    assert json.loads((tmp_path / "ledger.jsonl").read_text().splitlines()[0])["nights"] == 3
    status, _, err = fold(tmp_path, night(tmp_path, "4", {"m1": []}), "2026-12-02", capsys)
    assert status == 2 and "night 2026-12-02 is earlier" in err and err.count("\n") == 1
    assert records(tmp_path)[("m1", "tab")]["fixed_on"] is None  # nothing written


def test_the_page_escapes_what_it_shows_and_the_index_links_every_page(tmp_path, capsys):
    folder = night(tmp_path, "1", {"<script>m</script>": ["tab"]})
    status, _, _ = fold(tmp_path, folder, "2026-12-01", capsys, "--page", str(tmp_path / "reports" / "ledger.html"),
                        "--index")
    assert status == 0
    page = (tmp_path / "reports" / "ledger.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;m&lt;/script&gt;" in page
    assert 'href="1/report.html"' in page
    index = (tmp_path / "reports" / "index.html").read_text()
    assert 'href="ledger.html"' in index and 'href="1/report.html"' in index


# --- written atomically, under a lock ------------------------------------------------------------------------

def test_folds_at_once_lose_nothing(tmp_path, monkeypatch):
    """Four folds of one night (each its own model's report) at once: the lock makes them one after the other,
    so every model's difference is in the ledger (each fold is slowed to make the race certain)."""
    folders = [night(tmp_path, f"part-{k}", {f"m{k}": ["tab"]}) for k in range(4)]
    real_fold = ledgers.fold

    def slow_fold(*args, **kwargs):
        time.sleep(0.2)  # between reading the ledger and writing it back
        return real_fold(*args, **kwargs)
    monkeypatch.setattr(ledgers, "fold", slow_fold)
    statuses: list[int] = []

    def one(folder: Path) -> None:
        args = build_parser("ledger").parse_args(["ledger", str(folder), "--ledger", str(tmp_path / "ledger.jsonl"),
                                                  "--night", "2026-12-01", "--page", str(folder / "ledger.html")])
        statuses.append(args._run(args))
    threads = [threading.Thread(target=one, args=(folder,)) for folder in folders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [0] * 4
    assert sorted(model for model, _ in records(tmp_path)) == ["m0", "m1", "m2", "m3"]


def test_a_write_that_fails_leaves_the_ledger_as_it_was(tmp_path, monkeypatch, capsys):
    fold(tmp_path, night(tmp_path, "1", {"m1": ["tab"]}), "2026-12-01", capsys)
    before = (tmp_path / "ledger.jsonl").read_bytes()
    second = night(tmp_path, "2", {"m1": []})

    def full_disk(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full_disk)
    status, _, err = fold(tmp_path, second, "2026-12-02", capsys)
    assert status == 2 and "No space left on device" in err
    assert (tmp_path / "ledger.jsonl").read_bytes() == before
    assert not list(tmp_path.glob(".ledger.jsonl.*"))  # no temp file left


# --- a hostile ledger is one line, exit 2 -------------------------------------------------------------------

GOOD = {"id": "d-0123456789ab", "title": "t", "model": "m", "list": "mismatches", "first_seen": "2026-12-01",
        "last_seen": "2026-12-01", "nights": 1, "fixed_on": None, "reopened": 0, "cases": 1, "fuzz": False,
        "reproduce": None}
HEADER = {"kind": ledgers.KIND, "version": 1, "last_night": "2026-12-01", "nights": 1}


def lines_of(*values: object) -> str:
    return "".join(json.dumps(v) + "\n" for v in values)


BAD = {
    "not JSON": "{\n",
    "no header": lines_of(GOOD),
    "another version": lines_of({**HEADER, "version": 2}, GOOD),
    "a list": lines_of(HEADER, [1, 2]),
    "missing field": lines_of(HEADER, {k: v for k, v in GOOD.items() if k != "nights"}),
    "bad id": lines_of(HEADER, {**GOOD, "id": "../etc"}),
    "negative nights": lines_of(HEADER, {**GOOD, "nights": -1}),
    "float cases": lines_of(HEADER, {**GOOD, "cases": 1.5}),
    "huge count": lines_of(HEADER, {**GOOD, "cases": 10 ** 30}),
    "no such date": lines_of(HEADER, {**GOOD, "first_seen": "2026-02-30"}),
    "dates out of order": lines_of(HEADER, {**GOOD, "first_seen": "2026-12-02"}),
    "after the last night": lines_of(HEADER, {**GOOD, "fixed_on": "2027-01-01"}),
    "twice": lines_of(HEADER, GOOD, GOOD),
    "long title": lines_of(HEADER, {**GOOD, "title": "x" * 5000}),
    "deep": lines_of(HEADER) + "[" * 100_000 + "]" * 100_000 + "\n",
    "not UTF-8": lines_of(HEADER).encode().decode() + '{"id": "\udcff"}\n',
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_ledger_is_one_line_and_exit_2(tmp_path, capsys, name):
    folder = night(tmp_path, "1", {"m1": ["tab"]})
    (tmp_path / "ledger.jsonl").write_bytes(BAD[name].encode("utf-8", "surrogateescape"))
    status, _, err = fold(tmp_path, folder, "2026-12-02", capsys)
    assert status == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert (tmp_path / "ledger.jsonl").read_bytes() == BAD[name].encode("utf-8", "surrogateescape")


def test_a_fifo_or_a_huge_ledger_is_refused_before_a_byte_is_read(tmp_path, capsys):
    folder = night(tmp_path, "1", {"m1": ["tab"]})
    os.mkfifo(tmp_path / "ledger.jsonl")  # its open would wait for a writer: never opened
    started = time.monotonic()
    status, _, err = fold(tmp_path, folder, "2026-12-01", capsys)
    assert status == 2 and "a FIFO" in err and time.monotonic() - started < 10
    (tmp_path / "ledger.jsonl").unlink()
    with open(tmp_path / "ledger.jsonl", "wb") as handle:  # sparse: 65 MiB that cost no disk
        handle.truncate(ledgers.MAX_LEDGER_BYTES + (1 << 20))
    status, _, err = fold(tmp_path, folder, "2026-12-01", capsys)
    assert status == 2 and "over the limit" in err and err.count("\n") == 1


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01", "2026-12-1", "2026-12-01T00:00"])
def test_a_bad_night_is_one_line(tmp_path, capsys, value):
    status, _, err = fold(tmp_path, night(tmp_path, "1", {"m1": []}), value, capsys)
    assert status == 2 and "--night" in err and not (tmp_path / "ledger.jsonl").exists()


# --- on llama.cpp: a planted bug one night, a clean engine the next ----------------------------------------

@pytest.mark.oracle
@pytest.mark.vocab
def test_two_real_runs_in_a_row_show_the_first_seen_date_then_the_fix(tmp_path, capsys, require_vocab):
    require_vocab("gpt-2")  # 50k tokens: its vocabulary check costs half llama-bpe's
    corpus = tmp_path / "tabs.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"t{i}", "text": t}) + "\n"
                              for i, t in enumerate(["a\tb", "x = 1\t# note", "no tab here"])), encoding="utf-8")
    folders = {}
    for date, engine in (("2026-12-01", "load_tab_as_newline"), ("2026-12-02", "load_clean")):
        folders[date] = tmp_path / date
        assert main(["run", "--model", "gpt-2", "--corpus", str(corpus), "--no-default-corpora", "--engine",
                     f"tests.broken_engine:{engine}", "--report", str(folders[date]), "--quiet", "--no-messages",
                     "--calls", "0", "--long-docs", "0"]) in (0, 1)
        capsys.readouterr()
        assert fold(tmp_path, folders[date], date, capsys)[0] == 0
        if date == "2026-12-01":
            [first] = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()[1:]]
    [record] = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()[1:]]
    assert first["title"] == "ids: bytes ⇥ / ↵" and first["first_seen"] == "2026-12-01" and first["fixed_on"] is None
    assert (record["id"], record["first_seen"], record["fixed_on"]) == (first["id"], "2026-12-01", "2026-12-02")


def test_ledger_help_imports_no_pandas_jinja2_or_jsonschema():
    import subprocess
    import sys
    heavy = ("pandas", "hypothesis", "jinja2", "jsonschema", "llama_cpp")
    code = ("import sys\nfrom harness.cli import main\ntry:\n    main(['ledger', '--help'])\nexcept SystemExit:\n"
            f"    pass\nprint(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
