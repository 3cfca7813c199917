"""A persistent, crash-isolated llama.cpp oracle for one vocabulary: one call per input.

The fuzzer asks llama.cpp about one input at a time (Hypothesis generates,
then shrinks, each example), so it needs a worker that stays up between
calls, yet survives llama.cpp aborting. `OracleSession(path)` keeps one
`harness.workers.Worker` (the same child process `record` and `drift` use); a
call that kills it (an abort, a signal) or outlives `timeout` raises
`OracleCrash` carrying the worker's crash record, and the next call starts a
fresh worker.

    with OracleSession(resolve("llama-spm"), timeout=30) as oracle:
        record = oracle.evaluate({"id": "x", "text": "Hello"})
"""

from __future__ import annotations

import os
from pathlib import Path

from .workers import LoadFailure, Worker, describe, error_crash, started

LOAD_GRACE = 30.0  # loading may take this much longer than one call

# Replies that JSON cannot carry as they are, turned back into Python values.
_DECODE = {"pieces": lambda hexes: [bytes.fromhex(h) for h in hexes]}


class OracleCrash(RuntimeError):
    """llama.cpp died or hung on a request; `crash` is the worker's crash record."""

    def __init__(self, crash: dict) -> None:
        super().__init__(describe(crash))
        self.crash = crash

    def as_dict(self) -> dict:
        return self.crash


class OracleRefusal(RuntimeError):
    """llama.cpp (alive) refused a request, e.g. it cannot load the file; `crash` is an "error" record."""

    def __init__(self, crash: dict) -> None:
        super().__init__(crash["stderr"])
        self.crash = crash

    def as_dict(self) -> dict:
        return self.crash


class OracleSession:
    """One vocabulary in a long-lived llama.cpp worker process; see the module docstring."""

    def __init__(self, path: str | os.PathLike, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._worker: Worker | None = None

    def __enter__(self) -> OracleSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> Worker:
        try:
            self._worker = started(self.path, load_timeout=self.timeout + LOAD_GRACE)
        except LoadFailure as failure:
            if failure.crash is None:
                raise OracleRefusal(error_crash(failure.message, None)) from None
            raise OracleCrash(failure.crash) from None
        return self._worker

    def call(self, op: str, *args):
        """Run `op` in the worker; `OracleCrash` if it dies or hangs, `OracleRefusal` if it refuses."""
        worker = self._worker or self._start()
        result, crash = worker.ask(op, *args, timeout=self.timeout)
        if crash is None:
            return _DECODE.get(op, lambda value: value)(result)
        if crash["kind"] == "error":
            raise OracleRefusal(crash)
        self.close()
        raise OracleCrash(crash)

    def evaluate(self, case: dict) -> dict:
        return self.call("evaluate", case)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
        self._worker = None
