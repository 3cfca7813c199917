"""`python -m harness tokenize`: one text's ids from llama.cpp and ours, side by side.

Expected ids come from llama.cpp itself (`pair_for`'s oracle, in this process); the command's
llama.cpp column comes from its crash-isolated worker, so the two are independent readings.
"""

from __future__ import annotations

import json

import pytest

from harness.cli import main

pytestmark = pytest.mark.oracle


def tokenize(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["tokenize", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize(("flags", "add_special", "parse_special"), [
    ((), True, True), (("--no-bos",), False, True), (("--no-parse-special",), True, False),
    (("--no-bos", "--no-parse-special"), False, False),
])
def test_ids_are_llama_cpps_under_each_flag_pair(capsys, pair_for, flags, add_special, parse_special):
    _, oracle = pair_for("llama-spm")
    text = "Hello <s> world\t048"
    status, out, _ = tokenize(capsys, "--model", "llama-spm", "-p", text, "--ids", *flags)
    expected = oracle.tokenize(text.encode(), add_special=add_special, parse_special=parse_special)
    lines = dict(line.split(None, 1) for line in out.splitlines())
    assert status == 0
    assert json.loads(lines["llama.cpp"]) == expected == json.loads(lines["ours"])


def test_the_table_shows_each_piece_and_the_counts(capsys, pair_for):
    _, oracle = pair_for("llama-bpe")
    status, out, _ = tokenize(capsys, "-m", "llama-bpe", "-p", "Hello world", "--show-count")
    n = len(oracle.tokenize(b"Hello world", add_special=True, parse_special=True))
    assert status == 0 and "␣world" in out and "<<" not in out
    assert f"llama.cpp: {n} tokens" in out and f"ours: {n} tokens" in out


def test_bytes_from_a_file_and_stdin_are_taken_as_they_are(capsys, pair_for, tmp_path, monkeypatch):
    _, oracle = pair_for("llama-bpe")
    data = b"caf\xc3\xa9 \xff\xfe x"  # not UTF-8: tokenized as bytes, never replaced
    (tmp_path / "t.bin").write_bytes(data)
    status, out, _ = tokenize(capsys, "-m", "llama-bpe", "--file", str(tmp_path / "t.bin"), "--json")
    report = json.loads(out)
    expected = oracle.tokenize(data, add_special=True, parse_special=True)
    assert status == 0 and report["text_hex"] == data.hex()
    assert [c["ids"] for c in report["columns"]] == [expected, expected]
    pieces = [bytes.fromhex(p) for p in report["columns"][0]["pieces_hex"]]
    assert pieces == [oracle.token_to_piece(t, special=True) for t in expected]

    class Stdin:
        buffer = __import__("io").BytesIO(data)
    monkeypatch.setattr("sys.stdin", Stdin)
    status, out, _ = tokenize(capsys, "-m", "llama-bpe", "--stdin", "--ids")
    assert status == 0 and json.loads(out.splitlines()[0].split(None, 1)[1]) == expected


def test_an_engine_column_that_differs_is_marked_and_exits_1(capsys, pair_for):
    _, oracle = pair_for("llama-spm")
    text = "a ZQXWRONG b"  # tests.broken_engine drops the last token of such a text
    status, out, err = tokenize(capsys, "-m", "llama-spm", "-p", text, "--engine", "tests.broken_engine:load")
    n = len(oracle.tokenize(text.encode(), add_special=True, parse_special=True))
    marked = [line for line in out.splitlines() if line.endswith("<<")]
    assert status == 1 and len(marked) == 1 and marked[0].split()[0] == str(n - 1)
    assert f"first at token {n - 1}" in err


def test_a_missing_file_is_one_line_exit_2(capsys, tmp_path):
    status = main(["tokenize", "-m", "llama-spm", "--file", str(tmp_path / "nope.txt")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "nope.txt" in err


def test_one_text_source_is_required(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["tokenize", "-m", "llama-spm"])
    assert exit_.value.code == 2
