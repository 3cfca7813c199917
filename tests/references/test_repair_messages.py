"""`repair`'s messages layer compares two files conversation by conversation.

The three-way check itself is stubbed: what is under test is how its result becomes the layer's items,
so that `worse` sees a conversation that differs on both files (under another class) as no new difference,
and a conversation that agreed before and differs after as one.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from harness.chat import three_way
from harness.chat.three_way import ThreeWay
from harness.commands import repair
from harness.runs.repair_layers import Check, worse


class _Oracle:
    def __enter__(self) -> _Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _layer(monkeypatch: pytest.MonkeyPatch, classes: dict[str, str]):
    """The messages layer of a file on which each conversation key has the given class."""
    block = ThreeWay("x.gguf", "o", checked=["default"], cases=len(classes), classes=Counter(classes.values()),
                     differ_keys=[f"default: {k}" for k, c in classes.items() if c != "agree"])
    monkeypatch.setattr(three_way, "check", lambda *a, **k: block)
    monkeypatch.setattr("harness.chat.oracle.ChatOracle", _Oracle)
    return repair._message_layer(Path("x.gguf"), Path("o"), log=lambda s: None)


def test_a_conversation_that_differs_on_both_files_under_another_class_is_no_new_difference(monkeypatch):
    before = _layer(monkeypatch, {"a/gen": "renders differently", "b/gen": "agree"})
    after = _layer(monkeypatch, {"a/gen": "special tokens", "b/gen": "agree"})
    assert len(before.differ) == len(after.differ) == 1
    assert worse(Check(layers={"messages": before}), Check(layers={"messages": after})) == {}


def test_a_conversation_that_agreed_and_now_differs_is_new(monkeypatch):
    before = _layer(monkeypatch, {"a/gen": "renders differently", "b/gen": "agree"})
    after = _layer(monkeypatch, {"a/gen": "agree", "b/gen": "renders differently"})
    found = worse(Check(layers={"messages": before}), Check(layers={"messages": after}))
    assert found["messages"]["before"] == 1 and found["messages"]["after"] == 1 and found["messages"]["new"] == 1
