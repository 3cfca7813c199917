"""The engine protocol (docs/engine-protocol.md): the serving side in-process, and the harness's side
against children that break it (tests/protocol_children.py). No vocabulary or llama.cpp needed.
"""

from __future__ import annotations

import base64
import math
import os
import sys
from pathlib import Path

import pytest

from harness.subjects.client import RemoteEngine
from harness.subjects.guard import EngineLoadError
from harness.subjects.protocol import Server
from harness.subjects.records import EngineError

CHILD = str(Path(__file__).resolve().parents[1] / "protocol_children.py")
FLAGS = [[False, False], [False, True], [True, False], [True, True]]


class Fake:
    """A tiny engine: one id per input byte; faults on chosen inputs."""

    n_tokens = 3

    def tokenize(self, text, *, add_special, parse_special):
        if text == b"exit":
            raise SystemExit(0)
        if text == b"ctrl-c":
            raise KeyboardInterrupt
        return list(text) + ([0] if add_special else [])

    def detokenize(self, ids, *, remove_special, unparse_special):
        return bytes(i for i in ids if not (remove_special and i == 0))

    def token_score(self, token):
        return [0.5, math.nan, -math.inf][token]


def served(requests: list[dict]) -> list[dict]:
    server = Server(lambda path, **args: Fake(), "tests:Fake")
    return [server.handle({"id": i, **r}) for i, r in enumerate(requests)]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_hello_declares_what_the_engine_offers():
    (hello,) = served([{"op": "hello", "model": "/x.gguf"}])
    assert hello["ok"] and hello["protocol"] == 1
    assert hello["capabilities"] == ["tokenize", "bytes_input", "detokenize", "token_score"]
    assert hello["info"] == {"n_tokens": 3}


def test_tokenize_is_batched_lossless_and_catches_exit_and_interrupt():
    _, reply = served([{"op": "hello", "model": "/x.gguf"},
                       {"op": "tokenize", "inputs": [b64(b"\xff\x01a"), b64(b"exit"), b64(b"ctrl-c")],
                        "flags": FLAGS, "detokenize": [[False, False], [True, False]]}])
    first, exits, interrupts = reply["results"]
    assert first[2] == {"ids": [255, 1, 97, 0], "detokenize": [b64(b"\xff\x01a\x00"), b64(b"\xff\x01a")]}
    assert [r["error"]["type"] for r in exits] == ["SystemExit"] * 4
    assert [r["error"]["type"] for r in interrupts] == ["KeyboardInterrupt"] * 4


def test_vocab_scores_carry_non_finite_values_as_strings():
    _, reply = served([{"op": "hello", "model": "/x.gguf"},
                       {"op": "vocab", "start": 0, "count": 3, "fields": ["score", "text"]}])
    assert reply == {"ok": True, "score": [0.5, "NaN", "-Infinity"]}  # text is not offered: not sent


def test_unknown_op_and_requests_before_hello_are_errors():
    unknown, early = served([{"op": "frobnicate"}, {"op": "tokenize", "inputs": [], "flags": FLAGS}])
    assert unknown["error"]["type"] == "UnknownOp" and early["error"]["type"] == "NotLoaded"


def remote(mode: str, timeout: float = 5.0, *extra: str) -> RemoteEngine:
    return RemoteEngine([sys.executable, CHILD, mode, *extra], Path("/nonexistent.gguf"), args={}, timeout=timeout)


CASES = [{"id": "a", "text": "abc"}, {"id": "b", "bytes": "ff"}]


@pytest.mark.parametrize(("mode", "message"), [
    pytest.param("garbage", "not JSON", id="garbage"),
    pytest.param("wrong-id", "expected a reply with id", id="wrong-id"),
    pytest.param("float-ids", "ids[0] is float 1.0, not an int", id="float-ids"),
    pytest.param("short", "broke the protocol", id="too-few-results"),
    pytest.param("die", "exited with status 9", id="dies"),
])
def test_a_child_breaking_the_protocol_is_an_engine_error_per_case(mode, message):
    engine = remote(mode)
    try:
        outcomes = engine.evaluate_many(CASES)
    finally:
        engine.close()
    assert all(isinstance(o, EngineError) and message in o.error for o in outcomes), outcomes


def test_a_hanging_child_is_killed_and_restarted():
    engine = remote("hang", timeout=1.0)
    try:
        (outcome,) = engine.evaluate_many(CASES[:1])
        assert isinstance(outcome, EngineError) and "hung" in outcome.error
        assert engine.child.proc.poll() is None  # a fresh child is up for the next case
    finally:
        engine.close()
    assert engine.child.proc.poll() is not None  # and close() ends it


