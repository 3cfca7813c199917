"""The built-in peers `--engine` knows by name, besides ours, MODULE:CALLABLE and cmd:.

    --engine transformers          Hugging Face transformers' fast tokenizer built from the GGUF
                                   (harness.subjects.transformers_peer; needs the [transformers] extra)
    --engine llama.cpp@VERSION     another llama-cpp-python release in its own venv
                                   (harness.subjects.llama_release; built once, about 5 minutes)

Both run as protocol children (docs/engine-protocol.md), so a peer that
crashes or hangs costs one case, never the run.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import SetupError
from . import llama_release

TRANSFORMERS = "transformers"
HF_ENGINE = "harness.subjects.transformers_peer:load"
HF_EXTRA = "pip install 'gguf-parity[transformers]'   (torch==2.13.0 is the CPU build; see docs/peers.md)"


def is_peer(spec: str | None) -> bool:
    return spec == TRANSFORMERS or llama_release.is_release_spec(spec)


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
    version = llama_release.version_of(spec)
    llama_release.ensure(version)
    return llama_release.child_argv(version)


def peer_factory(spec: str, *, args: dict[str, str], timeout: float) -> Callable[[Path], Any]:
    """GGUF path -> engine handle for a built-in peer (as `harness.runs.engine.load_engine` returns)."""
    from ..environment import child_env
    from .client import RemoteEngine
    argv, env = child_argv(spec), child_env()
    return lambda path: RemoteEngine(argv, Path(path), args=args, timeout=timeout, env=env)
