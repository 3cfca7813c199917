"""A template's capabilities, found as llama.cpp finds them (`common/jinja/caps.cpp`).

llama.cpp renders each template a few times with probe conversations, records which
input values the template used (read a member, tested, filtered, printed, iterated)
and which operations it applied to them, and from that decides how to prepare real
conversations: whether a system message must be merged into the next one, whether
tool-call arguments are passed as objects, whether content is a string or a list of
typed parts. We run the same probes through our renderer with values that record
their use. Only the capabilities that change the prompt are computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import jinja as chat_jinja
from .budget import DEFAULT_SIZE_BUDGET, DEFAULT_TIME_BUDGET, Budget
from .errors import ChatBudgetExceeded, ChatTemplateError


class _Stats:
    def __init__(self) -> None:
        self.used = False
        self.ops: set[str] = set()


class TStr(str):
    """A string that records its use (compare, print, length, methods)."""

    stats: _Stats

    def __new__(cls, value: str) -> TStr:
        obj = super().__new__(cls, value)
        obj.stats = _Stats()
        return obj

    def _use(self) -> None:
        self.stats.used = True

    def __eq__(self, other: object) -> bool:
        self._use()
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        self._use()
        return str.__ne__(self, other)

    __hash__ = str.__hash__

    def __len__(self) -> int:
        self._use()
        return str.__len__(self)

    def __str__(self) -> str:
        self._use()
        return str.__str__(self)

    def __iter__(self):  # type: ignore[no-untyped-def]
        self._use()
        self.stats.ops.add("array_access")
        return str.__iter__(self)

    def __contains__(self, item: object) -> bool:
        self._use()
        return str.__contains__(self, item)  # type: ignore[operator]

    def __add__(self, other: str) -> str:
        self._use()
        return str.__add__(self, other)


class TList(list):  # type: ignore[type-arg]
    stats: _Stats

    def __iter__(self):  # type: ignore[no-untyped-def]
        self.stats.used = True
        self.stats.ops.add("array_access")
        return list.__iter__(self)


class TDict(dict):  # type: ignore[type-arg]
    stats: _Stats

    def __iter__(self):  # type: ignore[no-untyped-def]
        self.stats.used = True
        self.stats.ops.add("object_access")
        return dict.__iter__(self)


def track(value: Any) -> Any:
    """A copy of JSON-like `value` whose strings, lists and dicts record their use."""
    if isinstance(value, str):
        return TStr(value)
    if isinstance(value, list):
        out = TList(track(v) for v in value)
        out.stats = _Stats()
        return out
    if isinstance(value, dict):
        d = TDict((k, track(v)) for k, v in value.items())
        d.stats = _Stats()
        return d
    return value


def _stats_of(value: Any) -> _Stats | None:
    return value.stats if isinstance(value, (TStr, TList, TDict)) else None


def stats(value: Any) -> _Stats:
    return _stats_of(value) or _Stats()


def mark_deep(value: Any) -> None:
    """tojson and string mark a value and everything in it as used."""
    s = _stats_of(value)
    if s is not None:
        s.used = True
    if isinstance(value, list):
        for v in list.__iter__(value):  # not TList.__iter__: marking is not an array access
            mark_deep(v)
    elif isinstance(value, dict):
        for v in dict.values(value):
            mark_deep(v)


def observe(kind: str, obj: Any, key: Any, value: Any) -> None:
    """The environment's hook: a member read marks the object, the member and the access kind."""
    for v in (obj, value):
        s = _stats_of(v)
        if s is not None:
            s.used = True
    s = _stats_of(obj)
    if s is None or kind == "print":
        return
    if kind == "op":
        s.ops.add(key)
        if key in ("tojson", "string"):
            mark_deep(obj)
    elif isinstance(key, slice):
        s.ops.add("slice")
    elif callable(value) and isinstance(key, str) and not isinstance(obj, dict):
        s.ops.add(key)  # a method call: llama.cpp's built-in function of that name
    elif isinstance(obj, dict) or not isinstance(key, int) or isinstance(key, bool):
        s.ops.add("object_access" if not isinstance(key, bool) else "array_access")
    else:
        s.ops.add("array_access")


