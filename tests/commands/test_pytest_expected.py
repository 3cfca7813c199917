"""The pytest plugin's `--parity-expected-differences FILE`: a case whose findings the file names is an xfail
naming its entry, the session passes, and an entry that no longer shows is reported fixed (docs/run-options.md).

The engine is tests/broken_engine.py's planted one on llama-spm: a case holding ZQXWRONG loses its last token.
"""

from __future__ import annotations

import json

import pytest

from tests.commands.test_pytest_plugin import pytest_in
from tests.commands.test_run_cli import write_corpus

CORPUS = [{"id": "wrong-a", "text": "a ZQXWRONG b"}, {"id": "clean-a", "text": "Hello world"},
          {"id": "wrong-b", "text": "ZQXWRONG"}]
SHORT = ("--parity-long-docs", "0", "--parity-calls", "0", "--parity-no-default-corpora")


@pytest.mark.oracle
def test_known_differences_xfail_and_a_stale_entry_is_reported(tmp_path, require_vocab):
    require_vocab("llama-spm")
    corpus = write_corpus(tmp_path / "c.jsonl", CORPUS)
    listed = tmp_path / "known.json"
    listed.write_text(json.dumps([{"id": "drops-last", "case": "wrong-a", "reason": "planted"},
                                  {"case": "wrong-b", "reason": "planted too"},
                                  {"case": "clean-a", "reason": "fixed since"}]))
    done, results = pytest_in(tmp_path, "--parity-model", "llama-spm", "--parity-engine", "tests.broken_engine:load",
                              "--parity-corpus", str(corpus), *SHORT, "--parity-expected-differences", str(listed))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    outcome, message = results[("llama-spm", "wrong-a")]
    assert outcome == "xfailed" and "known difference 'drops-last'" in message
    assert results[("llama-spm", "wrong-b")][0] == "xfailed" and results[("llama-spm", "clean-a")][0] == "passed"
    assert "expected difference case clean-a no longer differs" in done.stdout
    report = json.loads((tmp_path / "parity-report" / "report.json").read_text())
    assert [e["status"] for e in report["expected_differences"]["entries"]] == ["known", "known", "fixed"]


def test_a_malformed_file_is_a_usage_error(tmp_path):
    listed = tmp_path / "known.json"
    listed.write_text('[{"case": "c"}]')
    done, _ = pytest_in(tmp_path, "--parity-model", "llama-spm", "--parity-expected-differences", str(listed))
    assert done.returncode == 4, done.stdout + done.stderr
    assert "entry 1: missing field 'reason'" in done.stderr and "Traceback" not in done.stderr
