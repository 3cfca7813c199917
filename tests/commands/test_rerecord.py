"""`python -m harness rerecord`: every golden recorded again from its own cases, into another folder.

With the build it was recorded with, a golden comes back byte for byte (recording is deterministic),
which is what lets a bump's diff show only what the new build changed. A golden whose GGUF is nowhere
is skipped with one line and exit 2; the others are still written.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.cli import main
from harness.golden import files as goldens

ROOT = Path(__file__).resolve().parents[2]


def test_the_same_build_records_a_golden_again_byte_for_byte(tmp_path, require_vocab, capsys):
    require_vocab("gpt-2")
    golden = goldens.load_golden(ROOT / "golden" / "ggml-vocab-gpt-2.json", check=False)
    golden["cases"] = [c for c in golden["cases"] if c["id"] in {"inp-000", "inp-006", "edge-ws-00"}]
    (tmp_path / "in").mkdir()
    written = goldens.write_golden(tmp_path / "in" / "ggml-vocab-gpt-2.json", golden)
    bogus = json.loads(written.read_text(encoding="utf-8"))
    bogus["gguf"]["file"] = "ggml-vocab-nowhere.gguf"
    (tmp_path / "in" / "ggml-vocab-nowhere.json").write_text(json.dumps(bogus), encoding="utf-8")
    code = main(["rerecord", "--golden", str(tmp_path / "in"), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2 and "ggml-vocab-nowhere.json: skipped" in captured.err, captured.err
    assert (tmp_path / "out" / "ggml-vocab-gpt-2.json").read_bytes() == written.read_bytes()
    assert "ggml-vocab-gpt-2.json: 3 cases, 0 oracle crash(es)" in captured.out
