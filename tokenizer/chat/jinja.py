"""The Jinja environment that renders chat templates as llama.cpp's own engine does.

llama.cpp (`common/jinja/`, the engine llama-server uses) is a re-implementation of
Jinja, not Python's jinja2. This module configures jinja2's `SandboxedEnvironment` so
that its output equals llama.cpp's on the templates we check, and keeps a hostile
template within a time and size budget.

What is reproduced (each pinned by tests/tokenizer/test_chat.py against the oracle's recordings):

- lexing: `trim_blocks` and `lstrip_blocks` on, CR LF and CR read as LF, one trailing
  newline of the source dropped; `{% break %}`/`{% continue %}` allowed;
- `tojson`: `ensure_ascii` off by default, `", "`/`": "` separators (`","` with an
  indent), keys in insertion order, floats as C++'s `ostream <<` writes them;
- printed values: `True`/`False`, `None`, floats as `std::to_string` with trailing
  zeros dropped; lists and dicts in Python's repr style;
- `raise_exception(msg)` raises `TemplateRaised` ("Jinja Exception: msg"), and
  `strftime_now(fmt)` formats the caller's `now` in local time, as llama.cpp does.

The sandbox refuses attribute escapes (`__class__`, `mro`, ...). The budget: every
attribute/item access, call, operator, filter, loop step over `range` and output chunk
checks a deadline and (every few milliseconds) the process's memory growth, and strings
built by operators, filters and concatenation may not exceed a size limit;
`ChatBudgetExceeded` names which was hit.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

try:
    from jinja2 import ChainableUndefined, Template, Undefined, nodes
except ModuleNotFoundError as exc:  # the core install is numpy and regex; chat is an extra
    raise ModuleNotFoundError("chat templates need jinja2: pip install 'gguf-parity[chat]'",
                              name=exc.name) from None
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import SandboxedEnvironment

DEFAULT_TIME_BUDGET = 5.0  # seconds per render
DEFAULT_SIZE_BUDGET = 16 << 20  # characters in any one string, and in the output
DEFAULT_MEMORY_BUDGET = 512 << 20  # bytes a render may grow the process's resident memory by
MEMORY_CHECK_SECONDS = 0.005
try:
    PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):  # not a POSIX system: no /proc/self/statm either
    PAGE_SIZE = 4096


class ChatTemplateError(ValueError):
    """A chat template that does not parse, or fails while rendering."""


class TemplateRaised(ChatTemplateError):
    """The template called raise_exception(): it refuses this conversation."""


class ChatBudgetExceeded(ChatTemplateError):
    """A template ran past its time budget or built a string past its size budget."""


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux: /proc/self/statm), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read(64).split()[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


class Budget:
    """A deadline, a size limit and a memory limit, checked from the environment's hooks.

    The memory limit is the growth of the process's resident memory over its size when the
    budget was made, looked at every `MEMORY_CHECK_SECONDS` from `tick()` (every hook and every
    1,024 steps of a `range` tick), so a template that allocates in a loop or in one filter call
    over a range (`range(10**8)|list`) stops within a few megabytes of the limit. Where the
    resident size cannot be read, only time and size bound a render.
    """

    def __init__(self, seconds: float, size: int, memory: int = DEFAULT_MEMORY_BUDGET) -> None:
        self.seconds = seconds
        self.size = size
        self.memory = memory
        self.deadline = time.monotonic() + seconds
        self.output = 0
        self.base = resident_bytes()
        self.next_memory_check = time.monotonic() + MEMORY_CHECK_SECONDS

    def tick(self) -> None:
        now = time.monotonic()
        if now > self.deadline:
            raise ChatBudgetExceeded(f"chat template ran longer than its {self.seconds:g} s budget")
        if now > self.next_memory_check and self.base is not None:
            self.next_memory_check = now + MEMORY_CHECK_SECONDS
            grown = (resident_bytes() or 0) - self.base
            if grown > self.memory:
                raise ChatBudgetExceeded(f"chat template grew this process by {grown >> 20:,} MiB, over its "
                                         f"budget of {self.memory >> 20:,} MiB")

    def sized(self, value: Any) -> Any:
        if isinstance(value, (str, list)) and len(value) > self.size:
            raise ChatBudgetExceeded(f"chat template built a value of {len(value):,} items, over its "
                                     f"budget of {self.size:,}")
        return value

    def emit(self, chunk: str) -> str:
        self.tick()
        self.output += len(chunk)
        if self.output > self.size:
            raise ChatBudgetExceeded(f"chat template output passed its budget of {self.size:,} characters")
        return chunk


# -- printing values as llama.cpp's engine does ------------------------------------------
def cpp_float_string(x: float) -> str:
    """`value_float::as_string`: std::to_string (6 decimals), trailing zeros dropped, one kept."""
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    out = f"{x:.6f}".rstrip("0")
    return out + "0" if out.endswith(".") else out


def cpp_ostream_float(x: float) -> str:
    """`std::ostream << double` (default precision 6, %g-like), used by llama.cpp's tojson."""
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    return f"{x:.6g}"


