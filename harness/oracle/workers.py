"""Crash isolation, the parent side: llama.cpp runs in worker processes, so an abort becomes a finding.

llama.cpp aborts (GGML_ASSERT, an uncaught C++ exception) or could hang on some
inputs.  Every oracle call here runs in a subprocess (`python -m
harness.oracle.worker_child --serve MODEL`, the child side) that loads the model
once and answers JSON-line requests.  When a worker dies or passes its timeout the case becomes
an **oracle-crash record**, the worker is restarted and the run goes on:

    {"id": ..., "text"|"bytes": ..., "crash": {"kind": "signal", "signal": "SIGABRT",
     "exit": -6, "stderr": "llama-vocab.cpp:4183: GGML_ASSERT(...) failed",
     "call": "tokenize(add_special=False, parse_special=False)"}}

`kind` is "signal" (killed by a signal), "exit" (exited), "timeout" (killed
after `timeout` seconds) or "error" (llama-cpp-python raised; the message is
in `stderr`).  `stderr` keeps only llama.cpp's assert/abort/exception lines
with build paths cut to file names, so a crash record is deterministic.

Blame: a worker that dies or hangs is blamed on llama.cpp only when the same
request, re-run in a fresh worker, dies or hangs again.  When the fresh worker
answers, the first death was the harness's (a worker killed from outside, the
machine out of memory, a stall on a loaded machine): the answer is kept, and
a *harness fault* record `{"case_id", "op", "crash", "reason"}` goes to the
caller's `faults` list instead of a crash into a golden or a found corpus.

Bounds: each worker caps its own address space (`memory_limit` bytes,
RLIMIT_AS; `harness.oracle.worker_limits`), so a llama.cpp loop that allocates without end
(std::bad_alloc, SIGABRT) becomes a crash record, not a machine out of memory;
and it kills itself when its parent process dies (a watchdog thread that sees
the parent go), so no worker outlives a SIGKILLed run. Each worker runs in a
session of its own (`harness.contained`): its death is seen at once, and a
kill, restart or close SIGKILLs its whole process group and reaps it.

API: `run_cases(model, cases, *, jobs, timeout, progress)` and
`inspect_model(model)` for batches; `Worker.ask(op,
*args, timeout=...)` for one request at a time (`harness.oracle.session.OracleSession`
wraps it).  A model llama.cpp refuses to load raises `LoadFailure` (with
`.crash` set when loading itself crashed).
"""

from __future__ import annotations

import json
import os
import re
import select
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from ..contained import POLL_SLICE, Contained, signal_name
from ..environment import default_memory
from ..errors import SetupError
from .worker_limits import DEFAULT_TIMEOUT

LOAD_TIMEOUT = 300.0
VOCAB_TIMEOUT = 900.0
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Lines of a dying worker's stderr worth keeping; everything else (backtraces) varies.
_KEEP = re.compile(r"GGML_ASSERT|GGML_ABORT|terminate called|what\(\)|error|Error|fatal")
_PATH = re.compile(r"(?:[^\s:]*/)([^/\s:]+\.(?:cpp|cc|c|h|hpp|gguf))")

Progress = Callable[[int, int, str], None]
Faults = list[dict[str, object]]


