"""Values printed as llama.cpp's Jinja engine prints them (`common/jinja/`).

- `{{ value }}`: `True`/`False`, `None`, floats as `std::to_string` with trailing zeros
  dropped; lists and dicts in Python's repr style (`to_text`);
- `tojson`: `ensure_ascii` off by default, `", "`/`": "` separators (`","` with an indent),
  keys in insertion order, floats as C++'s `ostream <<` writes them;
- `a ~ b` and `a + b` on strings, a null side read as '' (`llama_concat`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from jinja2 import Undefined

from .errors import ChatTemplateError


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


def is_null(value: Any) -> bool:
    """None or undefined: what llama.cpp's engine treats as null."""
    return value is None or isinstance(value, Undefined)


def llama_concat(left: Any, right: Any) -> Any:
    """`a ~ b` and `a + b` on strings: a null or undefined side next to a string reads as ''."""
    if is_null(left) or is_null(right):
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
