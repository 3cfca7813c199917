"""Records of an engine under test, from only the capabilities it offers, with its results type-checked.

`harness.golden.records` computes llama.cpp's full records; an engine under test may
offer only `tokenize`. Here the same records are built from what the engine
offers (`harness.subjects.capabilities`), and everything it returns is checked, never
coerced: ids must be plain integers in a list (a float, a digit string or a
bool is a `ContractError`), outputs bytes or str. The vocabulary is read as
columns (`vocab_columns`), the form the engine protocol ships them in, and
`vocab_from_columns` packs them exactly as `records.vocab_record` does, so a
full engine gives a byte-identical record.
"""

from __future__ import annotations

import math
import numbers
import traceback
from dataclasses import dataclass

import numpy as np

from ..golden.records import (
    FLAGS,
    TOKEN_FIELDS,
    column_digests,
    earlier_detokenize,
    output_field,
    pack_array,
    unpack_array,
)
from ..inputs.corpus import case_input
from .capabilities import SPECIAL_FLAGS, special_ids


@dataclass(frozen=True)
class EngineError:
    """An engine that failed on a case: the exception in one line, its full traceback, and which call."""

    error: str
    traceback: str
    capability: str = "tokenize"


VOCAB_FIELDS = {"text": "token_text", "score": "token_score", "attr": "token_attr", "piece": "token_to_piece",
                "piece_special": "token_to_piece", "eog": "is_eog", "control": "is_control"}
TRACEBACK_LIMIT = 20000


class ContractError(TypeError):
    """An engine result of the wrong type (a float id, a str where bytes are due, ...)."""


@dataclass(frozen=True)
class NotApplicable:
    """A case the engine cannot be asked: invalid UTF-8 for a str-only engine."""

    reason: str = "invalid UTF-8 input; the engine takes str only (no bytes_input)"


NOT_APPLICABLE = NotApplicable()


def plain_ids(value: object) -> list[int]:
    """`value` as a list of ints, or `ContractError`: bools, floats and strings are not ids."""
    if not isinstance(value, (list, tuple)):
        raise ContractError(f"tokenize returned {type(value).__name__}, not a list of ints")
    if set(map(type, value)) <= {int}:  # the common case, checked at C speed (a bool's type is not int)
        return list(value)
    out = []
    for index, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, numbers.Integral):
            raise ContractError(f"tokenize returned {type(item).__name__} {item!r} at index {index}, not an int")
        out.append(int(item))
    return out


def output_bytes(value: object, what: str) -> bytes:
    """bytes as they are, str as UTF-8; anything else is a `ContractError`."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    raise ContractError(f"{what} returned {type(value).__name__}, not bytes or str")


def error_fields(exc: BaseException) -> dict:
    """`{"error", "traceback"}` of an exception, the traceback in full (report.json keeps it)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": text[-TRACEBACK_LIMIT:]}


def engine_input(caps: frozenset[str], data: bytes) -> bytes | str | NotApplicable:
    """What `tokenize` receives: the bytes, or for a str-only engine the text (or not applicable)."""
    if "bytes_input" in caps:
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_APPLICABLE


def evaluate_case(engine, caps: frozenset[str], case: dict) -> dict | NotApplicable:
    """`records.evaluate_case` from the offered capabilities; tokenize errors propagate.

    A failing detokenization does not hide the ids: the item gets
    `detokenize_error` instead of `detokenize`.
    """
    data = case_input(case)
    text = engine_input(caps, data)
    if isinstance(text, NotApplicable):
        return text
    encode: list[dict] = []
    for add_special, parse_special in FLAGS:
        ids = plain_ids(engine.tokenize(text, add_special=add_special, parse_special=parse_special))
        item: dict = {"add_special": add_special, "parse_special": parse_special, "ids": ids}
        if "detokenize" in caps:
            try:
                same = earlier_detokenize(encode, ids, data)
                item["detokenize"] = same if same is not None else detokenizations(engine, ids)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - an engine fault is a finding
                item["detokenize_error"] = error_fields(exc)
        encode.append(item)
    return {"id": case["id"], **output_field(data), "encode": encode}


def detokenizations(engine, ids: list[int]) -> list[dict]:
    return [{"remove_special": rs, "unparse_special": us,
             **output_field(output_bytes(engine.detokenize(ids, remove_special=rs, unparse_special=us),
                                         "detokenize"))}
            for rs, us in FLAGS]


# --- the vocabulary -----------------------------------------------------------------------------

