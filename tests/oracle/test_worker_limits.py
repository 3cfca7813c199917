"""Bounds on llama.cpp workers: per-case timeout range, --jobs cap, memory cap, death with the parent.

The option checks run before any worker starts, so they need no llama.cpp and
stay in the fast default suite. The memory cap and the parent watchdog are
shown on the RWKV vocabulary on which llama.cpp's fragment loop never ends
and allocates without bound (tests/tokenizer/test_rwkv.py::test_prefix_without_token_is_refused).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness import environment
from harness.cli import main
from harness.errors import SetupError
from harness.oracle import worker_limits

COMMANDS = {
    "record": ["record", "--model", "gpt-2", "--out", "{tmp}/golden"],
    "drift": ["drift", "--golden", "{tmp}/golden"],
    "run": ["run", "--model", "gpt-2", "--report", "{tmp}/report"],
}
HANG_INPUT = {"id": "rwkv-hang", "bytes": "71787a"}  # b"qxz", on the rwkv_hang vocabulary below


def command(name: str, tmp_path: Path, *extra: str) -> list[str]:
    return [arg.format(tmp=tmp_path) for arg in COMMANDS[name]] + list(extra)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e9"])
def test_a_timeout_out_of_range_is_refused_before_any_worker(name, value, tmp_path, capsys):
    """`record --timeout 0` once wrote a golden of 226 fake crashes; now it is exit 2, one line."""
    assert main(command(name, tmp_path, f"--timeout={value}")) == 2
    assert "--timeout" in one_line_error(capsys)
    assert not (tmp_path / "golden").exists() and not (tmp_path / "report").exists()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_jobs_are_capped_at_the_cpu_count_unless_forced(name, tmp_path, capsys):
    too_many = (os.cpu_count() or 1) + 1
    assert main(command(name, tmp_path, "--jobs", str(too_many))) == 2
    assert "--force-jobs" in one_line_error(capsys)
    assert main(command(name, tmp_path, "--jobs", "0")) == 2
    assert "--jobs 0" in one_line_error(capsys)


def test_force_jobs_allows_more_workers_than_cpus():
    too_many = (os.cpu_count() or 1) + 1
    assert worker_limits.check_jobs(too_many, force=True) == too_many
    with pytest.raises(SetupError):
        worker_limits.check_jobs(too_many)


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("value", ["lots", "1X", "1M", "0", "-4G", "99999T"])
def test_a_memory_limit_out_of_range_is_refused(name, value, tmp_path, capsys):
    assert main(command(name, tmp_path, f"--memory-limit={value}")) == 2
    assert "--memory-limit" in one_line_error(capsys)


@pytest.mark.parametrize(("text", "size"), [("4G", 4 << 30), ("512M", 512 << 20), ("1.5GiB", 3 << 29),
                                            ("300mb", 300 << 20), (str(1 << 30), 1 << 30)])
def test_memory_sizes(text, size):
    assert worker_limits.parse_memory(text) == size


def test_default_memory_is_at_most_4_gib_and_half_the_ram():
    ram = environment.physical_memory()
    assert environment.MIN_MEMORY <= environment.default_memory() <= environment.DEFAULT_MEMORY
    assert ram is None or environment.default_memory() <= max(ram // 2, environment.MIN_MEMORY)


# --- the RWKV hang: llama.cpp allocates without end --------------------------------------------

@pytest.fixture()
def rwkv_hang(tmp_path: Path) -> Path:
    """An RWKV vocabulary on which llama.cpp restarts its fragment forever on input b"qxz".

    'x' starts token "xy" but "xz" matches no token, and the loop's output grows without bound.
    """
    from harness.models import synth

    path = tmp_path / "rwkv-hang.gguf"
    path.write_bytes(synth.custom(["\\n", "xy", "q"], model="rwkv"))
    return path


CAP = 512 << 20


CAPPED = textwrap.dedent("""
    import json, resource, sys
    from harness.oracle.workers import run_cases
    (result,) = run_cases(sys.argv[1], [json.loads(sys.argv[2])], timeout=300, memory_limit=int(sys.argv[3]))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss << 10  # KiB on Linux; its workers only
    print(json.dumps({"crash": result.get("crash"), "peak": peak}))
""")


@pytest.mark.oracle
def test_a_runaway_allocation_hits_the_memory_cap_not_the_machine(rwkv_hang):
    """In a fresh process, so the peak RSS of its children is the capped workers' alone."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", CAPPED, str(rwkv_hang), json.dumps(HANG_INPUT), str(CAP)],
                          cwd=root, capture_output=True, text=True, check=True, timeout=900)
    got = json.loads(done.stdout.splitlines()[-1])
    crash = got["crash"]
    assert crash["kind"] != "timeout", crash  # stopped by the cap, not by the clock
    assert "bad_alloc" in crash["stderr"] or "MemoryError" in crash["stderr"], crash
    assert got["peak"] <= CAP


WATCHED = textwrap.dedent("""
    import sys, time
    from harness.oracle.workers import Worker
    worker = Worker(sys.argv[1], memory_limit=int(sys.argv[2]))
    worker.start()
    worker.send("evaluate", {"id": "rwkv-hang", "bytes": "71787a"}, timeout=600)
    print(worker.proc.pid, flush=True)
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie has ended; only its exit status waits to be read


@pytest.mark.oracle
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_sigkill_of_the_parent_leaves_no_worker(rwkv_hang):
    """The worker is busy in llama.cpp's endless loop (and allocating) when its parent is SIGKILLed."""
    root = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, "-c", WATCHED, str(rwkv_hang), str(2 << 30)], cwd=root,
                              stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
        time.sleep(0.5)
        assert _alive(worker)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker)
    finally:
        parent.kill()
        parent.wait()
