"""A persistent, crash-isolated llama.cpp oracle for one vocabulary: one call per input.

The fuzzer asks llama.cpp about one input at a time (Hypothesis generates,
then shrinks, each example), so it needs a worker that stays up between
calls, yet survives llama.cpp aborting. `OracleSession(path)` keeps one
`harness.oracle.workers.Worker` (the same child process `record` and `drift` use). A
call that kills it (an abort, a signal) or outlives `timeout` is asked again
of a fresh worker: if that one dies or hangs too, the call raises
`OracleCrash` carrying the crash record; if it answers, the answer is
returned and the first death goes to `faults` as a harness fault (a worker
killed from outside is not llama.cpp's crash, so the fuzzer neither shrinks
nor saves it). A death whose stderr carries a known llama.cpp crash's own message (`known`,
harness/oracle/known_crashes.py) is llama.cpp's already: it is not asked again (each re-check
costs a worker load, about 0.5 s on a large vocabulary, and the fuzz meets such inputs often).

    with OracleSession(resolve("llama-spm"), timeout=30) as oracle:
        record = oracle.evaluate({"id": "x", "text": "Hello"})
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from .worker_limits import DEFAULT_TIMEOUT
from .workers import LoadFailure, Worker, describe, error_crash, fault_record, started

LOAD_GRACE = 30.0  # loading may take this much longer than one call

# Replies that JSON cannot carry as they are, turned back into Python values.
_DECODE: dict[str, Callable[[Any], Any]] = {"pieces": lambda hexes: [bytes.fromhex(h) for h in hexes],
                                             "pieces_of": lambda hexes: [bytes.fromhex(h) for h in hexes]}
Record = dict[str, Any]


class OracleCrash(RuntimeError):
    """llama.cpp died or hung on a request; `crash` is the worker's crash record."""

    def __init__(self, crash: Record) -> None:
        super().__init__(describe(crash))
        self.crash = crash

    def as_dict(self) -> Record:
        return self.crash


class OracleRefusal(RuntimeError):
    """llama.cpp (alive) refused a request, e.g. it cannot load the file; `crash` is an "error" record."""

    def __init__(self, crash: Record) -> None:
        super().__init__(crash["stderr"])
        self.crash = crash

    def as_dict(self) -> Record:
        return self.crash


class OracleSession:
    """One vocabulary in a long-lived llama.cpp worker process; see the module docstring."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT,
                 memory_limit: int | None = None, known: Callable[[Record], bool] | None = None) -> None:
        self.path = Path(path)
        self.known = known or (lambda crash: False)
        self.timeout = timeout
        self.memory_limit = memory_limit
        self.faults: list[Record] = []  # harness faults: deaths a fresh worker did not repeat
        self._worker: Worker | None = None

    def __enter__(self) -> OracleSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> Worker:
        try:
            self._worker = started(self.path, load_timeout=self.timeout + LOAD_GRACE,
                                   memory_limit=self.memory_limit, faults=self.faults)
        except LoadFailure as failure:
            if failure.crash is None:
                raise OracleRefusal(error_crash(failure.message, None)) from None
            raise OracleCrash(failure.crash) from None
        return self._worker

    def call(self, op: str, *args: Any) -> Any:
        """Run `op` in the worker; `OracleCrash` if it dies or hangs twice, `OracleRefusal` if it refuses."""
        result, crash = self._ask(op, args)
        if crash is not None and crash["kind"] != "error" and not self.known(crash):
            # llama.cpp's only if a fresh worker agrees
            first = crash
            result, crash = self._ask(op, args)
            if crash is None:
                case = args[0] if args and isinstance(args[0], dict) else {}
                self.faults.append(fault_record(str(case.get("id", f"<{op}>")), op, first))
        if crash is None:
            return _DECODE.get(op, lambda value: value)(result)
        if crash["kind"] == "error":
            raise OracleRefusal(crash)
        raise OracleCrash(crash)

    def _ask(self, op: str, args: tuple[Any, ...]) -> tuple[object, Record | None]:
        """One request; a worker that died or hung on it is closed, so the next starts fresh."""
        worker = self._worker or self._start()
        result, crash = worker.ask(op, *args, timeout=self.timeout)
        if crash is not None and crash["kind"] != "error":
            self.close()
        return result, crash

    def evaluate(self, case: Record) -> Record:
        return cast(Record, self.call("evaluate", case))

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
        self._worker = None
