"""Hypothesis strategies for conversations, and a deterministic sampler over them.

Each strategy names the chat-template trap it aims at. `sample(n, seed)` draws `n`
conversations reproducibly (same seed, same conversations) through Hypothesis's
public API, for the live chat check and the nightly.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from .cases import Case

# Other templates' markup: content that spells special tokens (the injection case).
SPECIAL_STRINGS = ("<|im_start|>", "<|im_end|>", "<s>", "</s>", "[INST]", "[/INST]", "<|eot_id|>",
                   "<|start_header_id|>", "<|end_header_id|>", "<start_of_turn>", "<end_of_turn>",
                   "<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>", "<think>", "</think>",
                   "{{ x }}", "{% if %}", "\n\n", " ", "\t", "\r\n")


def contents() -> st.SearchStrategy[str]:
    """Message text: plain words, any Unicode (controls included), special strings, empty, padded."""
    words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
    markup = st.lists(st.sampled_from(SPECIAL_STRINGS) | st.sampled_from(("hello", "world", "é", "日本")),
                      max_size=6).map("".join)
    return st.one_of(st.just(""), words, markup, words.map(lambda s: f"  {s}\n"))


def tool_call(index: int) -> st.SearchStrategy[dict[str, Any]]:
    """An OpenAI tool call with JSON-text arguments (parsed back to an object where the template wants one)."""
    args = st.dictionaries(st.sampled_from(("city", "unit", "n")), st.text(max_size=8) | st.integers(0, 99),
                           max_size=2)
    return args.map(lambda a: {"id": f"call{index:05d}", "type": "function",
                               "function": {"name": "get_weather",
                                            "arguments": json.dumps(a, ensure_ascii=False)}})


@st.composite
def messages(draw: st.DrawFn, *, with_tools: bool) -> list[dict[str, Any]]:
    """1-12 messages: system present or absent, consecutive same roles, null assistant content, tool turns."""
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(contents())})
    roles = ("user", "assistant", "tool") if with_tools else ("user", "assistant")
    for i in range(draw(st.integers(1, 12 - len(out)))):
        role = draw(st.sampled_from(roles)) if i else "user"
        msg: dict[str, Any] = {"role": role, "content": draw(contents())}
        if role == "assistant" and with_tools and draw(st.booleans()):
            msg["tool_calls"] = [draw(tool_call(i))]
            msg["content"] = draw(st.sampled_from(("", None)))
        if role == "tool":
            msg["tool_call_id"] = f"call{i:05d}"
        out.append(msg)
    return out


@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    """A conversation, with or without the corpus's tool definition, add_generation_prompt either way."""
    with_tools = draw(st.booleans())
    tools = _corpus_tools() if with_tools else None
    return {"messages": draw(messages(with_tools=with_tools)), "tools": tools,
            "add_generation_prompt": draw(st.booleans())}


@functools.lru_cache(maxsize=1)
def _corpus_tools() -> list[dict[str, Any]]:
    from .cases import load_conversations
    tools: list[dict[str, Any]] = next(c["tools"] for c in load_conversations() if c.get("tools"))
    return tools


def sample(n: int, seed: int = 0) -> list[Case]:
    """`n` fuzzed cases, the same ones for the same seed."""
    drawn: list[Case] = []

    @hypothesis_seed(seed)
    @settings(max_examples=n, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(conversations())
    def collect(conv: dict[str, Any]) -> None:
        if len(drawn) < n:
            drawn.append(Case(f"fuzz-{len(drawn):03d}", conv["messages"], conv["tools"],
                              conv["add_generation_prompt"]))

    collect()
    return drawn
