"""The conversation strategy: reproducible, and inside the shapes the issue asks for."""

from __future__ import annotations

from harness.chat.strategies import sample


def test_sample_is_reproducible_and_well_formed():
    first, again = sample(60, seed=3), sample(60, seed=3)
    assert first == again and len(first) == 60
    for case in first:
        assert 1 <= len(case.messages) <= 12
        assert all(m["role"] in ("system", "user", "assistant", "tool") for m in case.messages)
        assert all(m["role"] != "system" for m in case.messages[1:])
    assert {c.add_generation_prompt for c in first} == {True, False}
    assert any(c.tools for c in first) and any(not c.tools for c in first)


def test_sample_reaches_the_traps():
    cases = sample(80, seed=0)
    contents = [m.get("content") for c in cases for m in c.messages]
    assert "" in contents and None in contents
    assert any(isinstance(t, str) and "<|im_end|>" in t for t in contents)
    assert any(any("tool_calls" in m for m in c.messages) for c in cases)
    assert any(len(c.messages) >= 8 for c in cases)
