"""The engine under test behind one guarded interface, in-process or in a child process.

The comparators never call an engine directly. They hold an engine *handle*
with four operations, each of which turns every engine fault into a value:

- `evaluate_many(cases)` / `evaluate_one(case)`: a record as
  `harness.golden.records.evaluate_case` gives, a `records.EngineError`, or
  `engine_records.NOT_APPLICABLE` (invalid UTF-8 for a str-only engine);
- `vocab()`: the engine's vocabulary record from what it offers, or an `EngineError`;
- `token_text` / `token_attr` / `token_to_piece` / `n_tokens`: display only;
- `close()`.

`InProcessEngine` runs our own engine in this process: it is the fast path
and is tested to 0 mismatches. Every other engine runs in a child process
(`harness.subjects.client.RemoteEngine`), where a hang, a crash or `sys.exit()`
is contained and becomes an engine error for one case.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .capabilities import CapabilityError, detect, probe_bytes
from .records import (
    ContractError,
    EngineError,
    NotApplicable,
    error_fields,
    evaluate_case,
    output_bytes,
    vocab_record,
)


class EngineLoadError(Exception):
    """The engine could not be made for a file; the message reads "Type: reason" like an exception line."""


def engine_error(exc: BaseException, capability: str = "tokenize") -> EngineError:
    fields = error_fields(exc)
    return EngineError(fields["error"], fields["traceback"], capability)


def checked_engine(engine: object, source: str) -> tuple[object, frozenset[str]]:
    """The engine and its capabilities, or `EngineLoadError` saying why it cannot be used."""
    if engine is None:
        raise EngineLoadError(f"EngineLoadError: the engine factory {source} returned None, not an engine")
    try:
        caps = detect(engine)
    except CapabilityError as exc:
        raise EngineLoadError(f"EngineLoadError: {source}: {exc}") from None
    if getattr(engine, "capabilities", None) is None and probe_bytes(engine):
        caps |= {"bytes_input"}
    return engine, caps


class InProcessEngine:
    """An engine object called in this process, each call guarded and type-checked."""

    def __init__(self, engine: object, caps: frozenset[str]) -> None:
        self.engine, self.caps = engine, caps

    @classmethod
    def load(cls, factory: Callable[..., object], path: Path, source: str, args: dict[str, str]) -> InProcessEngine:
        engine = factory(path, **args)
        return cls(*checked_engine(engine, source))

    def evaluate_one(self, case: dict) -> dict | EngineError | NotApplicable:
        try:
            return evaluate_case(self.engine, self.caps, case)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - an engine fault is a finding, not ours
            return engine_error(exc)

    def evaluate_many(self, cases: list[dict]) -> list[dict | EngineError | NotApplicable]:
        return [self.evaluate_one(case) for case in cases]

    def vocab(self) -> dict | EngineError:
        try:
            return vocab_record(self.engine, self.caps)
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            return engine_error(exc, "vocabulary")

    @property
    def n_tokens(self) -> int:
        return int(self.engine.n_tokens)  # type: ignore[attr-defined]

    def token_text(self, token: int) -> bytes:
        return output_bytes(self.engine.token_text(token), "token_text")  # type: ignore[attr-defined]

    def token_attr(self, token: int) -> int:
        return int(self.engine.token_attr(token))  # type: ignore[attr-defined]

    def token_to_piece(self, token: int, *, special: bool) -> bytes:
        return output_bytes(self.engine.token_to_piece(token, special=special), "token_to_piece")  # type: ignore[attr-defined]

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if callable(close):
            try:
                close()
            except (Exception, SystemExit):  # noqa: BLE001 - closing is best effort
                pass


__all__ = ["ContractError", "EngineLoadError", "InProcessEngine", "checked_engine", "engine_error"]
