"""The `meta` block of every report: what ran, on what, where, when and for how long.

One module builds it for `run`, `compare`, `chat` (messages.json) and `merge-reports`:

- `project`: this checkout's git commit and whether its tracked files differ from it (`dirty`);
  `{"commit": null, "why": ...}` when the harness is not run from a git checkout (an installed
  copy) or git cannot say;
- `llama_cpp_python` (the version, as before) and `llama_cpp`: llama.cpp's build as a llama.cpp
  worker reports it (`harness.oracle.llama.build_info`: ggml version and commit), asked of a
  short child process started with the run and read at its end (`{"error": ...}` when it cannot
  be had: llama-cpp-python not installed, or the child failed);
- `date` (the start, UTC, ISO 8601), `duration_s`, `seed` (the run's, drawn or given), and
  `host` (hostname, platform, CPU count, Python).

`Meta.start()` takes the git state and starts the build child; `Meta.finish(meta, seed=...)`
adds the rest. Every child is bounded in time (`PROBE_TIMEOUT`) and output; the build is
asked once per process.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..environment import child_env

PROBE_TIMEOUT = 30.0  # seconds for git or the build child: both answer in well under a second
MAX_OUTPUT = 1 << 16  # bytes of a probe's output that are read
_BUILD_SCRIPT = "import json; from harness.oracle.llama import build_info; print(json.dumps(build_info()))"
_CACHE: dict[str, Any] = {}


def checkout() -> Path | None:
    """The folder holding `harness/` when it is a source checkout (it holds pyproject.toml), else None."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").is_file() else None


def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    """(exit status, stdout) of a short probe; (-1, why) when it cannot run or takes too long."""
    try:
        done = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return -1, f"{Path(argv[0]).name}: {exc}"
    out = done.stdout[:MAX_OUTPUT].decode("utf-8", "replace")
    return done.returncode, out if done.returncode == 0 else done.stderr[:300].decode("utf-8", "replace").strip()


def project_state(folder: Path | None = None) -> dict[str, Any]:
    """`{"commit", "dirty"}` of the checkout (tracked files only), or `{"commit": None, "why"}`."""
    folder = checkout() if folder is None else folder
    if folder is None:
        return {"commit": None, "why": "not a git checkout (an installed copy of gguf-parity)"}
    code, top = _run(["git", "rev-parse", "--show-toplevel"], folder)
    if code != 0 or Path(top.strip()).resolve() != folder.resolve():
        return {"commit": None, "why": f"not a git checkout ({folder}: {top.strip()[:200] or 'no .git'})"}
    code, commit = _run(["git", "rev-parse", "HEAD"], folder)
    if code != 0:
        return {"commit": None, "why": f"git has no commit here ({commit.strip()[:200]})"}
    code, status = _run(["git", "status", "--porcelain", "--untracked-files=no"], folder)
    return {"commit": commit.strip(), "dirty": bool(status.strip()) if code == 0 else None}


def host() -> dict[str, Any]:
    return {"name": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "python": platform.python_version()}


class BuildProbe:
    """llama.cpp's build, asked of a child process started now and read by `result()`."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: str | None = None
        if "build" in _CACHE:
            return
        try:
            self.proc = subprocess.Popen([sys.executable, "-P", "-c", _BUILD_SCRIPT], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
                                         start_new_session=True)
        except OSError as exc:
            self.error = f"cannot start the build probe: {exc}"

    def result(self) -> dict[str, Any]:
        if "build" in _CACHE:
            return dict(_CACHE["build"])
        if self.proc is None:
            return {"error": self.error or "not asked"}
        try:
            out, err = self.proc.communicate(timeout=PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.close()
            return {"error": f"the build probe gave no answer in {PROBE_TIMEOUT:g} s"}
        if self.proc.returncode != 0:
            last = err[-MAX_OUTPUT:].decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
            return {"error": f"llama-cpp-python cannot say its build: {last[0][:300]}"}
        try:
            info = json.loads(out[:MAX_OUTPUT])
        except ValueError:
            return {"error": "the build probe's answer is not JSON"}
        _CACHE["build"] = info if isinstance(info, dict) else {"error": "the build probe's answer is not an object"}
        return dict(_CACHE["build"])

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Meta:
    """A report's meta block in two steps: `start()` (before the work) and `finish()` (after it)."""

    def __init__(self, *, background: bool = True) -> None:
        """`background`: ask llama.cpp's build now, in a child that works while the run does (then use
        `with`, so the child never outlives the block); else when `finish` is called."""
        self.started = time.time()
        self.clock = time.monotonic()
        self.project = project_state()
        self.build: BuildProbe | None = BuildProbe() if background else None

    @classmethod
    def start(cls) -> Meta:
        return cls()

    def finish(self, meta: dict[str, Any], *, seed: int | None = None, llama: bool = True) -> dict[str, Any]:
        """`meta` with the project, the builds, the date, the duration, the seed and the host added.

        `llama=False` (a merge, which runs nothing) leaves the builds and the seed to the parts' own meta.
        """
        from ..report.build import versions
        probe = self.build if self.build is not None else BuildProbe() if llama else None
        build = probe.result() if probe is not None and llama else None
        self.close()
        if probe is not None:
            probe.close()
        date = datetime.fromtimestamp(self.started, UTC).isoformat(timespec="seconds")
        seed = meta.get("seed") if seed is None else seed  # a seed the run drew and recorded itself stays
        return {**meta, **({**versions(), "llama_cpp": build, "seed": seed} if llama else {}),
                "project": self.project, "date": date, "duration_s": round(time.monotonic() - self.clock, 3),
                "host": host()}

    def __enter__(self) -> Meta:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.build is not None:
            self.build.close()
