"""The built-in peers `--engine` knows by name, besides ours, MODULE:CALLABLE and cmd:.

    --engine transformers          Hugging Face transformers' fast tokenizer built from the GGUF
                                   (harness.subjects.transformers_peer; needs the [transformers] extra)
    --engine llama.cpp@VERSION     another llama-cpp-python release in its own venv
                                   (harness.subjects.llama_release; built once, about 5 minutes)
    --engine node-llama-cpp@VERSION
                                   the llama.cpp node-llama-cpp ships prebuilt, served by Node
                                   (harness.subjects.node_llama; installed once from npm, about 10 s)

All run as protocol children (docs/engine-protocol.md), so a peer that
crashes or hangs costs one case, never the run. `build_meta` is what a report
records of the peer's own build.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import SetupError
from . import llama_release, node_llama

TRANSFORMERS = "transformers"
HF_ENGINE = "harness.subjects.transformers_peer:load"
HF_EXTRA = "pip install 'gguf-parity[transformers]'   (torch==2.13.0 is the CPU build; see docs/peers.md)"


def is_peer(spec: str | None) -> bool:
    return spec == TRANSFORMERS or llama_release.is_release_spec(spec) or node_llama.is_spec(spec)


def transformers_missing() -> str | None:
    """Why `--engine transformers` cannot run here (a missing package), or None."""
    missing = [name for name in ("transformers", "tokenizers", "gguf", "torch")
               if importlib.util.find_spec(name) is None]
    if missing:
        return f"--engine transformers needs {', '.join(missing)}: {HF_EXTRA}"
    return None


def child_argv(spec: str) -> list[str]:
    """The protocol child serving `spec`; `SetupError` when it cannot run here (exit 2)."""
    if spec == TRANSFORMERS:
        reason = transformers_missing()
        if reason:
            raise SetupError(reason)
        return [sys.executable, "-m", "harness.children.python_child", "--engine", HF_ENGINE]
    if node_llama.is_spec(spec):
        return node_llama.child_argv(node_llama.ensure(node_llama.version_of(spec)))
    version = llama_release.version_of(spec)
    llama_release.ensure(version)
    return llama_release.child_argv(version)


def peer_factory(spec: str, *, args: dict[str, str], timeout: float) -> Callable[[Path], Any]:
    """GGUF path -> engine handle for a built-in peer (as `harness.runs.engine.load_engine` returns)."""
    from ..environment import child_env, child_memory
    from .client import RemoteEngine
    if node_llama.is_spec(spec):  # a Node program: its heap capped as a `cmd:` engine's
        if args:
            raise SetupError(f"--engine {spec} takes no --engine-arg (got {', '.join(sorted(args))})")
        argv = child_argv(spec)
        return lambda path: RemoteEngine(argv, Path(path), args={}, timeout=timeout, memory=child_memory())
    argv, env = child_argv(spec), child_env()
    return lambda path: RemoteEngine(argv, Path(path), args=args, timeout=timeout, env=env)


def build_meta(spec: str | None) -> dict[str, Any]:
    """What a report's meta records of a peer's own build: `{"engine_build": {...}}` for
    node-llama-cpp (its version, platform package and the llama.cpp it carries; installed
    first when it is not), `{}` for every other engine."""
    if not node_llama.is_spec(spec):
        return {}
    version = node_llama.version_of(str(spec))
    node_llama.ensure(version)
    record = node_llama.build(version)
    return {"engine_build": {**record, "description": node_llama.describe(record)}}
