"""The Jinja environment that renders chat templates as llama.cpp's own engine does.

llama.cpp (`common/jinja/`, the engine llama-server uses) is a re-implementation of
Jinja, not Python's jinja2. This module configures jinja2's `SandboxedEnvironment` so
that its output equals llama.cpp's on the templates we check, and keeps a hostile
template within its budget (`budget`).

What is reproduced (each pinned by tests/tokenizer/test_chat.py against the oracle's recordings):

- lexing: `trim_blocks` and `lstrip_blocks` on, CR LF and CR read as LF, one trailing
  newline of the source dropped; `{% break %}`/`{% continue %}` allowed;
- values printed and `tojson` as llama.cpp writes them (`values`), its string methods
  and filters (`filters`), and its undefined value, whose members are undefined too;
- `raise_exception(msg)` raises `TemplateRaised` ("Jinja Exception: msg"), and
  `strftime_now(fmt)` formats the caller's `now` in local time, as llama.cpp does.

The sandbox refuses attribute escapes (`__class__`, `mro`, ...); every attribute/item
access, call, operator, filter, loop step over `range` and output chunk passes the
budget's checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

try:
    from jinja2 import ChainableUndefined, Template, nodes
except ModuleNotFoundError as exc:  # the core install is numpy and regex; chat is an extra
    raise ModuleNotFoundError("chat templates need jinja2: pip install 'gguf-parity[chat]'",
                              name=exc.name) from None
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import SandboxedEnvironment

from .budget import DEFAULT_SIZE_BUDGET, DEFAULT_TIME_BUDGET, Budget
from .errors import ChatBudgetExceeded, ChatTemplateError, TemplateRaised
from .filters import STRING_FILTERS, STRING_METHODS
from .values import llama_concat, to_text, tojson

Observer = Callable[[str, Any, Any, Any], None]


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
