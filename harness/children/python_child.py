"""The Python reference child of the engine protocol: any Python engine, contained in its own process.

    python -m harness.children.python_child [--engine MODULE:CALLABLE]      # serve on stdin/stdout
    python -m harness.children.python_child --engine MODULE:CALLABLE --check # can it be imported?

The default engine is ours (`tokenizer:Tokenizer.from_gguf`). `run` and
`compare` start this child for every `--engine MODULE:CALLABLE`, so that a
third-party engine's hang, crash or `sys.exit()` costs one case, not the run.
The module is imported the documented way: the current directory first on
`sys.path`, then the installed packages. A reference child (`harness.references.specs`)
starts with `python -P`, and then the current directory is not put on `sys.path`: its
engine is the harness's own, and a model folder's modules must not shadow its library.

The protocol owns the real stdout: the engine's own prints go to stderr, SIGINT
is ignored (the harness ends the child), and the child exits when the harness
that started it is gone. With `--memory-limit BYTES` (the reference children,
`llama.cpp@VERSION`) the child caps its own address space before the engine
is imported, as a llama.cpp worker does: an engine that needs more fails with
a `MemoryError` naming the limit, and the machine keeps its memory.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

DEFAULT_ENGINE = "tokenizer:Tokenizer.from_gguf"


class SpecError(Exception):
    """The engine spec cannot be resolved; the message names the spec and why."""


def resolve(spec: str) -> Callable[..., Any]:
    """The callable `spec` names (`module:attr.attr`), imported with the current directory first."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise SpecError(f"--engine {spec!r}: expected MODULE:CALLABLE, e.g. {DEFAULT_ENGINE}")
    if not sys.flags.safe_path and os.getcwd() not in sys.path:  # a reference child runs with -P: never the cwd
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except BaseException as exc:  # noqa: BLE001 - a module that fails on import, however, is a set-up error
        first = str(exc).strip().split("\n", 1)[0]  # one line: the harness reports the check's last line
        raise SpecError(f"--engine {spec!r}: cannot import {module_name}: {type(exc).__name__}: {first}") from None
    for part in attr_path.split("."):
        if not hasattr(target, part):
            raise SpecError(f"--engine {spec!r}: {module_name} has no attribute {attr_path}")
        target = getattr(target, part)
    if not callable(target):
        raise SpecError(f"--engine {spec!r}: {attr_path} is not callable")
    return target


def _bounded(factory: Callable[..., Any], limit: int) -> Callable[..., Any]:
    """`factory`, its `MemoryError` naming the address-space cap it hit."""
    def load(*args: Any, **kwargs: Any) -> Any:
        try:
            return factory(*args, **kwargs)
        except MemoryError:
            raise MemoryError(f"over the memory limit of {limit:,} bytes (--memory-limit) while loading") from None
    return load


def _watch_parent() -> None:
    """Exit when the harness is gone (its pipe may stay open in a grandchild)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def _protocol_stream():
    """A private handle on the real stdout; fd 1 and sys.stdout then point at stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.children.python_child")
    parser.add_argument("--engine", default=DEFAULT_ENGINE, metavar="MODULE:CALLABLE")
    parser.add_argument("--check", action="store_true", help="only check that the engine resolves")
    parser.add_argument("--memory-limit", type=int, default=None, metavar="BYTES",
                        help="cap this child's address space before the engine is imported")
    args = parser.parse_args(argv)
    if args.memory_limit:  # an inherited lower limit stays; one that cannot be set is a set-up error
        from harness.environment import LimitError, lower_limit
        try:
            args.memory_limit = lower_limit("AS", args.memory_limit)
        except LimitError as exc:
            print(f"error: the {args.engine} child: {exc}", file=sys.stderr)
            return 2
    try:
        factory = resolve(args.engine)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.check:
        return 0
    if args.memory_limit:
        factory = _bounded(factory, args.memory_limit)
    from harness.subjects.protocol import Server, serve
    out = _protocol_stream()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_parent()
    return serve(Server(factory, args.engine), sys.stdin.buffer, out)


if __name__ == "__main__":
    sys.exit(main())
