"""`OracleSession` on llama.cpp's own aborts: the re-check in a fresh worker, skipped for a known crash.

gpt-2 is one of the BPE vocabularies llama.cpp aborts on for raw bytes F4 90 80 80 (a code
point above U+10FFFF: the known crash `invalid-codepoint`, harness/oracle/known_crashes.toml).
"""

from __future__ import annotations

import pytest

from harness.oracle import session as session_module
from harness.oracle.known_crashes import from_option
from harness.oracle.session import OracleCrash, OracleSession

pytestmark = [pytest.mark.oracle, pytest.mark.vocab]

ABORTS = {"id": "abort", "bytes": "f4908080", "text": ""}
PLAIN = {"id": "plain", "text": "Hello world, ünïcödé 12345"}


@pytest.fixture()
def starts(monkeypatch):
    """How many llama.cpp workers the session started."""
    count = []
    real = session_module.started

    def counted(*args, **kwargs):
        count.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(session_module, "started", counted)
    return count


def _known(crash):
    return from_option(None).match("gpt-2", crash) is not None


@pytest.mark.parametrize(("known", "expected_starts"), [(None, 3), (_known, 2)], ids=["unknown", "known"])
def test_a_crash_is_asked_again_unless_llama_cpp_said_a_known_one(require_vocab, starts, known, expected_starts):
    with OracleSession(require_vocab("gpt-2"), timeout=60, known=known) as oracle:
        before = oracle.evaluate(PLAIN)
        with pytest.raises(OracleCrash, match="SIGABRT") as raised:
            oracle.evaluate(ABORTS)
        assert "invalid codepoint" in raised.value.crash["stderr"]
        assert oracle.faults == []
        assert oracle.evaluate(PLAIN) == before  # a fresh worker for the next input
    assert len(starts) == expected_starts  # the first, the re-check's (unless known), the next input's
