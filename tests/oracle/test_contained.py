"""Process trees: every child the harness starts is contained with its descendants.

A child runs in a session of its own (`harness.contained`); its exit is noticed at
once, even while a grandchild it started holds its stdout open; and stopping it
(exit, restart, timeout, close) SIGKILLs its whole process group. Checked on an
engine child that leaves a grandchild behind and exits (tests/orphaning_engine.py),
in a real `run`, and on a llama.cpp worker and the chat oracle.

PID 1 on the machines these tests run on may not reap orphans, so a process that
is a zombie (state Z in /proc/PID/stat) counts as gone: it is dead, only not reaped.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.contained import Contained

ROOT = Path(__file__).resolve().parents[2]
ORPHANING = Path(__file__).resolve().parents[1] / "orphaning_engine.py"
ENGINE_TIMEOUT = 10
BOUND = 6 * ENGINE_TIMEOUT + 30  # seconds: a few engine timeouts, plus loading llama.cpp and the engine


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie is dead: it only waits for a parent to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.is_file() else []


def gone(pidlist: list[int], wait: float = 5.0) -> list[int]:
    """The pids still alive after up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while any(alive(p) for p in pidlist) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pidlist if alive(p)]


def test_an_exit_is_seen_while_a_grandchild_holds_stdout_and_stop_kills_the_group(tmp_path):
    from harness.contained import Contained
    pidfile = tmp_path / "pids"
    child = Contained([sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen(['sleep', '300']); "
                       f"open({str(pidfile)!r}, 'w').write(str(p.pid)); sys.exit(7)"])
    try:
        assert os.getpgid(child.pid) == child.pid != os.getpgrp()  # a group (and session) of its own
        started = time.monotonic()
        assert child.readline(time.monotonic() + 30) == b""  # over: no end of file needed
        assert time.monotonic() - started < 10
        (grandchild,) = pids(pidfile)
        assert alive(grandchild)
    finally:
        code = child.stop()
    assert code == 7
    assert gone([grandchild]) == []


def orphan_run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess, float, dict, list[int]]:
    corpus = tmp_path / "cases.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"orph-{i}", "text": text}) + "\n"
                              for i, text in enumerate(["Hello world", "a\tb", " x", "ÄÖÜ"])), encoding="utf-8")
    pidfile = tmp_path / "pids"
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "llama-spm",
                               "--no-default-corpora", "--corpus", str(corpus), "--long-docs", "0",
                               "--engine", f"cmd:{sys.executable} {ORPHANING} {mode} {pidfile}",
                               "--engine-timeout", str(ENGINE_TIMEOUT), "--report", str(tmp_path / "r"), "--quiet"],
                              capture_output=True, text=True, cwd=ROOT, timeout=BOUND)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run did not end within {BOUND} s (left running: {pids(pidfile)})")
    took = time.monotonic() - started
    report = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    return done, took, report, pids(pidfile)


@pytest.mark.parametrize(("mode", "status"), [
    pytest.param("after-hello", 0, id="exits-after-hello"),
    pytest.param("mid-tokenize", 5, id="exits-mid-tokenize"),
])
def test_a_child_leaving_a_grandchild_behind_costs_bounded_time_and_leaves_nothing(tmp_path, require_vocab,
                                                                                   mode, status):
    require_vocab("llama-spm")
    done, took, report, started = orphan_run(tmp_path, mode)
    # bounded (a client that waits for an end of file a grandchild holds open would wait restart after restart)
    assert took < BOUND, (took, done.stdout, done.stderr)
    assert done.returncode == 1, done.stdout + done.stderr  # engine errors: differences found
    errors = report["engine_errors"]
    assert {e["case_id"] for e in errors} == {f"orph-{i}" for i in range(4)}
    assert all(f"exited with status {status}" in e["error"] for e in errors), errors
    assert len(started) >= 4  # children and their grandchildren
    assert gone(started) == [], [Path(f"/proc/{p}/cmdline").read_bytes() for p in gone(started)]


def test_a_llama_cpp_worker_is_a_group_of_its_own_and_close_kills_the_group(tmp_path, require_vocab,
                                                                             monkeypatch):
    from harness.oracle.workers import Worker
    model = require_vocab("llama-spm")
    marker = tmp_path / "grandchild"
    wrapper = tmp_path / "python"  # starts a process in the worker's group, then is the worker's python
    wrapper.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {marker}\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(wrapper))
    worker = Worker(model)
    try:
        worker.start()
        assert os.getpgid(worker.proc.pid) == worker.proc.pid != os.getpgrp()
        (grandchild,) = pids(marker)
        assert alive(grandchild)
    finally:
        worker.close()
    assert worker.proc.returncode is not None
    assert gone([grandchild]) == []


FAKE_HELPER = """#!{python}
import json, subprocess, sys
grandchild = subprocess.Popen(["sleep", "300"])  # holds stdout too
open({marker!r}, "a").write(f"{{grandchild.pid}}\\n")
for line in sys.stdin:
    request = json.loads(line)
    if request.get("template") == "die":
        sys.exit(6)
    sys.stdout.write(json.dumps({{"ok": False, "error": "fake helper"}}) + "\\n")
    sys.stdout.flush()
"""


