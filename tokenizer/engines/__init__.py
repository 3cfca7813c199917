"""One module per llama.cpp vocabulary type, registered by its type name."""

from __future__ import annotations

from .base import ENGINES, Engine, engine_for, register

__all__ = ["ENGINES", "Engine", "engine_for", "register"]
