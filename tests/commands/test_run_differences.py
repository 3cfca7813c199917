"""One planted bug is one difference through many cases, flag pairs and runs, on llama.cpp's own ids.

The engine is llama.cpp itself with one planted bug (tests/broken_engine.py): a lone tab given the
newline's id, as in issue 41's JavaScript experiment. Two runs over different texts must name the same
one difference; a clean engine names none.
"""

from __future__ import annotations

import json

import pytest

from harness.cli import main

pytestmark = pytest.mark.oracle

TEXTS = {"first": ["a\tb", "x = 1\t# note", "\tindented", "tab\t\tpair\tend", "048\t12"],
         "second": ["col1\tcol2\tcol3", "¿qué\tpasa?", "\t", "fn(a,\tb)", "日本\t語"]}


def run(tmp_path, name: str, engine: str, capsys) -> tuple[int, dict, str]:
    corpus = tmp_path / f"{name}.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"{name}-{i}", "text": t}) + "\n"
                              for i, t in enumerate(TEXTS[name])), encoding="utf-8")
    status = main(["run", "--model", "llama-bpe", "--corpus", str(corpus), "--no-default-corpora", "--engine", engine,
                   "--report", str(tmp_path / f"report-{name}"), "--quiet", "--no-messages", "--calls", "0",
                   "--long-docs", "0"])
    out = capsys.readouterr().out
    return status, json.loads((tmp_path / f"report-{name}" / "report.json").read_text()), out


def test_one_planted_bug_is_one_difference_in_every_run(tmp_path, capsys, require_vocab):
    require_vocab("llama-bpe")
    first = run(tmp_path, "first", "tests.broken_engine:load_tab_as_newline", capsys)
    second = run(tmp_path, "second", "tests.broken_engine:load_tab_as_newline", capsys)
    for status, report, out in (first, second):
        [difference] = report["differences"]
        assert status == 1 and difference["title"] == "ids: bytes ⇥ / ↵"
        assert len(difference["flags"]) == 4 and difference["cases"] >= 2
        assert "1 distinct difference(s):" in out and difference["id"] in out
    assert first[1]["differences"][0]["id"] == second[1]["differences"][0]["id"]


def test_a_clean_engine_has_no_difference(tmp_path, capsys, require_vocab):
    require_vocab("llama-bpe")
    status, report, out = run(tmp_path, "first", "tests.broken_engine:load_clean", capsys)
    assert status == 0 and report["differences"] == [] and "distinct" not in out


def test_a_golden_replay_names_the_difference_as_the_live_run_does(tmp_path, capsys, require_vocab):
    require_vocab("llama-spm")
    engine = "tests.broken_engine:load_tab_as_newline"
    common = ["--model", "llama-spm", "--engine", engine, "--quiet"]
    main(["compare", "--golden", "golden", *common, "--report", str(tmp_path / "replay")])
    main(["run", *common, "--no-messages", "--fuzz", "0", "--calls", "0", "--long-docs", "0",
          "--report", str(tmp_path / "live")])
    capsys.readouterr()
    ids = [{d["title"]: d["id"] for d in json.loads((tmp_path / name / "report.json").read_text())["differences"]}
           for name in ("replay", "live")]
    tab = "ids: bytes ⇥ / ↵"
    assert tab in ids[0] and ids[0][tab] == ids[1][tab]
