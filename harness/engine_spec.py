"""The `--engine MODULE:CALLABLE` plug-in point.

An engine factory takes a GGUF path and returns an object with the `Tokenizer`
API (`tokenize`, `detokenize`, `token_to_piece`, the vocab getters). The
default is ours, `tokenizer:Tokenizer.from_gguf`; anyone can diff their own
implementation against llama.cpp by naming theirs:

    python -m harness run --model llama-spm --engine mypkg.tok:load
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .models import SetupError

DEFAULT_ENGINE = "tokenizer:Tokenizer.from_gguf"

EngineFactory = Callable[[Path], Any]


def load_engine(spec: str | None = None) -> EngineFactory:
    """The callable named by `spec` (``module:attr.attr``), or `SetupError` saying why not.

    The current directory is importable, so a file `my_engine.py` next to
    where you run works as `--engine my_engine:load`.
    """
    spec = spec or DEFAULT_ENGINE
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise SetupError(f"--engine {spec!r}: expected MODULE:CALLABLE, e.g. {DEFAULT_ENGINE}")
    target = _import_attr(spec, module_name, attr_path)
    if not callable(target):
        raise SetupError(f"--engine {spec!r}: {attr_path} is not callable")
    return target


def _import_attr(spec: str, module_name: str, attr_path: str) -> Any:
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise SetupError(f"--engine {spec!r}: cannot import {module_name}: {exc}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module failed on import: set-up error
        first = str(exc).strip().split("\n", 1)[0]
        raise SetupError(f"--engine {spec!r}: importing {module_name} raised "
                         f"{type(exc).__name__}: {first}") from None
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise SetupError(f"--engine {spec!r}: {module_name} has no attribute {attr_path}") from None
    return target


def describe(spec: str | None) -> str:
    """The spec as shown in reports and reproduce commands."""
    return spec or DEFAULT_ENGINE
