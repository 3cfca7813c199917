"""The `--engine` plug-in point: what is named, how it is started, what the comparators get.

    --engine (none)               ours, tokenizer:Tokenizer.from_gguf, in this process
    --engine MODULE:CALLABLE      CALLABLE(gguf_path, **engine_args), in a contained child process
    --engine cmd:"COMMAND LINE"   any program speaking docs/engine-protocol.md
    --engine transformers         Hugging Face transformers; llama.cpp@VERSION another llama.cpp release;
                                  node-llama-cpp@VERSION the llama.cpp node-llama-cpp ships prebuilt
    --engine hf:PATH | spm:PATH | tekken:PATH
                                  the model's original tokenizer as the "engine": llama.cpp against
                                  the original (docs/references.md); resolved a floor up, by
                                  `harness.runs.engine.load_engine`, since its client builds on ours

`load_engine` checks the spec once (a bad one is a `SetupError`, exit 2) and
returns a factory: GGUF path -> engine handle (`harness.subjects.guard`). The
module of a MODULE:CALLABLE is imported by the Python reference child the
documented way, the current directory first; the check imports it there too,
so a module that hangs, exits or raises on import cannot harm the harness.
See docs/engine-contract.md.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..contained import probe
from ..environment import child_env, child_memory
from ..errors import SetupError
from .peers import is_peer, peer_factory

DEFAULT_ENGINE = "tokenizer:Tokenizer.from_gguf"
DEFAULT_ENGINE_TIMEOUT = 30.0
CHECK_TIMEOUT = 120.0
PYTHON_CHILD = "harness.children.python_child"

EngineFactory = Callable[[Path], Any]


def is_ours(spec: str | None) -> bool:
    """True for our own engine (run in-process; its fuzz finds go to the project's corpora)."""
    return (spec or DEFAULT_ENGINE) == DEFAULT_ENGINE


def parse_engine_args(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`--engine-arg KEY=VALUE` options as a dict (`SetupError` on a malformed one)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise SetupError(f"--engine-arg {pair!r}: expected KEY=VALUE with KEY a Python identifier")
        out[key] = value
    return out


def load_engine(spec: str | None = None, *, args: dict[str, str] | None = None,
                timeout: float = DEFAULT_ENGINE_TIMEOUT) -> EngineFactory:
    """A factory GGUF path -> engine handle for `spec`, or `SetupError` saying why not."""
    from .client import RemoteEngine
    spec, args = spec or DEFAULT_ENGINE, dict(args or {})
    if spec.startswith("cmd:"):
        argv = _command(spec)
        return lambda path: RemoteEngine(argv, path, args=args, timeout=timeout, memory=child_memory())
    if is_peer(spec):  # transformers, llama.cpp@VERSION, node-llama-cpp@VERSION: docs/peers.md
        return peer_factory(spec, args=args, timeout=timeout)
    if is_ours(spec):
        from tokenizer import Tokenizer

        from .guard import InProcessEngine
        return lambda path: InProcessEngine.load(Tokenizer.from_gguf, path, spec, args)
    _check_module(spec)
    argv = [sys.executable, "-m", PYTHON_CHILD, "--engine", spec]
    env = child_env()
    return lambda path: RemoteEngine(argv, path, args=args, timeout=timeout, env=env)


def _command(spec: str) -> list[str]:
    try:
        argv = shlex.split(spec[len("cmd:"):])
    except ValueError as exc:
        raise SetupError(f"--engine {spec!r}: cannot split the command line: {exc}") from None
    if not argv:
        raise SetupError(f"--engine {spec!r}: no command after cmd:")
    program = argv[0]
    found = shutil.which(program) if os.sep not in program else (program if os.access(program, os.X_OK) else None)
    if found is None:
        where = "in PATH" if os.sep not in program else "as a file"
        raise SetupError(f"--engine {spec!r}: cannot start {program!r}: no such executable {where}")
    return argv


def _check_module(spec: str) -> None:
    """Resolve MODULE:CALLABLE in a child (import side effects stay there); `SetupError` if it fails."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SetupError(f"--engine {spec!r}: expected MODULE:CALLABLE, e.g. {DEFAULT_ENGINE}")
    with tempfile.TemporaryFile() as stderr:  # contained: a process the import starts dies with it
        code = probe([sys.executable, "-m", PYTHON_CHILD, "--engine", spec, "--check"], timeout=CHECK_TIMEOUT,
                     env=child_env(), stderr=stderr)
        stderr.seek(0)
        text = stderr.read().decode("utf-8", "replace")
    if code is None:
        raise SetupError(f"--engine {spec!r}: importing {module_name} took over {CHECK_TIMEOUT:g}s")
    if code != 0:
        lines = [line for line in text.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"the check exited with status {code}"
        raise SetupError(reason if reason.startswith("--engine") else f"--engine {spec!r}: {reason}")


def describe(spec: str | None) -> str:
    """The spec as shown in reports and reproduce commands."""
    return spec or DEFAULT_ENGINE