@dataclass(frozen=True)
class Caps:
    """The capabilities that change how llama.cpp prepares a conversation."""

    supports_string_content: bool = True
    supports_typed_content: bool = False
    supports_system_role: bool = True
    supports_tools: bool = True
    supports_tool_calls: bool = True
    supports_object_arguments: bool = False
    notes: tuple[str, ...] = field(default=(), compare=False)


def _probe(source: str, budget: Budget, messages: list[Any],
           tools: list[Any] | None = None) -> tuple[bool, Any, Any, str]:
    msgs = track(messages)
    tls = track(tools if tools is not None else [])
    variables = {"messages": msgs, "tools": tls, "bos_token": "", "eos_token": "",
                 "add_generation_prompt": True}
    try:
        out = chat_jinja.render(source, variables, now=0.0, budget=budget, observer=observe)
        return True, msgs, tls, out
    except ChatBudgetExceeded:
        raise
    except ChatTemplateError:
        return False, msgs, tls, ""


_MARKER = "STRING_MARKER"
_TOOLS = [{"name": "tool", "type": "function", "function": {
    "name": "tool1", "description": "Tool description", "parameters": {
        "type": "object", "properties": {"arg": {"type": "string", "description": "Arg description"}},
        "required": ["arg"]}}}]


def _tool_conversation(arguments: Any) -> list[Any]:
    return [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call00001", "type": "function", "function": {"name": "tool1", "arguments": arguments}}]},
        {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
        {"role": "assistant", "content": "The tool response was 'tool response'"},
        {"role": "user", "content": "User message"},
    ]


_CACHE: dict[str, Caps] = {}


def caps_of(source: str, budget: Budget | None = None) -> Caps:
    """`jinja::caps_get`, for the capabilities that change the prompt (cached per source).

    The probes share `budget`: a template that loops forever fails here already.
    """
    if source not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[source] = _caps(source, budget or Budget(DEFAULT_TIME_BUDGET, DEFAULT_SIZE_BUDGET))
    return _CACHE[source]


def _caps(source: str, budget: Budget) -> Caps:
    string_content, typed_content, checks_for_string = True, False, False
    ok, msgs, _, out = _probe(source, budget, [{"role": "user", "content": _MARKER}])
    content = stats(msgs[0]["content"])
    checks_for_string = "test_is_string" in content.ops
    as_array = bool({"selectattr", "array_access"} & content.ops)
    typed_content = as_array
    if not ok or (as_array and _MARKER not in out):
        string_content = False
    if checks_for_string:
        ok, msgs, _, _ = _probe(source, budget, [{"role": "user", "content": []}])
        if ok and {"selectattr", "array_access"} & stats(msgs[0]["content"]).ops:
            typed_content = True

    _, msgs, _, _ = _probe(source, budget, [{"role": "system", "content": "System message"},
                                    {"role": "user", "content": "User message"}])
    system_role = stats(msgs[0]["content"]).used

    tools, tool_calls, object_args = True, True, False
    ok, msgs, tls, _ = _probe(source, budget, _tool_conversation({"arg": "value"}), _TOOLS)
    if ok:
        tools = stats(tls[0]["function"]["name"]).used
        calls = msgs[1]["tool_calls"]
        tool_calls = stats(calls).used
        object_args = tool_calls and stats(calls[0]["function"]["arguments"]["arg"]).used
    if not object_args:
        ok, msgs, tls, _ = _probe(source, budget, _tool_conversation('{"arg": "value"}'), _TOOLS)
        if not ok:
            tools = tool_calls = False
        else:
            tools = tools and stats(tls[0]["function"]["name"]).used
            tool_calls = tool_calls and stats(msgs[1]["tool_calls"]).used
    return Caps(string_content, typed_content, system_role, tools, tool_calls, object_args)