def test_the_chat_oracle_is_contained(tmp_path):
    """A fake helper (the line protocol, no build needed) that leaves a grandchild and may die."""
    from harness.chat.oracle import ChatOracle, request
    marker = tmp_path / "grandchildren"
    helper = tmp_path / "helper"
    helper.write_text(FAKE_HELPER.format(python=sys.executable, marker=str(marker)))
    helper.chmod(0o755)
    with ChatOracle(helper, timeout=30) as oracle:
        answer = oracle.ask(request(template="x", messages=[], add_generation_prompt=False))
        assert answer.status == "error" and answer.error == "fake helper"
        assert oracle.proc is not None and os.getpgid(oracle.proc.pid) == oracle.proc.pid != os.getpgrp()
        started = time.monotonic()
        died = oracle.ask(request(template="die", messages=[], add_generation_prompt=False))
        assert died.status == "crash" and "exit status 6" in died.error
        assert time.monotonic() - started < 10  # seen at once, not after the 30 s timeout
        oracle.ask(request(template="x", messages=[], add_generation_prompt=False))  # a fresh helper
    first, second = pids(marker)
    assert gone([first, second]) == []


BIG = 1 << 20  # a request larger than any pipe's buffer (64 KiB on Linux)


def in_thread(call, wait: float) -> tuple[bool, list]:
    """Run `call()` in a thread for up to `wait` seconds: (whether it returned, [its result or exception])."""
    import threading

    out: list = []

    def target() -> None:
        try:
            out.append(call())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(wait)
    return not thread.is_alive(), out


def test_a_request_larger_than_the_pipe_to_a_child_that_does_not_read_is_bounded_by_the_timeout():
    """The write is under the request's deadline too (before: it blocked until the child died)."""
    from harness.subjects.client import Child, ChildFailure
    child = Child([sys.executable, "-c", "import time; time.sleep(120)"])  # alive, never reads its stdin
    try:
        started = time.monotonic()
        returned, out = in_thread(lambda: child.request({"op": "tokenize", "inputs": ["x" * BIG]}, 2), 30)
        assert returned, "the write blocked past the request's timeout"
        assert time.monotonic() - started < 10
        (failure,) = out
        assert isinstance(failure, ChildFailure) and "engine hung: no reply within 2s" in str(failure)
    finally:
        child.kill()
        child.close()


@pytest.mark.parametrize("pidfd", [pytest.param(True, id="pidfd"), pytest.param(False, id="no-pidfd")])
def test_a_write_to_an_exited_child_whose_grandchild_holds_its_stdin_returns_at_once(tmp_path, monkeypatch, pidfd):
    from harness import contained
    from harness.contained import Contained
    if not pidfd:  # as where there is no pidfd_open (not Linux): short selects with a look at the process
        monkeypatch.setattr(contained, "_pidfd", lambda pid: None)
    pidfile = tmp_path / "pids"
    child = Contained([sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen(['sleep', '120']); "
                       f"open({str(pidfile)!r}, 'w').write(str(p.pid)); sys.exit(4)"])
    try:
        assert child.wait_exit(30)
        started = time.monotonic()
        returned, out = in_thread(lambda: child.write(b"x" * BIG), 30)  # no deadline: its exit ends it
        assert returned and out == [False]  # nobody will read it: said at once, not at the deadline
        assert time.monotonic() - started < 10
    finally:
        code = child.stop()
    assert code == 4
    assert gone(pids(pidfile)) == []


# --- memory=: any program capped and tied to the harness (engine children, `cmd:` ones too) -----------------

def _run_to_end(child: Contained, limit: float = 30) -> tuple[int, bytes]:
    with contextlib.suppress(OSError):
        child.proc.stdin.close()  # type: ignore[union-attr]
    child.wait_exit(limit)
    err = child.proc.stderr.read() if child.proc.stderr else b""
    return child.close(), err


def test_a_program_under_a_memory_cap_fails_its_allocation_instead_of_taking_the_machine():
    child = Contained([sys.executable, "-c", "b = bytearray(3 << 30)"], memory=512 << 20, stderr=subprocess.PIPE)
    code, err = _run_to_end(child)
    assert code == 1 and b"MemoryError" in err, err


def test_a_capped_program_is_found_on_path_and_a_missing_one_is_one_line():
    ok = Contained(["sh", "-c", "exit 7"], memory=512 << 20, stderr=subprocess.PIPE)
    assert _run_to_end(ok)[0] == 7
    missing = Contained(["no-such-program-here"], memory=512 << 20, stderr=subprocess.PIPE)
    code, err = _run_to_end(missing)
    assert code == 127 and err.strip() == b"cannot start no-such-program-here: No such file or directory"


def test_a_capped_program_dies_with_the_process_that_started_it(tmp_path):
    """The harness SIGKILLed (no clean-up runs): its capped child goes with it (PR_SET_PDEATHSIG)."""
    code = ("import sys, time; from harness.contained import Contained\n"
            "c = Contained(['sleep', '60'], memory=512 << 20)\n"
            "print(c.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    pid = int(parent.stdout.readline())  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while b"sleep" not in Path(f"/proc/{pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)  # exec'd: the signal is armed
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the capped child outlived the process that started it"