class LoadFailure(RuntimeError):
    """llama.cpp could not load the model: `.message`, and `.crash` if loading crashed."""

    def __init__(self, message: str, crash: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.crash = crash


class Worker:
    """One `--serve` subprocess, its stderr in a temporary file, its replies in a queue."""

    def __init__(self, model: str | os.PathLike, *, verbose: bool = False,
                 load_timeout: float = LOAD_TIMEOUT, memory_limit: int | None = None) -> None:
        self.model = Path(model)
        self.load_timeout = load_timeout
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker; close() closes it
        path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, GGML_NO_BACKTRACE="1", PYTHONPATH=path)
        argv = [sys.executable, "-m", "harness.oracle.worker_child", "--serve", str(self.model),
                "--memory-limit", str(memory_limit or default_memory()), "--parent", str(os.getpid())]
        self.verbose = verbose
        if verbose:
            argv.append("--verbose")
        # a session of its own (harness.contained): its exit is seen at once, and killing it kills its group
        self.child = Contained(argv, env=env, cwd=PROJECT_ROOT, stderr=self._stderr)
        self.proc = self.child.proc
        self._buffer = b""
        self.messages: deque[dict] = deque()
        self.eof = False
        self.task: tuple[int, dict[str, Any], dict[str, Any] | None] | None = None
        self.deadline = time.monotonic() + load_timeout
        self.step: str | None = None
        self._stderr_at = 0

    def start(self) -> None:
        """Wait for the model to load; `LoadFailure` if it does not, `SetupError` if the worker cannot run."""
        message = self.wait(self.deadline)
        self.forward_stderr()
        if message is not None and "ready" in message:
            return
        if message is not None and "load_error" in message:
            self.close()
            raise LoadFailure(message["load_error"])
        if message is not None and "setup_error" in message:
            self.close()
            raise SetupError(message["setup_error"])
        crash = self.crash_record(timeout=self.load_timeout)
        self.close()
        raise LoadFailure(f"loading {self.model.name} crashed: {describe(crash)}", crash)

    def send(self, op: str, *args, timeout: float) -> None:
        """Start request `op(*args)`; its reply (or the worker's death) comes from `outcome`."""
        request = {"op": op, "args": list(args)}
        self._stderr_at = self._stderr.seek(0, os.SEEK_END)
        self.step = None
        self.deadline = time.monotonic() + timeout
        if not self.child.write((json.dumps(request) + "\n").encode(), self.deadline):
            self.eof = True  # died since its last answer: the caller sees eof and records why

    @property
    def fd(self) -> int:
        return self.child.out

    def fds(self) -> list[int]:
        """What to select on for news from this worker: its stdout and its exit (`Contained.fds`)."""
        return self.child.fds()

    def pump(self, timeout: float = 0.0) -> None:
        """Read what the worker has sent, waiting up to `timeout` for the first bytes.

        `eof` once the worker is over: it exited (seen at once, even if a process it
        started holds the pipe) or closed its stdout, with nothing left unread.
        """
        if self.eof:
            return
        chunk = self.child.read(timeout)
        if chunk is None:
            return
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
                self.pump(0.0)  # a reply that came while the caller was busy elsewhere still counts
                break
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
        if not timed_out:
            self.child.wait_exit(10)  # over: it exited, or closed its stdout and is about to
        code = self.child.stop()  # the whole group, always; a worker still running is SIGKILLed
        kind = "timeout" if timed_out else ("signal" if code < 0 else "exit")
        record: dict[str, Any] = {"kind": kind, "signal": signal_name(code), "exit": code,
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
        """SIGKILL the worker's process group and reap it."""
        self.child.stop()

    def close(self) -> None:
        """Stop the worker (EOF on its stdin, up to 5 s to exit), then kill its group whatever is left."""
        self.child.close(grace=5.0)
        try:
            self._stderr.close()
        except OSError:
            pass


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


def run_cases(model: str | os.PathLike[str], cases: list[dict[str, Any]], *, jobs: int = 1,
              timeout: float = DEFAULT_TIMEOUT, progress: Progress | None = None,
              verbose: bool = False, memory_limit: int | None = None,
              faults: Faults | None = None) -> list[dict[str, Any]]:
    """`evaluate_case` on llama.cpp for every case, in `jobs` workers; results in case order.

    A case whose worker dies or hangs past `timeout` seconds is re-run in a
    fresh worker; only if that one dies or hangs too does the case become a
    crash record (see the module docstring); otherwise its answer is kept and
    a harness fault is appended to `faults`.  `progress(done, total, case_id)`
    is called after each case.
    """
    if not cases:
        return []

    def fresh() -> Worker:
        return started(model, verbose=verbose, memory_limit=memory_limit, faults=faults)

    results: list[dict[str, Any]] = [{} for _ in cases]
    pending = deque(enumerate(cases))
    workers = [fresh() for _ in range(max(1, min(jobs, len(cases))))]
    done = 0
    try:
        while pending or any(w.task for w in workers):
            for w in workers:
                if w.task is None and pending:
                    _assign(w, *pending.popleft(), None, timeout)
            _await_any([w for w in workers if w.task])
            for i, w in enumerate(workers):
                task, outcome = w.task, (w.outcome(timeout=timeout, block=False) if w.task else None)
                if task is None or outcome is None:
                    continue
                (index, case, first), (result, crash) = task, outcome
                w.task = None
                if crash is not None and crash["kind"] != "error":  # the worker is gone: replace it
                    w.close()
                    workers[i] = fresh()
                    if first is None:  # not yet llama.cpp's: ask a fresh worker first
                        _assign(workers[i], index, case, crash, timeout)
                        continue
                elif first is not None:
                    _note_fault(faults, str(case["id"]), "evaluate", first)
                results[index] = crash_case(case, crash) if crash is not None else cast(dict[str, Any], result)
                done += 1
                if progress:
                    progress(done, len(cases), case["id"])
    finally:
        for w in workers:
            w.close()
    return results


def _assign(worker: Worker, index: int, case: dict[str, Any], first: dict[str, Any] | None,
            timeout: float) -> None:
    """Send `case` to `worker`; `first` is the crash of an earlier worker on it (a re-check), or None."""
    worker.task = (index, case, first)
    worker.send("evaluate", case, timeout=timeout)


def fault_record(case_id: str, op: str, crash: dict[str, object]) -> dict[str, object]:
    """A harness fault: the worker died on `op` but a fresh worker answered, so llama.cpp is not to blame."""
    return {"case_id": case_id, "op": op, "crash": crash,
            "reason": f"worker {describe(crash)} on {op}, but a fresh worker answered: not a llama.cpp crash"}


def _note_fault(faults: Faults | None, case_id: str, op: str, crash: dict[str, object]) -> None:
    record = fault_record(case_id, op, crash)
    if faults is None:  # nobody collects them: say it here rather than lose it
        print(f"harness fault: case {case_id}: {record['reason']}", file=sys.stderr)
    else:
        faults.append(record)


def started(model: str | os.PathLike[str], *, verbose: bool = False, load_timeout: float = LOAD_TIMEOUT,
            memory_limit: int | None = None, faults: Faults | None = None) -> Worker:
    """A `Worker` with `model` loaded; `LoadFailure` if llama.cpp refuses, or crashes twice.

    A crash while loading is blamed on llama.cpp only when a fresh worker
    crashes too; a first crash that does not repeat is a harness fault.
    """
    def fresh() -> Worker:
        worker = Worker(model, verbose=verbose, load_timeout=load_timeout, memory_limit=memory_limit)
        worker.start()
        return worker

    try:
        return fresh()
    except LoadFailure as failure:
        if failure.crash is None:
            raise
        first = failure.crash
    worker = fresh()
    _note_fault(faults, "<load>", "load", first)
    return worker


def _await_any(busy: list[Worker]) -> None:
    """Block until a busy worker has news or the earliest deadline passes; read what came."""
    if not any(w.messages or w.eof for w in busy):
        wait = min(w.deadline for w in busy) - time.monotonic()
        if any(w.child.pidfd is None for w in busy):  # no pidfd: look at the processes now and then
            wait = min(wait, POLL_SLICE)
        select.select([fd for w in busy for fd in w.fds()], [], [], max(wait, 0.0))
    for w in busy:
        w.pump(0.0)


def inspect_model(model: str | os.PathLike[str], *, timeout: float = VOCAB_TIMEOUT,
                  verbose: bool = False, memory_limit: int | None = None,
                  faults: Faults | None = None) -> dict[str, Any]:
    """`{"llama", "tokenizer", "vocab"}` from llama.cpp, in a worker.

    Raises `LoadFailure` if the model does not load; a crash or hang while
    reading the vocabulary, repeated in a fresh worker, gives
    `{"vocab": None, "vocab_crash": {...}}`.
    """
    first = None
    for _ in range(2):
        worker = started(model, verbose=verbose, memory_limit=memory_limit, faults=faults)
        try:
            result, crash = worker.ask("inspect", timeout=timeout)
        finally:
            worker.close()
        if crash is None:
            if first is not None:
                _note_fault(faults, "<vocab>", "inspect", first)
            return cast(dict[str, Any], result)
        if crash["kind"] == "error" or first is not None:
            break
        first = crash
    return {"llama": None, "tokenizer": None, "vocab": None, "vocab_crash": crash}
