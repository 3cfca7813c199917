"""The engine protocol bounded on the wire, and every value of a reply checked where it enters
(docs/engine-protocol.md "Bounds"; harness/subjects/wire.py).

Children that misbehave on the wire (tests/protocol_children.py: a line that never ends, a drip,
50 million ids, a hello claiming 2^40 tokens) and replies right but for one planted value
(tests/malformed_replies.py, its table `MALFORMED`) are each an engine error or a load error
naming what is wrong, in bounded time and memory; never a bug of the harness.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from harness.subjects import wire
from harness.subjects.client import RemoteEngine
from harness.subjects.guard import EngineLoadError
from harness.subjects.records import EngineError
from tests.malformed_replies import MALFORMED
from tests.protocol_children import alive

TESTS = Path(__file__).resolve().parents[1]
CHILD = str(TESTS / "protocol_children.py")
MALFORMED_CHILD = str(TESTS / "malformed_replies.py")
CASE = {"id": "a", "text": "abc"}


def planted(tmp_path: Path, name: str) -> RemoteEngine:
    """The Tiny engine's child with the row `name` of `MALFORMED` planted (EngineLoadError at hello)."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"*": MALFORMED[name][0]}), encoding="utf-8")
    return RemoteEngine([sys.executable, MALFORMED_CHILD], Path("/nonexistent.gguf"),
                        args={"plan": str(plan), "tiny": "yes"}, timeout=10.0)


def outcome_error(engine: RemoteEngine, op: str) -> str:
    """The error the planted value caused: of the case for tokenize, of the vocabulary otherwise."""
    if op != "tokenize":
        got = engine.vocab()
        assert isinstance(got, EngineError) and got.capability == "vocabulary", got
        return got.error
    (got,) = engine.evaluate_many([CASE])
    if isinstance(got, EngineError):
        return got.error
    errors = [e["detokenize_error"]["error"] for e in got["encode"] if "detokenize_error" in e]
    assert errors, got
    return errors[0]


def test_the_tiny_child_is_right_when_nothing_is_planted(tmp_path):
    (tmp_path / "plan.json").write_text("{}")
    engine = RemoteEngine([sys.executable, MALFORMED_CHILD], Path("/nonexistent.gguf"),
                          args={"plan": str(tmp_path / "plan.json"), "tiny": "yes"}, timeout=10.0)
    try:
        (got,) = engine.evaluate_many([CASE])
        vocab = engine.vocab()
    finally:
        engine.close()
    assert [e["ids"] for e in got["encode"]] == [[1, 2, 3]] * 4 and vocab["n_tokens"] == 8


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_reply_is_an_engine_error_naming_the_field(tmp_path, name):
    step, words = MALFORMED[name]
    try:
        engine = planted(tmp_path, name)
    except EngineLoadError as exc:
        assert step["op"] == "hello", exc
        error = str(exc)
    else:
        try:
            error = outcome_error(engine, step["op"])
        finally:
            engine.close()
    assert words in error, error
    assert "\n" not in error and len(error) < 1000
    error.encode("utf-8")  # valid Unicode: a report can hold it


# --- the wire -------------------------------------------------------------------------------------

def wire_engine(mode: str, timeout: float = 2.0, pids: Path | None = None) -> RemoteEngine:
    return RemoteEngine([sys.executable, CHILD, mode, *([str(pids)] if pids else [])], Path("/nonexistent.gguf"),
                        args={}, timeout=timeout)


@pytest.mark.parametrize(("mode", "words"), [
    pytest.param("flood", "broke the protocol: a reply line over 16,78", id="no-newline"),
    pytest.param("many-ids", "broke the protocol: a reply line over 16,78", id="50M-ids"),
    pytest.param("drip", "engine hung: no reply within 2s (", id="drip"),
    pytest.param("ids-over-cap", "100,000 ids for an input of 3 bytes: over the protocol's cap of 112", id="ids-cap"),
])
def test_a_reply_over_a_bound_is_an_engine_error_in_bounded_time(tmp_path, mode, words):
    pids = tmp_path / "pids"
    engine = wire_engine(mode, pids=pids)
    start = time.monotonic()
    try:
        (got,) = engine.evaluate_many([CASE])
    finally:
        engine.close()
    assert isinstance(got, EngineError) and words in got.error, got
    assert time.monotonic() - start < 30
    assert not alive(pids)


def test_a_line_without_end_is_cut_at_its_cap_not_read_on(tmp_path):
    """The cap holds however fast the child writes: `read_line` stops past `limit`, the rest unread."""
    engine = wire_engine("flood")
    try:
        child = engine.child
        child.contained.write(b'{"op": "tokenize", "id": 1, "inputs": ["YQ=="], "flags": [[false, false]]}\n')
        with pytest.raises(wire.LineTooLong) as raised:
            wire.read_line(child.contained, time.monotonic() + 20, 1 << 20)
    finally:
        engine.child.kill()
        engine.close()
    assert (1 << 20) < raised.value.size <= (1 << 20) + (1 << 20)  # one read past it, at most


def test_a_partial_line_is_late_at_the_deadline():
    engine = wire_engine("drip")
    try:
        child = engine.child
        child.contained.write(b'{"op": "tokenize", "id": 1, "inputs": ["YQ=="], "flags": [[false, false]]}\n')
        start = time.monotonic()
        with pytest.raises(wire.Late) as raised:
            wire.read_line(child.contained, start + 1.0, 1 << 20)
        took = time.monotonic() - start
    finally:
        engine.child.kill()  # no shutdown to wait for: it drips
        engine.close()
    assert raised.value.partial >= 2 and took < 1.5


def test_hello_claiming_2_to_the_40_tokens_is_a_load_error(tmp_path):
    with pytest.raises(EngineLoadError, match=r"info.n_tokens is 1099511627776: over the protocol's cap"):
        wire_engine("hello-2^40", pids=tmp_path / "pids")
    assert not alive(tmp_path / "pids")


def test_a_vocabulary_larger_than_the_gguf_is_not_fetched(tmp_path, require_vocab):
    """2^24 tokens claimed on llama-spm's 32,000: the record says n_tokens, no slice is asked."""
    path = require_vocab("llama-spm")
    pids = tmp_path / "pids"
    engine = RemoteEngine([sys.executable, CHILD, "hello-over-gguf", str(pids)], path, args={}, timeout=2.0)
    try:
        vocab = engine.vocab()
    finally:
        engine.close()
    assert vocab == {"n_tokens": 1 << 24}
    assert "vocab" not in pids.read_text() and not alive(pids)