def _opt_id(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ContractError(f"{name} is {type(value).__name__} {value!r}, not an int or None")
    return int(value)


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ContractError(f"{name} is {type(value).__name__} {value!r}, not a bool")
    return bool(value)


def engine_info(engine, caps: frozenset[str]) -> dict:
    """n_tokens, vocab_type, pre and the specials the engine offers, type-checked."""
    info: dict = {}
    if caps & set(VOCAB_FIELDS.values()):
        n = engine.n_tokens
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise ContractError(f"n_tokens is {n!r}, not a count")
        info["n_tokens"] = int(n)
    if "vocab_info" in caps:
        info["vocab_type"], info["pre"] = str(engine.vocab_type), str(engine.pre)
    if "specials" in caps:
        info["specials"] = {name: _opt_id(getattr(engine, name), name) for name in special_ids()}
        info.update({name: _flag(getattr(engine, name), name) for name in SPECIAL_FLAGS})
    return info


def offered_fields(caps: frozenset[str]) -> list[str]:
    return [field for field, capability in VOCAB_FIELDS.items() if capability in caps]


def _score(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ContractError(f"token_score returned {type(value).__name__} {value!r}, not a number")
    return float(value)


def _attr(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ContractError(f"token_attr returned {type(value).__name__} {value!r}, not an int")
    return int(value)


READERS = {
    "text": lambda e, t: output_bytes(e.token_text(t), "token_text"),
    "piece": lambda e, t: output_bytes(e.token_to_piece(t, special=False), "token_to_piece"),
    "piece_special": lambda e, t: output_bytes(e.token_to_piece(t, special=True), "token_to_piece"),
    "score": lambda e, t: _score(e.token_score(t)),
    "attr": lambda e, t: _attr(e.token_attr(t)),
    "eog": lambda e, t: _flag(e.is_eog(t), "is_eog"),
    "control": lambda e, t: _flag(e.is_control(t), "is_control"),
}


def vocab_columns(engine, fields: list[str], start: int, count: int) -> dict[str, list]:
    """The asked per-token fields for tokens start .. start+count-1, one list per field."""
    tokens = range(start, start + count)
    return {field: [READERS[field](engine, t) for t in tokens] for field in fields}


def vocab_record(engine, caps: frozenset[str]) -> dict:
    """The engine's (partial) vocabulary record, read in-process."""
    info = engine_info(engine, caps)
    fields = offered_fields(caps)
    columns = vocab_columns(engine, fields, 0, info["n_tokens"]) if fields else {}
    return vocab_from_columns(info, columns)


def vocab_from_columns(info: dict, columns: dict[str, list]) -> dict:
    """The record layout of `records.vocab_record`, holding only the fields present.

    The per-token digest mixes text and both pieces, so it is written only when
    all three are present; otherwise differences are pinned to their block.
    """
    record = {k: info[k] for k in ("n_tokens", "vocab_type", "pre", "add_bos", "add_eos", "add_sep", "specials")
              if k in info}
    if "eog" in columns:
        record["eog"] = [t for t, flag in enumerate(columns["eog"]) if flag]
    if "control" in columns:
        record["control"] = [t for t, flag in enumerate(columns["control"]) if flag]
    if "score" in columns:
        record["scores"] = pack_array(np.array(columns["score"], dtype="<f4"))
    if "attr" in columns:
        record["attrs"] = pack_array(np.array(columns["attr"], dtype="<i4"))
    names = [name for name in TOKEN_FIELDS if name in columns]
    if names:
        record.update(column_digests(lambda name, t: columns[name][t], names, info["n_tokens"]))
    return record


SCALARS = ("n_tokens", "vocab_type", "pre", "add_bos", "add_eos", "add_sep", "specials", "eog", "control")


def diff_offered(expected: dict, got: dict, *, limit: int = 50) -> list[dict]:
    """`records.diff_vocab` restricted to the fields the engine's record holds."""
    from ..golden.records import _diff_digests
    out = [{"field": k, "expected": expected.get(k), "got": got[k]}
           for k in SCALARS if k in got and expected.get(k) != got[k]]
    if "n_tokens" not in got or expected.get("n_tokens") != got["n_tokens"]:
        return out
    for field, dtype in (("scores", "<f4"), ("attrs", "<i4")):
        if field not in got:
            continue
        a, b = unpack_array(expected[field], dtype), unpack_array(got[field], dtype)
        for t in np.nonzero(a.view("<u4") != b.view("<u4"))[0][:limit]:
            out.append({"field": field[:-1], "token": int(t), "expected": a[t].item(), "got": b[t].item()})
    if "blocks" in got:
        mine = {**expected, "blocks": {k: v for k, v in expected["blocks"].items() if k in got["blocks"]}}
        theirs = got if "token_digest" in got else {**got, "token_digest": expected["token_digest"]}
        out += _diff_digests(mine, theirs, limit=limit)
    return out


def score_json(value: float) -> float | str:
    """A score as the protocol carries it: a number, or "NaN"/"Infinity"/"-Infinity"."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value
