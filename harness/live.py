"""A persistent, crash-isolated llama.cpp oracle for one vocabulary: one call per input.

The fuzzer asks llama.cpp about one input at a time (Hypothesis generates,
then shrinks, each example), so it needs a worker that stays up between
calls, yet survives llama.cpp aborting. `OracleSession(path)` runs
`LlamaOracle` in a child process; a call that kills the child (an abort, a
signal) or outlives `timeout` raises `OracleCrash` naming the signal or exit
status and the tail of llama.cpp's stderr, and the next call starts a fresh
child.

    with OracleSession(resolve("llama-spm"), timeout=30) as oracle:
        record = oracle.evaluate({"id": "x", "text": "Hello"})
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
from pathlib import Path

STDERR_TAIL = 2000


class OracleCrash(RuntimeError):
    """llama.cpp died or hung on a request; `reason` is the signal/exit status/timeout."""

    def __init__(self, reason: str, stderr: str = "") -> None:
        super().__init__(f"{reason}: {stderr.strip().splitlines()[-1]}" if stderr.strip() else reason)
        self.reason = reason
        self.stderr = stderr

    def as_dict(self) -> dict:
        return {"reason": self.reason, "stderr": self.stderr[-STDERR_TAIL:]}


def _pieces(oracle, special: bool) -> list[bytes]:
    return [oracle.token_to_piece(t, special=special) for t in range(oracle.n_tokens)]


def _ops():
    """Requests the child answers, by name (imported in the child only)."""
    from .evaluate import evaluate_case, vocab_record
    return {
        "evaluate": evaluate_case,
        "vocab": vocab_record,
        "pieces": lambda oracle: _pieces(oracle, True),
        "attrs": lambda oracle: [oracle.token_attr(t) for t in range(oracle.n_tokens)],
        "ping": lambda oracle: oracle.n_tokens,
    }


def _serve(path: str, conn, stderr_path: str) -> None:
    """Child main loop: load the vocabulary, then answer (op, args) until the pipe closes."""
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.environ.setdefault("GGML_NO_BACKTRACE", "1")  # no gdb attach on abort: fast, quiet restarts
    from .oracle import LlamaOracle
    ops = _ops()
    try:
        oracle = LlamaOracle(path)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ok", None))
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            return
        try:
            conn.send(("ok", ops[op](oracle, *args)))
        except Exception as exc:  # noqa: BLE001
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class OracleError(RuntimeError):
    """llama.cpp (alive) refused a request, e.g. it cannot load the file."""


class OracleSession:
    """One vocabulary in a long-lived llama.cpp child process; see the module docstring."""

    def __init__(self, path: str | os.PathLike, *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.restarts = 0
        self._proc = None
        self._conn = None
        self._stderr = tempfile.NamedTemporaryFile(prefix="oracle-", suffix=".err", delete=False)
        self._stderr.close()

    def __enter__(self) -> OracleSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(str(self.path), child, self._stderr.name),
                                 daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self._receive(self.timeout + 30)  # the load itself may abort

    def _receive(self, timeout: float):
        try:
            ready = self._conn.poll(timeout)
            status, value = self._conn.recv() if ready else (None, None)
        except (EOFError, OSError):
            ready, status, value = True, None, None
        if status is None:
            raise self._crashed(timed_out=not ready)
        if status == "error":
            raise OracleError(value)
        return value

    def _crashed(self, *, timed_out: bool) -> OracleCrash:
        proc = self._proc
        if timed_out and proc.is_alive():
            proc.kill()
        proc.join(5)
        code = proc.exitcode
        self._proc = self._conn = None
        self.restarts += 1
        if timed_out:
            reason = f"timeout after {self.timeout:g}s"
        elif code is not None and code < 0:
            reason = f"killed by {signal.Signals(-code).name}"
        else:
            reason = f"exit status {code}"
        return OracleCrash(reason, self._stderr_tail())

    def _stderr_tail(self) -> str:
        try:
            return Path(self._stderr.name).read_bytes()[-STDERR_TAIL:].decode("utf-8", "replace")
        except OSError:
            return ""

    def call(self, op: str, *args):
        """Run `op` in the child; `OracleCrash` if the child dies or hangs, `OracleError` if it refuses."""
        if self._proc is None:
            self._start()
        try:
            self._conn.send((op, args))
        except (BrokenPipeError, OSError):
            raise self._crashed(timed_out=False) from None
        return self._receive(self.timeout)

    def evaluate(self, case: dict) -> dict:
        return self.call("evaluate", case)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            self._proc.join(2)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(2)
        self._proc = self._conn = None
        try:
            os.unlink(self._stderr.name)
        except OSError:
            pass