def repr_value(value: Any) -> str:
    """`value_to_string_repr`: how a list or dict prints its items (Python style quotes)."""
    if isinstance(value, str):
        plain = str.__str__(value)  # not the value's own methods: printing a container uses nothing in it
        return _json_string(plain) if "'" in plain else f"'{plain}'"
    return to_text(value)


def _items(value: list[Any] | tuple[Any, ...]) -> Iterator[Any]:
    """Iterate without the value's own __iter__: our printing is no use of it (see chat_caps)."""
    return list.__iter__(value) if isinstance(value, list) else iter(value)


def to_text(value: Any) -> str:
    """How `{{ value }}` prints: llama.cpp's `as_string` for each type."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return cpp_float_string(value)
    if isinstance(value, tuple):
        inner = ", ".join(repr_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(repr_value(v) for v in _items(value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{repr_value(k)}: {repr_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _json_string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_JSON_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def json_dumps(value: Any, indent: int | None = None, item_sep: str | None = None,
               key_sep: str = ": ", level: int = 0) -> str:
    """`value_to_json`: llama.cpp's tojson layout (not Python's json.dumps)."""
    if item_sep is None:
        item_sep = ", " if indent is None or indent < 0 else ","
    if value is None or _is_undefined(value):
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return cpp_ostream_float(value)
    if isinstance(value, str):
        return _json_string(value)
    nl = "\n" if indent is not None and indent >= 0 else ""
    pad = " " * (indent * level) if indent and indent > 0 else ""
    step = " " * indent if indent and indent > 0 else ""
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = [pad + step + json_dumps(v, indent, item_sep, key_sep, level + 1) for v in _items(value)]
        return "[" + nl + (item_sep + nl).join(items) + nl + pad + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [pad + step + _json_string(str(k)) + key_sep + json_dumps(v, indent, item_sep, key_sep, level + 1)
                 for k, v in value.items()]
        return "{" + nl + (item_sep + nl).join(items) + nl + pad + "}"
    return "null"


def _is_undefined(value: Any) -> bool:
    return isinstance(value, Undefined)


def _is_null(value: Any) -> bool:
    return value is None or isinstance(value, Undefined)


def llama_concat(left: Any, right: Any) -> Any:
    """`a ~ b` and `a + b` on strings: a null or undefined side next to a string reads as ''."""
    if _is_null(left) or _is_null(right):
        if isinstance(left, str) or isinstance(right, str):
            return (left if isinstance(left, str) else "") + (right if isinstance(right, str) else "")
        raise ChatTemplateError("Cannot perform operation on null values")
    return to_text(left) + to_text(right)


def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
           separators: Any = None, sort_keys: bool = False) -> str:
    """The `tojson` filter with llama.cpp's defaults and layout."""
    if sort_keys:
        raise ChatTemplateError("tojson sort_keys=true not implemented")  # as llama.cpp
    seps = list(separators) if isinstance(separators, (list, tuple)) else []
    item_sep = seps[0] if seps else None
    key_sep = seps[1] if len(seps) > 1 else ": "
    ind = indent if isinstance(indent, int) and not isinstance(indent, bool) else None
    text = json_dumps(value, ind, item_sep, key_sep)
    if ensure_ascii:
        text = json.dumps(text, ensure_ascii=True)[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


Observer = Callable[[str, Any, Any, Any], None]


# -- llama.cpp's string built-ins: bytes and ASCII, not Python's Unicode rules --------------
_ASCII_SPACE = " \t\n\v\f\r"


def _ascii_map(text: str, fn: Callable[[str], str]) -> str:
    return "".join(fn(c) if c < "\x80" else c for c in text)


def s_upper(s: str) -> str:
    return _ascii_map(s, str.upper)


def s_lower(s: str) -> str:
    return _ascii_map(s, str.lower)


def s_capitalize(s: str) -> str:
    return s_upper(s[:1]) + s_lower(s[1:])


def s_title(s: str) -> str:
    out, cap = [], True
    for c in s:
        if c in _ASCII_SPACE:
            out.append(c)
            cap = True
        else:
            out.append(s_upper(c) if cap else s_lower(c))
            cap = False
    return "".join(out)


def s_strip(s: str, chars: str | None = None) -> str:
    return s.strip(_ASCII_SPACE if chars is None else chars)


def s_lstrip(s: str, chars: str | None = None) -> str:
    return s.lstrip(_ASCII_SPACE if chars is None else chars)


def s_rstrip(s: str, chars: str | None = None) -> str:
    return s.rstrip(_ASCII_SPACE if chars is None else chars)


def s_split(s: str, sep: str = " ", maxsplit: int = -1) -> list[str]:
    if not sep:
        raise ChatTemplateError("empty separator")
    return s.split(sep, maxsplit)


def s_rsplit(s: str, sep: str = " ", maxsplit: int = -1) -> list[str]:
    if not sep:
        raise ChatTemplateError("empty separator")
    return s.rsplit(sep, maxsplit)


def s_length(value: Any) -> int:
    """`length`: a string's length is its byte count in llama.cpp."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return len(value)


STRING_METHODS: dict[str, Callable[..., Any]] = {
    "upper": s_upper, "lower": s_lower, "capitalize": s_capitalize, "title": s_title, "strip": s_strip,
    "lstrip": s_lstrip, "rstrip": s_rstrip, "split": s_split, "rsplit": s_rsplit,
}
def f_default(value: Any, default_value: Any = "", boolean: bool = False) -> Any:
    """`default`: in llama.cpp a None value takes the default too, not only an undefined one."""
    if boolean:
        return value if value else default_value
    return default_value if _is_null(value) else value


def f_indent(s: str, width: Any = 4, first: bool = False, blank: bool = False) -> str:
    """`indent`, as llama.cpp writes it: lines split on '\\n' only (jinja2 also splits on NEL, FS, ...),
    and its emptiness checks, quirks included."""
    if isinstance(width, int) and not isinstance(width, bool):
        pad = " " * width
    else:
        pad = width if isinstance(width, str) else "    "
    lines = s.split("\n")
    if s.endswith("\n"):
        lines.pop()
    out = ""
    for line in lines if s else []:
        started = bool(out)
        if started:
            out += "\n"
        if (blank or bool(line)) if started else first:
            out += pad
        out += line
    if s.endswith("\n"):
        out += "\n" + (pad if blank else "")
    return out


STRING_FILTERS: dict[str, Callable[..., Any]] = {
    "indent": f_indent,
    "default": f_default, "d": f_default,
    "upper": s_upper, "lower": s_lower, "capitalize": s_capitalize, "title": s_title, "trim": s_strip,
    "strip": s_strip, "length": s_length, "count": s_length,
    "string": lambda v: v if isinstance(v, str) else to_text(v),
}


# -- the environment --------------------------------------------------------------------
class _BudgetCodeGenerator(CodeGenerator):
    """Routes `a ~ b` through the environment so that its size is checked."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat_checked((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class GenerationTag(Extension):
    """`{% generation %}...{% endgeneration %}` (a transformers tag): the body, as llama.cpp ignores the tags."""

    tags = {"generation"}  # noqa: RUF012

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


_EMPTY: dict[str, Callable[[], Any]] = {"str": str, "list": list, "int": int, "undef": lambda: LlamaUndefined()}
# value_undefined_t::get_builtins: methods of an undefined value, each returning an empty value
UNDEFINED_METHODS = {
    **dict.fromkeys(("capitalize", "join", "lower", "replace", "safe", "string", "strip", "title", "truncate",
                     "upper", "trim"), "str"),
    **dict.fromkeys(("items", "list", "map", "reject", "rejectattr", "reverse", "select", "selectattr", "sort",
                     "unique"), "list"),
    **dict.fromkeys(("length", "sum", "wordcount"), "int"),
    **dict.fromkeys(("first", "last", "max", "min"), "undef"),
}
# value_none_t::get_builtins
NONE_METHODS = {**dict.fromkeys(("items", "map", "reject", "rejectattr", "select", "selectattr", "unique"), "list")}


class LlamaUndefined(ChainableUndefined):
    """llama.cpp's undefined: members of it are undefined too, it prints as '', and its
    built-in methods (`items()`, `length()`, ...) return empty values."""

    def __getattr__(self, name: str) -> Any:
        if name in UNDEFINED_METHODS:
            return lambda *a, **k: _EMPTY[UNDEFINED_METHODS[name]]()
        return super().__getattr__(name)


class LlamaEnvironment(SandboxedEnvironment):
    """jinja2 configured as llama.cpp's engine, with a per-render budget."""

    code_generator_class = _BudgetCodeGenerator
    intercepted_binops = frozenset({"+", "*", "**", "%", "//", "/", "-"})

    def __init__(self) -> None:
        super().__init__(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
                         extensions=["jinja2.ext.loopcontrols", GenerationTag],
                         finalize=self._finalize, undefined=LlamaUndefined)
        self.budget = Budget(DEFAULT_TIME_BUDGET, DEFAULT_SIZE_BUDGET)
        self.observer: Observer | None = None
        self.filters["tojson"] = tojson
        self.filters.update(STRING_FILTERS)
        self.globals["range"] = self._range
        self.filters = {name: self._watch(name, f) for name, f in self.filters.items()}
        self.tests = {name: self._watch(f"test_is_{name}", f)  # type: ignore[arg-type]
                      for name, f in self.tests.items()}

    def _watch(self, op: str, func: Callable[..., Any]) -> Callable[..., Any]:
        """A filter or test that ticks the budget, reports its input and checks its output size."""
        skip = 1 if getattr(func, "jinja_pass_arg", None) else 0

        def watched(*args: Any, **kwargs: Any) -> Any:
            self.budget.tick()
            if self.observer and len(args) > skip:
                self.observer("op", args[skip], op, None)
            result = func(*args, **kwargs)
            if isinstance(result, Iterator):  # map/select/...: llama.cpp makes arrays, not generators
                result = list(result)
            return self.budget.sized(result)

        if skip:
            watched.jinja_pass_arg = func.jinja_pass_arg  # type: ignore[attr-defined]
        return watched

    def _finalize(self, value: Any) -> str:
        if self.observer:
            self.observer("print", value, None, value)
        return to_text(value)

    # budget hooks: every attribute, item, call and operator passes here
    def getattr(self, obj: Any, attribute: str) -> Any:
        self.budget.tick()
        if isinstance(obj, str) and attribute in STRING_METHODS:
            method = STRING_METHODS[attribute]
            value: Any = lambda *a, **k: method(obj, *a, **k)  # noqa: E731
        elif obj is None and attribute in NONE_METHODS:
            value = lambda *a, **k: _EMPTY[NONE_METHODS[attribute]]()  # noqa: E731
        else:
            value = super().getattr(obj, attribute)
        if self.observer:
            self.observer("get", obj, attribute, value)
        return value

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.budget.tick()
        value = super().getitem(obj, argument)
        if self.observer:
            self.observer("item", obj, argument, value)
        return value

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        __self.budget.tick()
        return __self.budget.sized(super().call(__context, __obj, *args, **kwargs))

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.budget.tick()
        if operator == "*" and isinstance(left, (str, list)) and isinstance(right, int) \
                and len(left) * right > self.budget.size:
            raise ChatBudgetExceeded(f"chat template built a value of {len(left) * right:,} items, "
                                     f"over its budget of {self.budget.size:,}")
        if operator == "**" and isinstance(right, int) and right > 4096:
            raise ChatBudgetExceeded(f"chat template raised a number to the power {right:,}")
        if operator == "+" and (isinstance(left, str) or isinstance(right, str)):
            return self.budget.sized(llama_concat(left, right))
        return self.budget.sized(super().call_binop(context, operator, left, right))

    def concat_checked(self, parts: tuple[Any, ...]) -> str:
        self.budget.tick()
        result = parts[0]
        for part in parts[1:]:
            result = self.budget.sized(llama_concat(result, part))
        return to_text(result)

    def _range(self, *args: int) -> Iterator[int]:
        for i, value in enumerate(range(*args)):
            if i % 1024 == 0:
                self.budget.tick()
            yield value


def raise_exception(message: str) -> None:
    raise TemplateRaised(f"Jinja Exception: {message}")


def strftime_now(now: float) -> Callable[[str], str]:
    def format_now(fmt: str) -> str:
        return time.strftime(fmt, time.localtime(now))
    return format_now


_COMPILED: dict[str, tuple[LlamaEnvironment, Template]] = {}


def _compiled(source: str) -> tuple[LlamaEnvironment, Template]:
    """One environment and compiled template per source (compiling dominates a render's cost)."""
    if source not in _COMPILED:
        if len(_COMPILED) > 64:
            _COMPILED.clear()
        env = LlamaEnvironment()
        env.globals["raise_exception"] = raise_exception
        _COMPILED[source] = (env, env.from_string(source.replace("\r\n", "\n").replace("\r", "\n")))
    return _COMPILED[source]


def render(source: str, variables: dict[str, Any], *, now: float,
           budget: Budget | None = None, observer: Observer | None = None) -> str:
    """Render `source` with `variables`; `ChatTemplateError` (or a subclass) on failure.

    `budget` (default: 5 s, 16 Mi characters) may be shared by several renders. Not
    thread-safe: renders of one source share an environment.
    """
    try:
        env, template = _compiled(source)
        env.budget = budget or Budget(DEFAULT_TIME_BUDGET, DEFAULT_SIZE_BUDGET)
        env.budget.output = 0
        env.observer = observer
        return "".join(env.budget.emit(chunk)
                       for chunk in template.generate({"strftime_now": strftime_now(now), **variables}))
    except ChatTemplateError:
        raise
    except TemplateError as exc:
        raise ChatTemplateError(f"chat template error: {exc}") from exc
    except RecursionError as exc:
        raise ChatBudgetExceeded("chat template recursed too deeply") from exc
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError,
            OverflowError) as exc:
        raise ChatTemplateError(f"chat template failed: {type(exc).__name__}: {exc}") from exc
