"""nox sessions: `nox -s tests` (the test suite) and `nox -s parity` (the main job).

llama-cpp-python is compiled from source once, portable (GGML_NATIVE=OFF, so a
cached wheel never hits an illegal instruction on another CPU), and the wheel is
kept in ~/.cache/gguf-parity/wheels for every later session and run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

LLAMA_CPP_PYTHON = "0.3.36"
WHEEL_DIR = Path(os.environ.get("GGUF_PARITY_WHEELS", Path.home() / ".cache" / "gguf-parity" / "wheels"))
CMAKE_ARGS = " ".join([
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_CURL=OFF",
])

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


def llama_wheel(session: nox.Session) -> Path:
    """The cached llama-cpp-python wheel, built on first use (about 5 minutes on 2 cores)."""
    pattern = f"llama_cpp_python-{LLAMA_CPP_PYTHON}-*.whl"
    found = sorted(WHEEL_DIR.glob(pattern))
    if found:
        return found[-1]
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    session.log(f"building llama-cpp-python {LLAMA_CPP_PYTHON} once into {WHEEL_DIR} (about 5 minutes) ...")
    session.run(
        "python", "-m", "pip", "wheel", "--no-deps", "--no-binary", "llama-cpp-python",
        "-w", str(WHEEL_DIR), f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
        env={"CMAKE_ARGS": CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)},
    )
    found = sorted(WHEEL_DIR.glob(pattern))
    if not found:
        session.error(f"no wheel matching {pattern} in {WHEEL_DIR} after the build")
    return found[-1]


def install(session: nox.Session, *extras: str) -> None:
    session.install(str(llama_wheel(session)))
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec)
    session.run("python", "-m", "harness", "fetch")


def ensure_chromium(session: nox.Session) -> None:
    """Debian's headless chromium for the report's browser test, installed when we can (root + apt)."""
    if shutil.which("chromium") or not shutil.which("apt-get") or os.geteuid() != 0:
        return
    session.log("installing Debian's chromium for the HTML report's browser test ...")
    session.run("apt-get", "update", "-qq", external=True, success_codes=[0, 100])
    session.run("apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium",
                external=True, env={"DEBIAN_FRONTEND": "noninteractive"}, success_codes=[0, 100])


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (the nightly marker is excluded; see conftest.py)."""
    install(session, "test")
    ensure_chromium(session)
    session.run("python", "-m", "pytest", *session.posargs)
