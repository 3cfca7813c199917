"""A user's engine with a bug that only long inputs or many calls show, for tests/compare/test_long_inputs.py.

Each is llama.cpp itself (`harness.oracle.llama.LlamaOracle`, in-process in the engine's child),
right on every short case of the corpora, with one planted fault:

- `load_past_64k`: the input goes through a 64 KiB buffer, so an input longer than 65,536
  bytes is tokenized as its first 65,536 bytes only;
- `load_late`: from the 10,000th tokenize call of one object on, every answer loses its last
  token (a stale buffer once a per-object counter passes 9,999).

    python -m harness run --model llama-spm --engine tests.long_engines:load_past_64k
"""

from __future__ import annotations

BUFFER = 64 * 1024
LATE_CALL = 10_000


class LongEngine:
    """The Tokenizer API by delegation to llama.cpp, with one of the faults above in `tokenize`."""

    def __init__(self, oracle, *, buffer: int | None = None, late_call: int | None = None) -> None:
        self._oracle = oracle
        self._buffer, self._late_call = buffer, late_call
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self._oracle, name)

    def tokenize(self, text, *, add_special: bool, parse_special: bool) -> list[int]:
        self.calls += 1
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
        if self._buffer is not None:
            data = data[:self._buffer]
        ids = self._oracle.tokenize(data, add_special=add_special, parse_special=parse_special)
        if self._late_call is not None and self.calls >= self._late_call:
            return ids[:-1]
        return ids


def load_past_64k(path) -> LongEngine:
    from harness.oracle.llama import LlamaOracle
    return LongEngine(LlamaOracle(path), buffer=BUFFER)


def load_late(path) -> LongEngine:
    from harness.oracle.llama import LlamaOracle
    return LongEngine(LlamaOracle(path), late_call=LATE_CALL)


def load_clean(path) -> LongEngine:
    """llama.cpp with no fault: both long phases must agree."""
    from harness.oracle.llama import LlamaOracle
    return LongEngine(LlamaOracle(path))
