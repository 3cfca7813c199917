"""The columns of `python -m harness tokenize`: one text through llama.cpp, ours, and any engine or original.

Each `Column` holds one side's ids for the flags asked, the piece of each id (its bytes, as that side
spells it), how long the side took (its load included) or the one line that says why it failed.
llama.cpp runs in a crash-isolated worker (`harness.oracle.session`); ours and `--engine` through
the same engine handles `run` uses; `--reference` through the original tokenizer's child. A side
that crashes, hangs or refuses the file is a failed column, not a failed command.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..compare.diff import visible
from ..golden.records import output_field
from ..models.model import open_model
from ..oracle.session import OracleCrash, OracleRefusal, OracleSession
from ..subjects.records import EngineError
from ..subjects.spec import describe, parse_engine_args
from .engine import load_engine

PIECE_WIDTH = 24   # characters of a piece shown in the table


@dataclass
class Column:
    """One side's answer: ids, their pieces, seconds (load included), or the error that stopped it."""

    name: str
    ids: list[int] = field(default_factory=list)
    pieces: list[bytes] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "ids": self.ids, "pieces_hex": [p.hex() for p in self.pieces],
                "seconds": round(self.seconds, 3), "error": self.error}


def columns_for(args: Any, data: bytes) -> list[Column]:
    """llama.cpp's column first, then ours, then --engine's and --reference's when given."""
    model = open_model(args.model)
    case = {"id": "tokenize", **output_field(data)}
    flags = (args.add_special, args.parse_special)
    sides: list[tuple[str, str | None, dict[str, str]]] = [("ours", None, {})]
    if args.engine:
        sides.append((describe(args.engine), args.engine, parse_engine_args(args.engine_arg)))
    if args.reference:
        sides.append((args.reference, args.reference, {}))
    with ThreadPoolExecutor(max_workers=1) as pool:  # llama.cpp's worker loads while the others run
        llama = pool.submit(_timed, "llama.cpp", lambda: _llama(model.path, case, flags, args.timeout))
        others = [_timed(name, partial(_engine, spec, engine_args, model.path, case, flags, args.timeout))
                  for name, spec, engine_args in sides]
        return [llama.result(), *others]


def _timed(name: str, work: Callable[[], tuple[list[int], list[bytes]]]) -> Column:
    started = time.perf_counter()
    column = Column(name)
    try:
        column.ids, column.pieces = work()
    except _Failed as exc:
        column.error = str(exc)
    column.seconds = time.perf_counter() - started
    return column


class _Failed(Exception):
    """A side could not answer: its one line."""


def _pick(record: dict, flags: tuple[bool, bool]) -> list[int]:
    for item in record.get("encode", []):
        if (item.get("add_special"), item.get("parse_special")) == flags:
            return [int(t) for t in item["ids"]]
    raise _Failed(f"no answer for add_special={flags[0]} parse_special={flags[1]}")


def _llama(path, case: dict, flags: tuple[bool, bool], timeout: float) -> tuple[list[int], list[bytes]]:
    try:
        with OracleSession(path, timeout=timeout) as session:
            ids = _pick(session.evaluate(case), flags)
            pieces = session.call("pieces_of", ids)
    except (OracleCrash, OracleRefusal) as exc:
        raise _Failed(f"llama.cpp: {str(exc).strip().splitlines()[-1] if str(exc).strip() else exc}") from None
    return ids, pieces


def _engine(spec: str | None, engine_args: dict, path, case: dict, flags: tuple[bool, bool],
            timeout: float) -> tuple[list[int], list[bytes]]:
    engine = load_engine(spec, args=engine_args, timeout=timeout)(path)
    if isinstance(engine, EngineError):
        raise _Failed(engine.error)
    try:
        record = engine.evaluate_one(case)
        if isinstance(record, EngineError):
            raise _Failed(record.error.strip().splitlines()[0] if record.error.strip() else "engine error")
        if not isinstance(record, dict):
            raise _Failed("the engine cannot take this input (not applicable)")
        ids = _pick(record, flags)
        return ids, [_piece(engine, t) for t in ids]
    finally:
        engine.close()


def _piece(engine, token: int) -> bytes:
    try:
        return bytes(engine.token_to_piece(token, special=True))
    except Exception:  # noqa: BLE001 - display only: the ids are what is compared
        return b""


def first_difference(columns: Sequence[Column]) -> int | None:
    """The first token index where a column's ids part from llama.cpp's (None when all agree)."""
    reference = columns[0].ids
    found = []
    for column in columns[1:]:
        if column.error is not None:
            continue
        n = next((i for i, (a, b) in enumerate(zip(reference, column.ids)) if a != b), None)
        if n is None and len(reference) != len(column.ids):
            n = min(len(reference), len(column.ids))
        if n is not None:
            found.append(n)
    return min(found, default=None)


def table(columns: Sequence[Column]) -> str:
    """The columns as a table: a row per token index, each cell `id piece`, the first difference marked."""
    widths = [max(len(c.name), 8 + PIECE_WIDTH) for c in columns]
    lines = ["      " + "  ".join(c.name.ljust(w) for c, w in zip(columns, widths, strict=True))]
    first = first_difference(columns)
    rows = max((len(c.ids) for c in columns), default=0)
    for index in range(rows):
        cells = [_cell(c, index).ljust(w) for c, w in zip(columns, widths, strict=True)]
        mark = "  <<" if index == first else ""
        lines.append(f"{index:>5} " + "  ".join(cells) + mark)
    for column in columns:
        lines.append(f"{column.name}: " + (f"failed: {column.error}" if column.error is not None else
                                          f"{len(column.ids)} tokens in {column.seconds:.2f} s"))
    return "\n".join(lines)


def _cell(column: Column, index: int) -> str:
    if column.error is not None or index >= len(column.ids):
        return ""
    piece = column.pieces[index] if index < len(column.pieces) else b""
    shown = visible(piece)
    if len(shown) > PIECE_WIDTH:
        shown = shown[:PIECE_WIDTH - 1] + "…"
    return f"{column.ids[index]:>7} {shown}"
