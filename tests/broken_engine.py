"""A deliberately broken engine, for the harness's own done-criteria test.

It is llama.cpp itself (`harness.oracle.llama.LlamaOracle`, in-process) with two
planted faults, so every case is right except exactly these:

- an input containing `WRONG` loses its last token under every flag
  combination (4 mismatches per case);
- an input containing `RAISE` makes `tokenize` raise (one engine error).

`load_tab` plants a fault the fuzzer finds on its own: any input holding a
tab loses its last token, so Hypothesis must shrink a failure to exactly "\t".
`load_clean` plants nothing: llama.cpp itself, in-process, so every case agrees
(the clean control of a test that plants a fault with `load_tab`). `load_two_bugs` plants two
independent faults the fuzzer must find, and shrink, each once (tests/runs/test_fuzz_stop.py).

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
    from harness.oracle.llama import LlamaOracle
    return BrokenEngine(LlamaOracle(path))


def load_tab(path) -> BrokenEngine:
    from harness.oracle.llama import LlamaOracle
    return BrokenEngine(LlamaOracle(path), wrong=b"\t")


def load_clean(path):
    from harness.oracle.llama import LlamaOracle
    return LlamaOracle(path)


class StubEngine:
    """An engine that never touches llama.cpp and gets everything wrong (empty outputs).

    For the crash-isolation test: the vocabulary there makes llama.cpp abort,
    so the engine must not run llama.cpp in-process.
    """

    def __init__(self, path) -> None:
        from tokenizer.gguf import reader as gguf
        self.n_tokens = len(gguf.read(path).metadata.get("tokenizer.ggml.tokens") or [])
        self.vocab_type, self.pre = "bpe", ""
        self.add_bos = self.add_eos = self.add_sep = False

    def __getattr__(self, name):
        if name in ("bos", "eos", "eot", "eom", "sep", "nl", "pad", "mask", "fim_pre", "fim_suf",
                    "fim_mid", "fim_pad", "fim_rep", "fim_sep"):
            return
        raise AttributeError(name)

    def tokenize(self, text, *, add_special: bool, parse_special: bool) -> list[int]:
        return []

    def detokenize(self, ids, *, remove_special: bool, unparse_special: bool) -> bytes:
        return b""

    def token_to_piece(self, token: int, *, lstrip: int = 0, special: bool) -> bytes:
        return b""

    def token_text(self, token: int) -> bytes:
        return b""

    def token_score(self, token: int) -> float:
        return 0.0

    def token_attr(self, token: int) -> int:
        return 0

    def is_eog(self, token: int) -> bool:
        return False

    def is_control(self, token: int) -> bool:
        return False


def load_stub(path) -> StubEngine:
    return StubEngine(path)


class TabAsNewline:
    """llama.cpp with one planted bug: the lone-tab token is given the newline token's id (197 -> 198 on
    llama-bpe), the bug of issue 41's JavaScript experiment."""

    def __init__(self, oracle) -> None:
        self._oracle = oracle
        pieces = {oracle.token_to_piece(t, special=False): t for t in range(oracle.n_tokens)}
        self._tab, self._newline = pieces[b"\t"], pieces[b"\n"]

    def __getattr__(self, name):
        return getattr(self._oracle, name)

    def tokenize(self, text, *, add_special: bool, parse_special: bool) -> list[int]:
        ids = self._oracle.tokenize(text, add_special=add_special, parse_special=parse_special)
        return [self._newline if t == self._tab else t for t in ids]


def load_tab_as_newline(path) -> TabAsNewline:
    from harness.oracle.llama import LlamaOracle
    return TabAsNewline(LlamaOracle(path))


class SwappedPieces:
    """llama.cpp with planted bugs, one per pair of `swaps`: every token whose piece is the first is given
    the id of the token whose piece is the second. Each pair is an independent difference of its own."""

    def __init__(self, oracle, swaps: dict[bytes, bytes]) -> None:
        self._oracle = oracle
        pieces = {oracle.token_to_piece(t, special=False): t for t in range(oracle.n_tokens)}
        self._ids = {pieces[a]: pieces[b] for a, b in swaps.items()}

    def __getattr__(self, name):
        return getattr(self._oracle, name)

    def tokenize(self, text, *, add_special: bool, parse_special: bool) -> list[int]:
        ids = self._oracle.tokenize(text, add_special=add_special, parse_special=parse_special)
        return [self._ids.get(t, t) for t in ids]


def load_two_bugs(path) -> SwappedPieces:
    """Two independent planted bugs the fuzzer finds on its own on llama-bpe: the lone tab given the
    newline's id (`ids: bytes ⇥ / ↵`), and the lone `|` given the id of `!` (`ids: bytes | / !`)."""
    from harness.oracle.llama import LlamaOracle
    return SwappedPieces(LlamaOracle(path), {b"\t": b"\n", b"|": b"!"})
