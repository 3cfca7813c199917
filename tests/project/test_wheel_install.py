"""gguf-parity installed as a wheel, where a user's CI installs it, checks things (issue 43).

Exactly what such a CI does: build the wheel (`pip wheel --no-deps .`, from a copy of the package's
sources, as a clean checkout has them), create a venv outside the checkout, install the wheel with the
`[harness]` extra and the cached llama-cpp-python wheel (`~/.cache/gguf-parity/wheels/`), and from a
folder outside the checkout run `python -m harness fetch`, `python -m harness run --model llama-spm`
and `pytest --parity-model llama-spm`, each to a verdict (exit 0). Before, `run` exited 2 with
`no such corpus file: .../site-packages/corpora/edge.jsonl` and pytest 4 with the same: the corpora
and the known-crashes list were not package data. On the way it checks what a first-time user meets
first: the wheel without `[harness]` names the extra to install (exit 2, not a traceback); `record`'s
default folder is the user's `golden/`, not one inside site-packages; and the chat helper built for the
same llama.cpp build is found from the new venv, not compiled again.

About a minute and a half on 2 idle cores (pip's install of the dependencies from its cache, the run,
the pytest run); the nox session `tests` builds the cached wheel, fetches the vocabularies and builds
the chat helper before any test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ("pyproject.toml", "README.md", "tokenizer", "harness")  # what `pip wheel .` reads
LLAMA_CPP_PYTHON = PIN
WHEELS = Path(os.environ.get("GGUF_PARITY_WHEELS", Path.home() / ".cache" / "gguf-parity" / "wheels"))


def package_sources(into: Path) -> Path:
    """The package's files as a clean checkout has them (tracked or new, never ignored: no build/, no egg-info)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "--", *PACKAGE], cwd=ROOT,
                            capture_output=True, check=False)
    names = [n for n in listed.stdout.decode().split("\0") if n] if listed.returncode == 0 else []
    if not names:  # not a git checkout: the folders as they are, without caches
        names = [str(p.relative_to(ROOT)) for top in PACKAGE for p in ([ROOT / top] if (ROOT / top).is_file()
                 else (ROOT / top).rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    for name in names:
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into


def user_env(venv: Path) -> dict[str, str]:
    """A user's shell with the venv first on PATH: nothing of this checkout or of this pytest run."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "PYTHON", "COV", "GGUF_PARITY_", "VIRTUAL_ENV", "NOX"))}
    if "GGUF_PARITY_CACHE" in os.environ:  # the same vocabularies and chat helper as this run's
        env["GGUF_PARITY_CACHE"] = os.environ["GGUF_PARITY_CACHE"]
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def step(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
@pytest.mark.vocab
def test_the_wheel_installed_in_a_fresh_venv_checks_llama_spm(tmp_path, require_vocab):
    require_vocab("llama-spm")
    llama = sorted(WHEELS.glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON}-*.whl"))
    if not llama:
        pytest.skip(f"llama-cpp-python is not installed as a cached wheel in {WHEELS} (nox -s tests builds it)")
    src = package_sources(tmp_path / "src")
    built = step([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)],
                 cwd=tmp_path, env=dict(os.environ))
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (tmp_path / "dist").glob("gguf_parity-*.whl")
    venv, user = tmp_path / "venv", tmp_path / "user"
    user.mkdir()
    created = step([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=dict(os.environ))
    assert created.returncode == 0, created.stderr
    env, python = user_env(venv), str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]

    core = step([*pip, str(wheel)], cwd=user, env=env)  # `pip install gguf-parity`: the tokenizer alone
    assert core.returncode == 0, core.stderr[-3000:]
    bare = step([python, "-m", "harness", "run", "--model", "llama-spm"], cwd=user, env=env)
    assert bare.returncode == 2 and 'pip install "gguf-parity[harness]"' in bare.stderr, bare.stderr
    assert "Traceback" not in bare.stderr

    full = step([*pip, f"{wheel}[harness]", str(llama[-1])], cwd=user, env=env)
    assert full.returncode == 0, full.stderr[-3000:]
    where = step([python, "-c", "import harness, tokenizer, sys; print(harness.__file__); print(tokenizer.__file__)"],
                 cwd=user, env=env)
    assert all(line.startswith(str(venv)) for line in where.stdout.split()), where.stdout  # nothing of the checkout
    check_the_user_commands(python, venv, user, env)


def check_the_user_commands(python: str, venv: Path, user: Path, env: dict[str, str]) -> None:
    """`fetch`, `run --model llama-spm` and `pytest --parity-model llama-spm` from `user`, each exit 0."""
    fetched = step([python, "-m", "harness", "fetch"], cwd=user, env=env)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    ran = step([python, "-m", "harness", "run", "--model", "llama-spm", "--quiet"], cwd=user, env=env)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "all match" in ran.stdout
    report = json.loads((user / "reports" / "run" / "report.json").read_text(encoding="utf-8"))
    assert report["summary"]["per_model"]["llama-spm"]["cases"] > 250  # the default corpora were read
    tested = step([str(venv / "bin" / "pytest"), "--parity-model", "llama-spm", "-q", "-p", "no:cacheprovider"],
                  cwd=user, env=env)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert " passed" in tested.stdout and (user / "parity-report" / "report.json").is_file()
    golden = step([python, "-c", "from harness.golden.files import GOLDEN_DIR; print(GOLDEN_DIR)"], cwd=user, env=env)
    assert golden.stdout.strip() == str(user / "golden"), golden.stdout + golden.stderr  # not into site-packages
    from harness.chat import helper_build
    if helper_build.helper_path().is_file():  # built for this llama.cpp build: the new venv finds it, compiles nothing
        found = step([python, "-c", "from harness.chat import helper_build as h; print(h.helper_path())"],
                     cwd=user, env=env)
        assert found.stdout.strip() == str(helper_build.helper_path()), found.stdout + found.stderr
