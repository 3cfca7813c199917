"""`python -m harness builds`: the pinned llama.cpp against another build, every step, as a user runs it.

The other build is llama.cpp itself with one planted change (tests/broken_engine.py: the lone tab
given the newline's id), served as any engine is. It must be found by each step, on gpt-2: golden
cases (a cut-down copy of gpt-2's golden, llama.cpp's own records), a live corpus case, and a
code-point call narrowed to U+0009 whose probe then runs live (the probes cut to two calls here);
each difference with its text, flags, both sides' ids and pieces and both builds; the chat path
not compared, and saying why. Bad input is one line and exit 2 before any step runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.golden import every_code_point as cpts
from harness.golden import files as goldens

ROOT = Path(__file__).resolve().parents[2]
PLANTED = "tests.broken_engine:load_tab_as_newline"
TAB = "ids: bytes ⇥ / ↵"  # the planted change's signature: llama.cpp's piece, the planted build's


def small_golden(folder: Path) -> Path:
    """A folder holding gpt-2's committed golden with its cases cut to four, two of them with tabs."""
    golden = goldens.load_golden(ROOT / "golden" / "ggml-vocab-gpt-2.json", check=False)
    keep = {"inp-000", "inp-006", "edge-ws-00", "edge-ws-01"}
    golden["cases"] = [c for c in golden["cases"] if c["id"] in keep]
    folder.mkdir()
    goldens.write_golden(folder / "ggml-vocab-gpt-2.json", golden)
    return folder


@pytest.fixture
def two_calls(tmp_path, monkeypatch, require_vocab):
    """The code-point probes cut to their first two calls, recorded from the pinned llama.cpp on gpt-2."""
    from harness.oracle.llama import LlamaOracle
    monkeypatch.setattr(cpts, "MAX_CODEPOINTS", 2 * cpts.BATCH)
    monkeypatch.setattr(cpts, "CALLS", 2)
    path = require_vocab("gpt-2")
    sep = "<|endoftext|>"
    with LlamaOracle(path) as oracle:
        digests = [cpts.digest(oracle.tokenize(data, **cpts.FLAGS)) for _, data in cpts.batches(sep.encode())]
    records = tmp_path / "records"
    records.mkdir()
    record = {"vocabulary": "gpt-2", "llama_cpp_python": "pinned", "batch": cpts.BATCH, "separator": sep,
              "digests": digests}
    (records / "gpt-2.json").write_text(json.dumps(record), encoding="utf-8")
    return records


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
def test_a_planted_build_is_found_by_every_step_with_both_sides(tmp_path, two_calls, require_vocab, capsys):
    corpus = tmp_path / "tabs.jsonl"
    corpus.write_text(json.dumps({"id": "tab", "text": "x\t\ty"}) + "\n" + json.dumps({"id": "hi", "text": "Hi"})
                      + "\n", encoding="utf-8")
    report = tmp_path / "r"
    code = main(["builds", "--against", PLANTED, "--model", "gpt-2", "--no-default-corpora", "--corpus",
                 str(corpus), "--golden", str(small_golden(tmp_path / "golden")), "--probe", "gpt-2",
                 "--code-points", str(two_calls), "--report", str(report), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1, out
    data = json.loads((report / "builds.json").read_text(encoding="utf-8"))
    assert data["builds"]["pinned"]["llama_cpp_python"] and data["builds"]["other"]["description"] == PLANTED
    [points] = data["code_points"]
    assert (points["agree"], points["differ"], points["code_points"]) == (1, 1, [0x09])
    [row] = data["vocabularies"]
    assert row["model"] == "gpt-2" and row["golden"]["ids"]["differ"] == 3 and row["live"]["cases"] == 3
    assert row["live"]["ids"]["differ"] == 2 and row["differences"] >= 1  # the corpus's tab and U+0009's probe
    tab = [d for d in data["differences"] if d["title"] == TAB]
    assert len(tab) == 1 and tab[0]["cases"] == 5  # one signature: 3 golden cases, 2 live ones
    for record in tab:
        assert record["id"].startswith("d-") and record["input"]["text"] and record["flag_pair"]["add_special"] in (
            True, False)
        assert record["pinned"]["ids"]["ids"] != record["other"]["ids"]["ids"]
        assert record["builds"] == {"pinned": data["builds"]["pinned"]["description"], "other": PLANTED}
    assert data["chat"]["status"] == "not compared" and "--chat-golden" in data["chat"]["why"]
    merged = json.loads((report / "report.json").read_text(encoding="utf-8"))
    assert {d["id"] for d in merged["differences"]} >= {d["id"] for d in tab}
    assert all(d["id"] in (report / "builds.html").read_text(encoding="utf-8") for d in tab)
    assert data["verdict"] in out


@pytest.mark.parametrize(("args", "said"), [
    (["--against", "tokenizer:Tokenizer.from_gguf"], "expected another llama.cpp build"),
    (["--against", "llama.cpp@latest"], "expected llama.cpp@X.Y.Z"),
    (["--golden", "/no/such/folder"], "--golden /no/such/folder: no such folder"),
    (["--chat-golden", "/no/such/folder"], "--chat-golden /no/such/folder: no such folder"),
    (["--corpus", "/no/such.jsonl"], "--corpus /no/such.jsonl: no such file"),
    (["--fuzz", "-1"], "--fuzz must be 0 or more"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_step(tmp_path, capsys, args, said):
    code = main(["builds", "--no-live", "--report", str(tmp_path / "r"), *args])
    err = capsys.readouterr().err
    assert code == 2 and said in err and err.count("\n") == 1, err
    assert not (tmp_path / "r" / "builds.json").exists()