def test_a_long_input_gets_the_engine_timeout_per_64_kib():
    """A 384 KiB document that a child takes 1.8 s over is slow, not hung, under a 1 s --engine-timeout."""
    engine = remote("slow-per-64k", timeout=1.0)
    try:
        (outcome,) = engine.evaluate_many([{"id": "doc", "text": "a" * (384 << 10)}])
        assert not isinstance(outcome, EngineError), outcome
        assert not engine.flakes
    finally:
        engine.close()


def test_a_good_child_round_trips():
    engine = remote("ok")
    try:
        a, b = engine.evaluate_many(CASES)
    finally:
        engine.close()
    assert [e["ids"] for e in a["encode"]] == [[4]] * 4 and b["bytes"] == "ff"


@pytest.mark.parametrize(("mode", "message"), [
    pytest.param("die-at-hello", "exited with status 4", id="dies"),
    pytest.param("protocol-2", "protocol 2", id="version"),
])
def test_a_child_that_cannot_start_is_a_load_error(mode, message):
    with pytest.raises(EngineLoadError, match=message):
        remote(mode)


@pytest.mark.parametrize(("mode", "first"), [
    pytest.param("die-once", "exited with status 9", id="dies-once"),
    pytest.param("hang-once", "engine hung: no reply within 1s", id="hangs-once"),
])
def test_a_batch_failure_that_does_not_repeat_is_a_flake_naming_the_batch(tmp_path, mode, first):
    engine = remote(mode, 1.0, str(tmp_path / "state"))
    try:
        a, b = engine.evaluate_many(CASES)
    finally:
        engine.close()
    assert [e["ids"] for e in a["encode"]] == [[4]] * 4 and b["bytes"] == "ff"  # the fresh child's answers
    (flake,) = engine.flakes
    assert flake["case_ids"] == ["a", "b"] and flake["op"] == "tokenize" and first in flake["first"]


def test_a_single_case_failure_is_rechecked_and_repeated_is_an_engine_error(tmp_path):
    once = remote("die-once", 5.0, str(tmp_path / "state"))
    try:
        (answer,) = once.evaluate_many(CASES[:1])
    finally:
        once.close()
    assert answer["encode"][0]["ids"] == [4] and once.flakes[0]["case_ids"] == ["a"]
    always = remote("die")
    try:
        (error,) = always.evaluate_many(CASES[:1])
    finally:
        always.close()
    assert isinstance(error, EngineError) and error.error.count("exited with status 9") == 2  # both tries named
    assert always.flakes == []


def test_a_hello_failure_that_does_not_repeat_is_a_load_flake(tmp_path):
    engine = remote("die-at-hello-once", 5.0, str(tmp_path / "state"))
    try:
        (flake,) = engine.flakes
    finally:
        engine.close()
    assert flake["case_ids"] == ["<load>"] and flake["op"] == "hello" and "exited with status 4" in flake["first"]


def test_a_hello_failure_while_restarting_that_does_not_repeat_is_a_flake_too(tmp_path):
    """The restart after a failed request is itself re-checked: a fresh child failing at hello once is listed."""
    engine = remote("die-then-at-hello-once", 5.0, str(tmp_path / "state"))
    try:
        (answer,) = engine.evaluate_many(CASES[:1])
    finally:
        engine.close()
    assert answer["encode"][0]["ids"] == [4]  # the third child answered
    assert [(f["case_ids"], f["op"]) for f in engine.flakes] == [(["<load>"], "hello"), (["a"], "tokenize")]
    assert "exited with status 4" in engine.flakes[0]["first"] and "status 9" in engine.flakes[1]["first"]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd (Linux)")
def test_fifty_restarts_leave_no_descriptor_open():
    """Each restart closes the old child's pipes, pidfd and stderr file: the harness's descriptors stay put."""
    before = open_fds()
    engine = remote("exit-after-reply")
    try:
        answers = [engine.evaluate_one({"id": f"c{i}", "text": "abc"}) for i in range(51)]  # a request each
    finally:
        engine.close()
    assert all(isinstance(a, dict) and a["encode"][0]["ids"] == [4] for a in answers)  # len(base64("abc"))
    assert len(engine.flakes) == 50  # 50 restarts, each a flake (the child exited between requests)
    assert open_fds() == before
