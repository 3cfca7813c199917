"""Engines that fail once and then answer, for tests/subjects/test_engine_flakes.py.

Each wraps our own `Tokenizer` (right on every case) and fails the first time it
is asked to tokenize the input `"planted flake"` (or the text of the `on` engine argument,
`--engine-arg on=TEXT`): `load_hang_once` hangs, `load_exit_once` exits with status 3.
The `state` engine argument (`--engine-arg state=PATH`) is a file that says the failure
has happened, so the fresh child the harness starts for the re-check answers. With
`--engine-arg refuse=TEXT`, tokenizing TEXT raises `ValueError` every time (an engine
error that is the engine's own answer, not a failure of its process). A failure that
does not repeat is an *engine flake*.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tokenizer import Tokenizer

PLANTED = "planted flake"
EXIT_STATUS = 3


class FailsOnce:
    def __init__(self, path, state: str, how: str, on: str = PLANTED, refuse: str | None = None) -> None:
        self._tok = Tokenizer.from_gguf(path)
        self.state, self.how, self.on = Path(state), how, on.encode()
        self.refuse = None if refuse is None else refuse.encode()

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def tokenize(self, text, *, add_special: bool, parse_special: bool):
        data = text if isinstance(text, bytes) else text.encode()
        if data == self.on and not self.state.exists():
            self.state.write_text(self.how, encoding="utf-8")
            if self.how == "hang":
                time.sleep(3600)
            os._exit(EXIT_STATUS)
        if data == self.refuse:
            raise ValueError("refused on purpose")
        return self._tok.tokenize(data, add_special=add_special, parse_special=parse_special)


def load_hang_once(path, state: str, on: str = PLANTED, refuse: str | None = None) -> FailsOnce:
    return FailsOnce(path, state, "hang", on, refuse)


def load_exit_once(path, state: str, on: str = PLANTED, refuse: str | None = None) -> FailsOnce:
    return FailsOnce(path, state, "exit", on, refuse)
