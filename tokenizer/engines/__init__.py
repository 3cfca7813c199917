"""One module per llama.cpp vocabulary type, registered by its type name.

`load_all()` imports every engine module that exists, so each registers
itself; a module not written yet is skipped (only a ModuleNotFoundError for
that exact module is ignored: a broken engine still fails loudly).
"""

from __future__ import annotations

import importlib

from .base import ENGINES, Engine, engine_for, register

__all__ = ["ENGINES", "Engine", "engine_for", "register", "ENGINE_MODULES", "load_all"]

ENGINE_MODULES = ("spm", "bpe", "wpm", "ugm", "rwkv", "plamo2", "hashing")


def load_all() -> None:
    """Import each module of `ENGINE_MODULES` that exists."""
    for name in ENGINE_MODULES:
        full = f"{__name__}.{name}"
        try:
            importlib.import_module(full)
        except ModuleNotFoundError as e:
            if e.name != full:
                raise


load_all()
