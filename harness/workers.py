"""Crash isolation: llama.cpp runs in worker processes, so an abort becomes a finding.

llama.cpp aborts (GGML_ASSERT, an uncaught C++ exception) or could hang on some
inputs.  Every oracle call here runs in a subprocess (`python -m
harness.workers --serve MODEL`) that loads the model once and answers
JSON-line requests.  When a worker dies or passes its timeout the case becomes
an **oracle-crash record**, the worker is restarted and the run goes on:

    {"id": ..., "text"|"bytes": ..., "crash": {"kind": "signal", "signal": "SIGABRT",
     "exit": -6, "stderr": "llama-vocab.cpp:4183: GGML_ASSERT(...) failed",
     "call": "tokenize(add_special=False, parse_special=False)"}}

`kind` is "signal" (killed by a signal), "exit" (exited), "timeout" (killed
after `timeout` seconds) or "error" (llama-cpp-python raised; the message is
in `stderr`).  `stderr` keeps only llama.cpp's assert/abort/exception lines
with build paths cut to file names, so a crash record is deterministic.

API: `run_cases(model, cases, *, jobs, timeout, progress)` and
`inspect_model(model)` for batches; `Worker.ask(op,
*args, timeout=...)` for one request at a time (`harness.oracle_session.OracleSession`
wraps it).  A model llama.cpp refuses to load raises `LoadFailure` (with
`.crash` set when loading itself crashed).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

DEFAULT_TIMEOUT = 60.0
LOAD_TIMEOUT = 300.0
VOCAB_TIMEOUT = 900.0
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Lines of a dying worker's stderr worth keeping; everything else (backtraces) varies.
_KEEP = re.compile(r"GGML_ASSERT|GGML_ABORT|terminate called|what\(\)|error|Error|fatal")
_PATH = re.compile(r"(?:[^\s:]*/)([^/\s:]+\.(?:cpp|cc|c|h|hpp|gguf))")

Progress = Callable[[int, int, str], None]


class LoadFailure(RuntimeError):
    """llama.cpp could not load the model: `.message`, and `.crash` if loading crashed."""

    def __init__(self, message: str, crash: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.crash = crash


# -- the parent side --------------------------------------------------------------

class Worker:
    """One `--serve` subprocess, its stderr in a temporary file, its replies in a queue."""

    def __init__(self, model: str | os.PathLike, *, verbose: bool = False,
                 load_timeout: float = LOAD_TIMEOUT) -> None:
        self.model = Path(model)
        self.load_timeout = load_timeout
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker; close() closes it
        path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, GGML_NO_BACKTRACE="1", PYTHONPATH=path)
        argv = [sys.executable, "-m", "harness.workers", "--serve", str(self.model)]
        self.verbose = verbose
        if verbose:
            argv.append("--verbose")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=env, cwd=PROJECT_ROOT)
        self._buffer = b""
        self.messages: deque[dict] = deque()
        self.eof = False
        self.task: tuple[int, dict] | None = None
        self.deadline = time.monotonic() + load_timeout
        self.step: str | None = None
        self._stderr_at = 0

    def start(self) -> None:
        """Wait for the model to load; raise `LoadFailure` if it does not."""
        message = self.wait(self.deadline)
        self.forward_stderr()
        if message is not None and "ready" in message:
            return
        if message is not None and "load_error" in message:
            self.close()
            raise LoadFailure(message["load_error"])
        crash = self.crash_record(timeout=self.load_timeout)
        self.close()
        raise LoadFailure(f"loading {self.model.name} crashed: {describe(crash)}", crash)

    def send(self, op: str, *args, timeout: float) -> None:
        """Start request `op(*args)`; its reply (or the worker's death) comes from `outcome`."""
        request = {"op": op, "args": list(args)}
        self._stderr_at = self._stderr.seek(0, os.SEEK_END)
        self.step = None
        self.deadline = time.monotonic() + timeout
        try:
            _pipe(self.proc.stdin).write((json.dumps(request) + "\n").encode())
            _pipe(self.proc.stdin).flush()
        except OSError:  # died since its last answer: the caller sees eof and records why
            self.eof = True

    @property
    def fd(self) -> int:
        return _pipe(self.proc.stdout).fileno()

    def pump(self, timeout: float = 0.0) -> None:
        """Read what the worker has sent, waiting up to `timeout` for the first bytes."""
        if self.eof or not select.select([self.fd], [], [], max(timeout, 0.0))[0]:
            return
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.eof = True
            return
        *lines, self._buffer = (self._buffer + chunk).split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "step" in message:
                self.step = message["step"]
            else:
                self.messages.append(message)

    def wait(self, deadline: float) -> dict | None:
        """The next reply, or None if the worker died (`eof`) or the deadline passed."""
        while not self.messages and not self.eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.pump(remaining)
        return self.messages.popleft() if self.messages else None

    def outcome(self, *, timeout: float, block: bool = True) -> tuple[object, dict | None] | None:
        """(result, None) or (None, crash record) for the request in flight.

        An "error" record if the request raised (the worker lives on), else why
        the worker died or hung.  None while it still runs (only if not `block`).
        """
        message = self.wait(self.deadline) if block or self.messages else None
        if message is None and not self.eof and time.monotonic() < self.deadline:
            return None
        self.forward_stderr()
        if message is None:
            return None, self.crash_record(timeout=timeout)
        if "error" in message:
            return None, error_crash(message["error"], self.step)
        return message["result"], None

    def ask(self, op: str, *args, timeout: float) -> tuple[object, dict | None]:
        """`op(*args)` in the worker, waited for: (result, None) or (None, crash record)."""
        self.send(op, *args, timeout=timeout)
        found = self.outcome(timeout=timeout)
        assert found is not None  # a blocking wait always ends with an answer or a crash
        return found

    def crash_record(self, *, timeout: float) -> dict:
        """Why the worker stopped answering: a signal, an exit status or a timeout; its stderr."""
        timed_out = not self.eof
        if timed_out:
            self.kill()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        kind = "timeout" if timed_out else ("signal" if code < 0 else "exit")
        record: dict[str, Any] = {"kind": kind, "signal": _signal_name(code), "exit": code,
                  "stderr": self._stderr_tail(), "call": self.step}
        if timed_out:
            record["timeout"] = float(timeout)
        return record

    def _stderr_tail(self) -> str:
        self._stderr.seek(self._stderr_at)
        return clean_stderr(self._stderr.read().decode("utf-8", "replace"))

    def forward_stderr(self) -> None:
        """With --verbose, pass what the worker logged since the last request on to our stderr."""
        if self.verbose:
            self._stderr.seek(self._stderr_at)
            sys.stderr.write(self._stderr.read().decode("utf-8", "replace"))
            sys.stderr.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        """Stop the worker (EOF on its stdin, then kill if it lingers)."""
        if self.proc.poll() is None:
            try:
                _pipe(self.proc.stdin).close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self._stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    """The worker's stdin or stdout: pipes, so never None once the process started."""
    assert stream is not None
    return stream


def _signal_name(code: int) -> str | None:
    if code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"SIG{-code}"


def clean_stderr(text: str) -> str:
    """The deterministic part of a crash's stderr: assert/abort/exception lines, paths cut."""
    lines = [_PATH.sub(r"\1", line.strip()) for line in text.splitlines() if _KEEP.search(line)]
    if not lines:
        lines = [line.strip() for line in text.splitlines() if line.strip()][-3:]
    return "\n".join(lines)[:2000]


def describe(crash: dict) -> str:
    """One line for a crash record: kind, signal or exit status, stderr."""
    what = crash["signal"] or f"exit {crash['exit']}"
    return f"{crash['kind']} {what}" + (f": {crash['stderr']}" if crash["stderr"] else "")


def crash_case(case: dict, crash: dict) -> dict:
    """An oracle-crash record for `case`."""
    return {**{k: case[k] for k in ("id", "text", "bytes") if k in case}, "crash": crash}


def error_crash(message: str, call: str | None) -> dict:
    """The crash record of a Python-level error inside the worker (the worker survives)."""
    return {"kind": "error", "signal": None, "exit": None, "stderr": message, "call": call}


def run_cases(model: str | os.PathLike, cases: list[dict], *, jobs: int = 1,
              timeout: float = DEFAULT_TIMEOUT, progress: Progress | None = None,
              verbose: bool = False) -> list[dict]:
    """`evaluate_case` on llama.cpp for every case, in `jobs` workers; results in case order.

    A case whose worker dies or hangs past `timeout` seconds becomes a crash
    record (see the module docstring); its worker is replaced and the run
    continues.  `progress(done, total, case_id)` is called after each case.
    """
    if not cases:
        return []
    results: list[dict[str, Any]] = [{} for _ in cases]
    pending = deque(enumerate(cases))
    workers = [started(model, verbose=verbose) for _ in range(max(1, min(jobs, len(cases))))]
    done = 0
    try:
        while pending or any(w.task for w in workers):
            for w in workers:
                if w.task is None and pending:
                    w.task = pending.popleft()
                    w.send("evaluate", w.task[1], timeout=timeout)
            _await_any([w for w in workers if w.task])
            for i, w in enumerate(workers):
                task, outcome = w.task, (w.outcome(timeout=timeout, block=False) if w.task else None)
                if task is None or outcome is None:
                    continue
                (index, case), (result, crash) = task, outcome
                results[index] = crash_case(case, crash) if crash is not None else cast(dict[str, Any], result)
                w.task = None
                if crash is not None and crash["kind"] != "error":
                    w.close()
                    workers[i] = started(model, verbose=verbose)
                done += 1
                if progress:
                    progress(done, len(cases), case["id"])
    finally:
        for w in workers:
            w.close()
    return results


def started(model, *, verbose: bool = False, load_timeout: float = LOAD_TIMEOUT) -> Worker:
    """A `Worker` with `model` loaded; `LoadFailure` if llama.cpp refuses or crashes."""
    worker = Worker(model, verbose=verbose, load_timeout=load_timeout)
    worker.start()
    return worker


def _await_any(busy: list[Worker]) -> None:
    """Block until a busy worker has news or the earliest deadline passes; read what came."""
    if not any(w.messages or w.eof for w in busy):
        wait = min(w.deadline for w in busy) - time.monotonic()
        select.select([w.fd for w in busy], [], [], max(wait, 0.0))
    for w in busy:
        w.pump(0.0)


def inspect_model(model: str | os.PathLike, *, timeout: float = VOCAB_TIMEOUT,
                  verbose: bool = False) -> dict:
    """`{"llama", "tokenizer", "vocab"}` from llama.cpp, in a worker.

    Raises `LoadFailure` if the model does not load; a crash or hang while
    reading the vocabulary gives `{"vocab": None, "vocab_crash": {...}}`.
    """
    worker = started(model, verbose=verbose)
    try:
        result, crash = worker.ask("inspect", timeout=timeout)
        if crash is None:
            return cast(dict[str, Any], result)
        return {"llama": None, "tokenizer": None, "vocab": None, "vocab_crash": crash}
    finally:
        worker.close()


# -- the worker side ------------------------------------------------------------

class _Tracer:
    """Wraps the oracle so each llama.cpp call is announced before it runs."""

    def __init__(self, oracle, send) -> None:
        self._oracle, self._send = oracle, send

    def __getattr__(self, name):
        return getattr(self._oracle, name)

    def tokenize(self, text, *, add_special, parse_special):
        self._send({"step": f"tokenize(add_special={add_special}, parse_special={parse_special})"})
        return self._oracle.tokenize(text, add_special=add_special, parse_special=parse_special)

    def detokenize(self, ids, *, remove_special, unparse_special):
        self._send({"step": f"detokenize(remove_special={remove_special}, "
                            f"unparse_special={unparse_special})"})
        return self._oracle.detokenize(ids, remove_special=remove_special, unparse_special=unparse_special)


def _inspect(oracle) -> dict:
    from .records import vocab_record

    keys = ("general.architecture", "tokenizer.ggml.model", "tokenizer.ggml.pre")
    tokenizer = {"meta": {k: oracle.meta(k) for k in keys}, **oracle.internals()}
    return {"llama": dict(oracle.build_info), "tokenizer": tokenizer, "vocab": vocab_record(oracle)}


def _ops() -> dict[str, Callable]:
    """The requests a worker answers, by name: `op(oracle, traced_oracle, *args)`, JSON-ready."""
    from .records import evaluate_case, vocab_record

    return {
        "evaluate": lambda oracle, traced, case: evaluate_case(traced, case),
        "inspect": lambda oracle, traced: _inspect(oracle),
        "vocab": lambda oracle, traced: vocab_record(oracle),
        "pieces": lambda oracle, traced: [oracle.token_to_piece(t, special=True).hex()
                                          for t in range(oracle.n_tokens)],
        "attrs": lambda oracle, traced: [oracle.token_attr(t) for t in range(oracle.n_tokens)],
        "ping": lambda oracle, traced: oracle.n_tokens,
    }


def serve(model: str, *, verbose: bool = False) -> int:
    """Worker main loop: load `model`, then answer JSON-line requests on stdin."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # anything C prints to stdout must not corrupt the protocol

    def send(message: dict) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    from .oracle import LlamaOracle, OracleError

    try:
        oracle = LlamaOracle(model, verbose=verbose)
    except OracleError as exc:  # the path is cut to the file name so goldens do not depend on it
        send({"load_error": str(exc).replace(str(Path(model).parent) + os.sep, "")})
        return 0
    send({"ready": True})
    traced, ops = _Tracer(oracle, send), _ops()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = ops[request["op"]](oracle, traced, *request["args"])
        except Exception as exc:  # noqa: BLE001 - reported per case; the worker lives on
            send({"error": f"{type(exc).__name__}: {exc}"})
            continue
        send({"result": result})
    oracle.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.workers",
                                     description="An oracle worker (started by harness.workers).")
    parser.add_argument("--serve", required=True, metavar="MODEL")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    return serve(args.serve, verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
