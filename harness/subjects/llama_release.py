"""`--engine llama.cpp@VERSION`: another llama-cpp-python release, in a venv of its own.

The same GGUF under two llama.cpp releases, one diff report: that is how a
nightly sees what changed in llama.cpp's tokenizer between them. The release
is compiled from source once, portable (`GGML_NATIVE=OFF`, as noxfile.py does
for the pinned one), into the wheel cache, and installed into its own venv:

    ~/.cache/gguf-parity/wheels/llama_cpp_python-VERSION-*.whl
    ~/.cache/gguf-parity/venvs/llama-cpp-python-VERSION/

It runs as a protocol child (docs/engine-protocol.md): the Python reference
child under that venv's interpreter, serving `harness.oracle.llama.LlamaOracle`, so
it is crash-isolated like any engine and never shares a process with the
pinned llama.cpp. Everything llama.cpp answers is offered; the report checks
it all.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ..environment import child_memory, venvs_dir
from ..environment_vars import WHEELS
from ..errors import SetupError
from ..files.atomic import locked

PREFIX = "llama.cpp@"
ORACLE_ENGINE = "harness.oracle.llama:LlamaOracle.from_gguf"
CMAKE_ARGS = " ".join([
    "-DGGML_NATIVE=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_CURL=OFF",
])
READY = ".gguf-parity-ready"  # written last: a venv without it is half-built and is made again
# What the worker imports besides llama_cpp (harness.oracle.llama reads tokenizer.vocab's roles); a
# change here changes the READY stamp, so an older venv is made again rather than failing.
WORKER_DEPS = ("numpy>=1.26", "regex>=2024.0")
_VERSION = re.compile(r"\d+\.\d+\.\d+")


def is_release_spec(spec: str | None) -> bool:
    return bool(spec) and spec.startswith(PREFIX)  # type: ignore[union-attr]


def version_of(spec: str) -> str:
    """`0.3.16` for `llama.cpp@0.3.16`; `SetupError` for anything but a plain X.Y.Z version."""
    version = spec[len(PREFIX):]
    if not _VERSION.fullmatch(version):
        raise SetupError(f"--engine {spec!r}: expected llama.cpp@X.Y.Z, a llama-cpp-python release "
                         "(e.g. llama.cpp@0.3.16)")
    return version


def cache_root() -> Path:
    return Path.home() / ".cache" / "gguf-parity"


def wheel_dir() -> Path:
    """The wheel cache noxfile.py uses too (`GGUF_PARITY_WHEELS` overrides it)."""
    return WHEELS.get() or cache_root() / "wheels"


def venv_dir(version: str) -> Path:
    return venvs_dir() / f"llama-cpp-python-{version}"


def venv_python(version: str) -> Path:
    return venv_dir(version) / "bin" / "python"


def _stamp(version: str) -> str:
    return " ".join((version, *WORKER_DEPS)) + "\n"


def is_ready(version: str) -> bool:
    ready = venv_dir(version) / READY
    return ready.is_file() and ready.read_text(encoding="utf-8") == _stamp(version) \
        and venv_python(version).is_file()


def find_wheel(version: str) -> Path | None:
    found = sorted(wheel_dir().glob(f"llama_cpp_python-{version}-*.whl"))
    return found[-1] if found else None


Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build_wheel(version: str, log: Log = _stderr) -> Path:
    """The cached wheel of `version`, compiled on first use (about 5 minutes of 2 cores)."""
    found = find_wheel(version)
    if found:
        return found
    wheel_dir().mkdir(parents=True, exist_ok=True)
    log(f"building llama-cpp-python {version} once into {wheel_dir()} (about 5 minutes) ...")
    env = dict(os.environ, CMAKE_ARGS=CMAKE_ARGS, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-binary", "llama-cpp-python",
          "-w", str(wheel_dir()), f"llama-cpp-python=={version}"], env=env,
         what=f"building llama-cpp-python {version}")
    found = find_wheel(version)
    if found is None:
        raise SetupError(f"no llama_cpp_python-{version}-*.whl in {wheel_dir()} after the build")
    return found


def ensure(version: str, log: Log = _stderr) -> Path:
    """The python of the release's worker venv, made (wheel built, venv installed) on first use.

    Two runs at once take turns (`locked`): the second finds what the first made."""
    if is_ready(version):
        return venv_python(version)
    with locked(venv_dir(version).with_name(venv_dir(version).name + ".lock")):
        if not is_ready(version):
            _make(version, log)
    return venv_python(version)


def _make(version: str, log: Log) -> None:
    wheel = build_wheel(version, log)
    where = venv_dir(version)
    log(f"installing {wheel.name} into {where} ...")
    shutil.rmtree(where, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(where)], what=f"creating {where}")
    _run([str(venv_python(version)), "-m", "pip", "install", "-q", str(wheel), *WORKER_DEPS],
         what=f"installing {wheel.name} into {where}")
    got = subprocess.run([str(venv_python(version)), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                         capture_output=True, text=True, check=False)
    if got.returncode != 0 or got.stdout.strip() != version:
        raise SetupError(f"{where}: llama_cpp does not import as version {version}: "
                         f"{(got.stderr or got.stdout).strip()[-300:]}")
    (where / READY).write_text(_stamp(version), encoding="utf-8")


def _run(argv: list[str], *, what: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()][-3:]
        raise SetupError(f"{what} failed (exit {done.returncode}): " + " | ".join(tail))


def child_argv(version: str) -> list[str]:
    """The protocol child for `version`: the Python reference child, in its venv, serving llama.cpp,
    its address space capped as a worker's (`child_memory`)."""
    return [str(venv_python(version)), "-m", "harness.children.python_child", "--engine", ORACLE_ENGINE,
            "--memory-limit", str(child_memory())]
