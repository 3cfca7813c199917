"""drift's result in structure: both llama.cpp builds named, each changed case with its input, flag pair, and
before and after ids and pieces; merged over shards; bounded.

The golden here is recorded from llama.cpp on a few inputs, then edited on a temporary copy to pretend an
older llama.cpp (another build) answered otherwise, as tests/golden/test_golden.py does.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.golden import drift
from harness.golden import files as goldens
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN

FEW = [{"id": "hello", "text": "Hello world"}, {"id": "bad-utf8", "bytes": "ff41"}, {"id": "empty", "text": ""}]
OLDER = {"ggml_commit": "abc1234", "ggml_version": "0.25.1", "llama_cpp_python": "0.3.30"}


@pytest.mark.oracle
@pytest.mark.vocab
def test_drift_json_names_both_builds_and_each_changed_case_with_its_pieces(require_vocab, tmp_path: Path, capsys):
    path = require_vocab("llama-spm")
    corpus = tmp_path / "few.jsonl"
    corpus.write_text("".join(json.dumps(c) + "\n" for c in FEW), encoding="utf-8")
    folder = tmp_path / "golden"
    assert main(["record", "--model", str(path), "--corpus", str(corpus), "--out", str(folder)]) == 0
    file = folder / "ggml-vocab-llama-spm.json"
    older = copy.deepcopy(goldens.load_golden(file))  # an older llama.cpp, which said otherwise on one case
    hello = next(c for c in older["cases"] if c["id"] == "few-hello")
    live_ids = list(hello["encode"][0]["ids"])
    hello["encode"][0]["ids"] = [1, 2, 3]
    hello["encode"][3]["detokenize"][1]["text"] = "<b>Hi</b>"
    older["llama"] = OLDER
    goldens.write_golden(file, older)
    capsys.readouterr()
    assert main(["drift", "--golden", str(folder), "--report", str(tmp_path / "report")]) == 1
    out = capsys.readouterr().out
    assert "case few-hello: input 'Hello␣world'" in out and "<s> </s>" in out and "␣Hello ␣world" in out
    data = json.loads((tmp_path / "report" / "drift.json").read_text())
    [item] = data["goldens"]
    live = item["live"]
    assert item["recorded"] == OLDER and live["llama_cpp_python"] == PIN and live != OLDER
    assert data["builds"] == {"recorded": [OLDER], "live": [live]}
    [case] = item["changed_cases"]
    assert (case["case_id"], case["text"], case["input_bytes"], case["cut"]) == ("few-hello", "Hello world", 11, False)
    ids, detok = case["changes"]
    assert (ids["what"], ids["flags"], ids["first_diff"]) == ("ids", "add_special=False parse_special=False", 0)
    assert ids["before"] == {"ids": [1, 2, 3], "length": 3, "pieces": ["<s>", "</s>", "\\u{0000}"]}
    assert ids["after"] == {"ids": live_ids, "length": 2, "pieces": ["␣Hello", "␣world"]}
    assert detok["what"] == "detokenize" and detok["before"] == {"text": "<b>Hi</b>"}
    assert detok["flags"].endswith("remove_special=False unparse_special=True")
    page = (tmp_path / "report" / "drift.html").read_text()
    assert "llama-cpp-python 0.3.30, ggml 0.25.1 (abc1234)" in page and "␣Hello" in page
    assert "&lt;b&gt;Hi&lt;/b&gt;" in page and "<b>Hi</b>" not in page


def golden_pair(cases: int, *, tokens: int = 3) -> tuple[dict, dict]:
    """Two recordings of `cases` cases (the second's ids all differ from the first's from the middle on)."""
    def case(i: int, ids: list[int]) -> dict:
        encode = [{"add_special": a, "parse_special": p, "ids": ids,
                   "detokenize": [{"remove_special": r, "unparse_special": u, "text": "x"} for r, u in goldens.FLAGS]}
                  for a, p in goldens.FLAGS]
        return {"id": f"c{i}", "text": "é" * 1000 if i == 0 else f"case {i}", "encode": encode}
    old = {"cases": [case(i, list(range(tokens))) for i in range(cases)]}
    new = {"cases": [case(i, [*range(tokens // 2), 7, *range(tokens // 2 + 1, tokens)]) for i in range(cases)]}
    return old, new


def test_changed_cases_are_described_up_to_a_bound_with_their_ids_windowed():
    old, new = golden_pair(drift.MAX_CASES + 30, tokens=2_000)
    changed, more = drift.case_changes(old, new)
    assert len(changed) == drift.MAX_CASES and more == 30
    first = changed[0]
    assert first["cut"] and len(first["text"]) == drift.MAX_TEXT and first["input_bytes"] == 2000
    change = first["changes"][0]
    assert change["first_diff"] == 1_000 and change["start"] == 1_000 - drift.WINDOW[0]
    assert len(change["before"]["ids"]) == sum(drift.WINDOW) and change["before"]["length"] == 2_000
    assert change["before"]["ids"][drift.WINDOW[0]] == 1_000 and change["after"]["ids"][drift.WINDOW[0]] == 7
    assert drift.ids_to_spell(changed, 10) == [7]  # the windows' ids, those of the live vocabulary only
    drift.spell(changed, {7: "p7"})
    assert change["after"]["pieces"][drift.WINDOW[0] - 1: drift.WINDOW[0] + 1] == ["?", "p7"]


def part(name: str, changed: list[dict], shard: dict | None = None) -> dict:
    item = drift.entry(name, cases=3, changes=[f"case {c['case_id']}: ids" for c in changed], recorded=OLDER,
                       live={**OLDER, "llama_cpp_python": PIN}, changed_cases=changed)
    return drift.result("golden", [item], shard)


def test_merge_reports_folds_drift_parts_with_their_cases_and_writes_the_page(tmp_path, capsys):
    old, new = golden_pair(3)
    changed, _ = drift.case_changes(old, new)
    for k, piece in enumerate((changed[:2], changed[2:]), 1):
        shard = {"index": k, "count": 2, "kind": "drift", "partition": "p" * 16, "units": 4, "weight": 4,
                 "owned_units": 2, "owned_weight": 2}
        (tmp_path / f"part-{k}").mkdir()
        drift.write(part("g.json", piece, shard), tmp_path / f"part-{k}")
    status = main(["merge-reports", str(tmp_path / "part-1"), str(tmp_path / "part-2"), "--out", str(tmp_path / "m")])
    assert status == 1, capsys.readouterr().err
    merged = json.loads((tmp_path / "m" / "drift.json").read_text())
    [item] = merged["goldens"]
    assert [c["case_id"] for c in item["changed_cases"]] == ["c0", "c1", "c2"] and item["recorded"] == OLDER
    assert merged["builds"]["recorded"] == [OLDER] and len(merged["builds"]["live"]) == 1
    assert (tmp_path / "m" / "drift.html").read_text().count('class="known case"') == 3


@pytest.mark.parametrize("bad", [
    None,  # the part as written: merged, nothing changed
    {"changed_cases": [{"case_id": 1, "input_bytes": 0, "changes": []}]},
    {"changed_cases": [{"case_id": "c", "input_bytes": -1, "changes": []}]},
    {"changed_cases": [{"case_id": "c", "input_bytes": 0, "changes": [{"what": "ids", "flags": "x"}]}]},
    {"changed_cases": [{"case_id": "c", "input_bytes": 0,
                        "changes": [{"what": "ids", "first_diff": 0, "start": 0, "before": {"ids": ["x"], "length": 1},
                                     "after": {"ids": [], "length": 0}}]}]},
    {"changed_cases": [{"case_id": "c", "input_bytes": 0, "changes": [{"what": "other"}]}]},
    {"recorded": "0.3.30"}, {"changed_cases_cut": 1.5},
])
def test_a_drift_part_with_a_bad_new_field_is_refused(tmp_path, capsys, bad):
    data = part("g.json", [])
    data["goldens"][0].update(bad or {})
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "drift.json").write_text(json.dumps(data))
    status = main(["merge-reports", str(tmp_path / "p"), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    if bad is None:
        assert status == 0 and (tmp_path / "m" / "drift.html").is_file(), err
    else:
        assert status == 2 and err.startswith("error: ") and err.count("\n") == 1, err


def rich_part() -> dict:
    """A drift part with every kind of described change (ids with pieces, detokenize, crash, document,
    missing, record) and both builds."""
    old, new = golden_pair(2)
    changed, _ = drift.case_changes(old, new)
    drift.spell(changed, {0: "a", 7: "b"})
    changed[1]["changes"] += [{"what": "crash", "before": "answered", "after": "llama.cpp crash (abort 6)",
                               "line": "ok -> crash"}, {"what": "document", "line": "document digest changed"},
                              {"what": "missing", "line": "missing"}, {"what": "record", "line": "record changed"}]
    changed.append({"case_id": "doc", "document": True, "input_bytes": 70_000, "changes": []})
    return part("g.json", changed)


@pytest.mark.parametrize("every", [pytest.param(23, id="every-23rd"),
                                   pytest.param(1, id="every", marks=pytest.mark.nightly)])
def test_no_hostile_value_in_a_described_change_ends_in_exit_3(tmp_path, capsys, every):
    """Each field of the new parts of a drift part (builds, described cases) swapped for each hostile value of
    tests/runs/test_merge_parts.py: merge-reports either folds it (drift.json and drift.html written) or
    refuses it in one line; never exit 3."""
    from tests.runs.test_merge_parts import HOSTILE, merge, paths, swapped, write

    legit = rich_part()
    new_fields = [p for p in paths(legit) if p[:1] == ("builds",) or (len(p) > 2 and p[2] in (
        "recorded", "live", "changed_cases", "changed_cases_cut"))]
    pairs = [(p, v) for p in new_fields for v in HOSTILE][::every]
    refused = 0
    for n, (path, value) in enumerate(pairs):
        folder = write(tmp_path / f"p{n}", "drift.json", swapped(legit, path, value))
        code, err = merge(capsys, folder, out=tmp_path / f"m{n}")
        assert code in (0, 1, 2) and "internal error" not in err, (path, value, err)
        assert code == 2 or (tmp_path / f"m{n}" / "drift.html").is_file(), (path, value)
        refused += code == 2
    assert len(pairs) > 50 and refused > len(pairs) // 3
