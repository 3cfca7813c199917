"""llama.cpp's string built-ins, as methods (`s.upper()`) and filters (`s|upper`): bytes and
ASCII, not Python's Unicode rules; and the filters whose llama.cpp rules differ from jinja2's
(`default`, `indent`, `length`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import ChatTemplateError
from .values import is_null, to_text

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
    return default_value if is_null(value) else value


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
