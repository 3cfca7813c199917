"""Engines that break the contract on purpose, for tests/subjects/test_engine_contract.py.

Each wraps our own `Tokenizer` (right on every case) and misbehaves on exactly
one input of the llama-spm golden, so a test can check that exactly that case
is an engine error and every other case still agrees:

| input (golden case)    | fault                                   |
|------------------------|-----------------------------------------|
| "Äpfel" (inp-001)      | tokenize never returns                  |
| "ied 4 ½ months" (000) | `sys.exit(0)` inside tokenize           |
| " " (inp-003)          | the process dies: `os._exit(3)`         |
| "  " (inp-004)         | ids returned as floats                  |
| "\\t" (inp-006)         | ids returned as digit strings           |
| "\\n" (inp-007)         | ids returned as bools                   |

`load_tokenize_only` is the minimal adapter of docs/engine-contract.md;
`load_with_args` takes `--engine-arg`s and writes a marker on `close()`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from tokenizer import Tokenizer

FAULTS = {
    "Äpfel".encode(): "hang",
    "ied 4 ½ months".encode(): "exit",
    b" ": "die",
    b"  ": "float",
    b"\t": "str",
    b"\n": "bool",
}


class Faulty:
    """Our Tokenizer, with the faults above in tokenize (everything else delegated)."""

    def __init__(self, path) -> None:
        self._tok = Tokenizer.from_gguf(path)

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def tokenize(self, text, *, add_special: bool, parse_special: bool):
        data = text if isinstance(text, bytes) else text.encode()
        ids = self._tok.tokenize(data, add_special=add_special, parse_special=parse_special)
        fault = FAULTS.get(data)
        if fault == "hang":
            time.sleep(3600)
        elif fault == "exit":
            sys.exit(0)
        elif fault == "die":
            os._exit(3)
        elif fault == "float":
            return [float(i) for i in ids]
        elif fault == "str":
            return [str(i) for i in ids]
        elif fault == "bool":
            return [True for _ in ids] or [True]
        return ids


def load_faulty(path) -> Faulty:
    return Faulty(path)


def load_none(path):
    return None


class TokenizeOnly:
    """The minimal adapter: ids only, str input only."""

    capabilities = ("tokenize",)

    def __init__(self, path) -> None:
        self._tok = Tokenizer.from_gguf(path)

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        if not isinstance(text, str):
            raise TypeError("str only")
        return self._tok.tokenize(text, add_special=add_special, parse_special=parse_special)


def load_tokenize_only(path) -> TokenizeOnly:
    return TokenizeOnly(path)


class WithArgs(TokenizeOnly):
    """Drops the last id when `drop_last=yes`; writes `marker` when closed; prints to stdout (harmless)."""

    def __init__(self, path, *, marker: str, drop_last: str = "no") -> None:
        super().__init__(path)
        self.marker, self.drop_last = Path(marker), drop_last == "yes"

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        print("an engine that prints to stdout must not break the protocol")
        ids = super().tokenize(text, add_special=add_special, parse_special=parse_special)
        return ids[:-1] if self.drop_last and ids else ids

    def close(self) -> None:
        self.marker.write_text("closed\n")


def load_with_args(path, **options) -> WithArgs:
    return WithArgs(path, **options)
