"""A deliberately broken engine, for the harness's own done-criteria test.

It is llama.cpp itself (`harness.oracle.LlamaOracle`, in-process) with two
planted faults, so every case is right except exactly these:

- an input containing `WRONG` loses its last token under every flag
  combination (4 mismatches per case);
- an input containing `RAISE` makes `tokenize` raise (one engine error).

`load_tab` plants a fault the fuzzer finds on its own: any input holding a
tab loses its last token, so Hypothesis must shrink a failure to exactly "\t".

    python -m harness run --model llama-spm --engine tests.broken_engine:load ...
"""

from __future__ import annotations

WRONG = b"ZQXWRONG"
RAISE = b"ZQXRAISE"


class BrokenEngine:
    """The Tokenizer API by delegation, with the two faults above in `tokenize`."""

    def __init__(self, oracle, *, wrong: bytes = WRONG) -> None:
        self._oracle = oracle
        self._wrong = wrong

    def __getattr__(self, name):
        return getattr(self._oracle, name)

    def tokenize(self, text, *, add_special: bool, parse_special: bool) -> list[int]:
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
        if RAISE in data:
            raise RuntimeError("planted engine error")
        ids = self._oracle.tokenize(data, add_special=add_special, parse_special=parse_special)
        return ids[:-1] if self._wrong in data else ids


def load(path) -> BrokenEngine:
    from harness.oracle import LlamaOracle
    return BrokenEngine(LlamaOracle(path))


def load_tab(path) -> BrokenEngine:
    from harness.oracle import LlamaOracle
    return BrokenEngine(LlamaOracle(path), wrong=b"\t")
