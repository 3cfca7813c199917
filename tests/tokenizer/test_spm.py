"""SPM parity with the live oracle (llama.cpp through llama-cpp-python).

Every expected value comes from llama.cpp at test time (`harness.oracle.llama.LlamaOracle`).
A seeded generator (`spm_inputs`) builds inputs aimed at SPM's traps: the space
prefix at the start and after special tokens, runs of spaces, byte fallback
(rare scripts, emoji, lone surrogates' bytes, invalid UTF-8), special-token
texts glued to words (phi-3 sets RSTRIP on them), long unspaced CJK runs.

The default run uses `DEFAULT_N` inputs per vocabulary; the tokenize and
detokenize cells also run with 2,000 under `--nightly` (`BUDGETS`). One test
per output field and flag combination, so a failure names its cell.
"""

from __future__ import annotations

import random

import pytest

from harness.models.shipped import vocab_path
from tests.conformance import (
    FLAG_PAIRS,
    GETTERS,
    TOKEN_FIELDS,
    assert_same_detokenize,
    assert_same_detokenize_every_flag,
    assert_same_field,
    assert_same_getter,
    assert_same_pieces,
    assert_same_round_trip,
    assert_same_tokens,
    choice_of,
    flag_table,
    mixed_inputs,
    one_code_point,
)
from tokenizer import Tokenizer, UnsupportedVocab

oracle_mod = pytest.importorskip("harness.oracle.llama")
pytestmark = [pytest.mark.oracle, pytest.mark.vocab]

SPM_VOCABS = ("llama-spm", "phi-3", "baichuan")
DEFAULT_N = 200  # inputs per vocabulary; the pieces, fields and getters use these pairs
# the tokenize and detokenize runs: DEFAULT_N inputs, and 2,000 in the nightly run
BUDGETS = [DEFAULT_N, pytest.param(2000, marks=pytest.mark.nightly)]
BY_BUDGET = pytest.mark.parametrize("budget", BUDGETS)
SEED = 20240604
FLAGS = flag_table(lambda a, b: f"{'add' if a else 'noadd'}-{'parse' if b else 'noparse'}")
DETOK_FLAGS = flag_table(lambda a, b: f"{'rm' if a else 'keep'}-{'unparse' if b else 'plain'}")
BY_FLAGS = pytest.mark.parametrize(("add_special", "parse_special"), FLAGS)
BY_DETOK_FLAGS = pytest.mark.parametrize(("remove_special", "unparse_special"), DETOK_FLAGS)
BY_VOCAB = pytest.mark.parametrize("name", SPM_VOCABS)

_SCRIPTS = (
    "the quick brown fox", "Hello World", "ǅungla", "Ünïcödé", "привет мир", "γειά σου",
    "こんにちは世界", "你好，世界！这是一个测试", "안녕하세요", "مرحبا بالعالم", "שלום", "नमस्ते",
    "🦙🚀👍🏽‍", "1234567890", "3.14159", "a\u0301e\u0300", "\u200d\u200b\ufeff", "ﬁ ﬂ",
    "x" * 40, "    indented", "tab\there", "line\nbreak", "\r\n", "'s 're 've", "Ꙋ𐐷𝔘",
)
_WS = (" ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "\u3000", "\xa0")
_BAD = (b"\xff", b"\xc3", b"\xe2\x96", b"\x80\x80", b"\xf0\x9f", b"\xed\xa0\x80", b"\x00")


def spm_inputs(texts: list[bytes], specials: list[bytes], n: int, *, seed: int) -> list[bytes]:
    """`n` seeded inputs mixing words, vocabulary pieces, special texts, spaces and bad bytes."""
    fixed = [b"", b" ", b"  ", b"\n", b"a", b" a", specials[0] if specials else b"<s>"]
    return (fixed + list(mixed_inputs(seed, n - len(fixed), max_parts=8,
                                      kinds=_part_kinds(texts, specials))))[:n]


def _part_kinds(texts: list[bytes], specials: list[bytes]) -> list:
    kinds = [
        (0.30, lambda rng: rng.choice(_SCRIPTS).encode()),
        (0.45, lambda rng: rng.choice(_WS).encode()),
        (0.65, lambda rng: rng.choice(texts).replace("\u2581".encode(), b" ")),
        (0.80, choice_of(specials)),
        (0.90, one_code_point([(0x20, 0x2FF), (0x3000, 0x9FFF), (0x10000, 0x1FAFF)])),
        (1.0, choice_of(_BAD)),
    ]
    # Without special texts, a roll in [0.65, 0.80) takes a code point instead.
    return kinds if specials else kinds[:3] + kinds[4:]


class Pair:
    """Our tokenizer and llama.cpp's on the same vocabulary (conftest's `pair_for`), plus the seeded inputs."""

    def __init__(self, pair_for, name: str, n: int) -> None:
        self.name = name
        self.ours, self.oracle = pair_for(name)
        if (name, n) not in _INPUTS:
            v = self.ours.vocab
            texts = [t for t in v.texts if len(t) < 40]
            specials = [v.texts[i] for i in v.special_tokens]
            _INPUTS[name, n] = spm_inputs(texts, specials, n, seed=SEED + len(name))
        self.inputs = _INPUTS[name, n]


_INPUTS: dict[tuple[str, int], list[bytes]] = {}


@pytest.fixture
def pair(pair_for):
    """`pair(name, n)` -> a `Pair` on that shipped vocabulary with `n` seeded inputs."""
    return lambda name, n: Pair(pair_for, name, n)


def check_tokenize(p: Pair, add_special: bool, parse_special: bool) -> None:
    assert_same_tokens(p.ours, p.oracle, p.inputs, add_special=add_special,
                       parse_special=parse_special, label=f"{p.name}: ")


def check_detokenize(p: Pair, remove_special: bool, unparse_special: bool) -> None:
    """llama.cpp's ids for each input, then as many seeded random id lists."""
    rng = random.Random(SEED)
    random_ids = [tuple(rng.randrange(p.ours.n_tokens) for _ in range(rng.randint(0, 12)))
                  for _ in p.inputs]
    assert_same_detokenize(p.ours, p.oracle, p.inputs, id_lists=random_ids,
                           remove_special=remove_special, unparse_special=unparse_special,
                           label=f"{p.name}: ")


# -- default run -----------------------------------------------------------------------

@BY_BUDGET
@BY_FLAGS
@BY_VOCAB
def test_tokenize_matches_oracle(pair, name, add_special, parse_special, budget):
    check_tokenize(pair(name, budget), add_special, parse_special)


@BY_BUDGET
@BY_DETOK_FLAGS
@BY_VOCAB
def test_detokenize_matches_oracle(pair, name, remove_special, unparse_special, budget):
    check_detokenize(pair(name, budget), remove_special, unparse_special)


@pytest.mark.parametrize("special", [pytest.param(False, id="plain"), pytest.param(True, id="special")])
@BY_VOCAB
def test_every_piece_matches_oracle(pair, name, special):
    p = pair(name, DEFAULT_N)
    for lstrip in (0, 1):
        assert_same_pieces(p.ours, p.oracle, special=special, lstrip=lstrip,
                           ids=range(p.ours.n_tokens), label=f"{name}: ")


@pytest.mark.parametrize("field", TOKEN_FIELDS)
@BY_VOCAB
def test_every_token_field_matches_oracle(pair, name, field):
    p = pair(name, DEFAULT_N)
    assert_same_field(p.ours, p.oracle, field, ids=range(p.ours.n_tokens), label=f"{name}: ")


@pytest.mark.parametrize("getter", GETTERS)
@BY_VOCAB
def test_getter_matches_oracle(pair, name, getter):
    p = pair(name, DEFAULT_N)
    assert_same_getter(p.ours, p.oracle, getter)


# -- Hypothesis: the shared fuzz strategies (profile from $GGUF_PARITY_HYPOTHESIS_PROFILE) ----

strategies = pytest.importorskip("harness.inputs.strategies")
fuzz = pytest.importorskip("harness.inputs.fuzz")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

fuzz.load_profile()


@BY_VOCAB
def test_fuzz_inputs_match_oracle(pair, name):
    p = pair(name, DEFAULT_N)
    view = strategies.vocab_view_of(p.ours, name=name)

    @settings(database=None)
    @given(text=strategies.fuzz_inputs(view), add_special=st.booleans(), parse_special=st.booleans())
    def run(text, add_special, parse_special):
        kw = {"add_special": add_special, "parse_special": parse_special}
        assert_same_tokens(p.ours, p.oracle, [text], **kw)
        assert_same_detokenize_every_flag(p.ours, p.oracle, p.oracle.tokenize(text, **kw))

    run()


# -- synthetic SPM variants: the same vocabulary with one thing changed ----------------------

def _cross_word(meta: dict) -> None:
    tokens = list(meta["tokenizer.ggml.tokens"])
    for i, text in enumerate(["e\u2581t", "s\u2581a", "\u2581the\u2581", "o\u2581w", ".\u2581"]):
        tokens[31990 + i] = text  # rare CJK tokens become merge targets that span a word start
    meta["tokenizer.ggml.tokens"] = tokens


VARIANTS = {
    "cross-word-tokens": _cross_word,
    "no-space-prefix": lambda m: m.update({"tokenizer.ggml.add_space_prefix": False}),
    "eos-not-bos": lambda m: m.update({"tokenizer.ggml.add_bos_token": False,
                                       "tokenizer.ggml.add_eos_token": True}),
    "no-scores": lambda m: m.pop("tokenizer.ggml.scores"),
    "no-token-types": lambda m: m.pop("tokenizer.ggml.token_type"),
    "phi3-named": lambda m: m.update({"general.name": "Phi3-clone"}),
}


@pytest.fixture(scope="module")
def variant_pairs(tmp_path_factory):
    from harness.models.gguf_writer import write
    from tokenizer.gguf import reader as gguf

    src_path = vocab_path("llama-spm")
    if not src_path.is_file():
        pytest.skip("llama-spm is not fetched: run python -m harness fetch")
    src = gguf.read(src_path)
    made = {}
    for name, change in VARIANTS.items():
        meta = dict(src.metadata)
        change(meta)
        path = tmp_path_factory.mktemp("spm") / f"{name}.gguf"
        write(path, meta, types=src.types)
        made[name] = path
    return made


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_synthetic_variant_matches_oracle(pair_for, variant_pairs, variant):
    path = variant_pairs[variant]
    if variant == "phi3-named":  # the phi-3 rules need "<|endoftext|>": llama.cpp fails to load
        with pytest.raises(UnsupportedVocab, match="endoftext"):
            Tokenizer.from_gguf(path)
        with pytest.raises(oracle_mod.OracleError):
            oracle_mod.LlamaOracle(path)
        return
    ours, oracle = pair_for(path)
    texts = [t for t in ours.vocab.texts if len(t) < 40]
    inputs = spm_inputs(texts, [ours.vocab.texts[i] for i in ours.vocab.special_tokens], 150, seed=SEED)
    inputs += [b"the test set. o world", b"e t s a", " ".join(["the"] * 30).encode()]
    assert_same_round_trip(ours, oracle, inputs, flags=FLAG_PAIRS)
    for getter in GETTERS:
        assert_same_getter(ours, oracle, getter)
    assert_same_field(ours, oracle, "token_attr", ids=range(ours.n_tokens))
    assert_same_pieces(ours, oracle, special=True, ids=range(ours.n_tokens))


# -- the three merge loops (a heap for long segments; short ones in rows at once when a call
# -- has many, else a scan each) -------------------------------------------------------------

@pytest.mark.parametrize("name", SPM_VOCABS)
@pytest.mark.parametrize(("limit", "rows_from"), [(0, 0), (10**9, 10**9), (10**9, 0)],
                         ids=["heap-only", "scan-only", "rows-only"])
def test_each_merge_loop_alone_matches_the_golden(monkeypatch, name, limit, rows_from):
    """Each loop alone gives llama.cpp's recorded ids on the whole golden slice
    (expected ids from the golden files, recorded from llama.cpp)."""
    from harness.golden import files as goldens
    from harness.golden.records import field_bytes
    from tokenizer.engines import spm

    golden = goldens.load_golden(goldens.GOLDEN_DIR / f"ggml-vocab-{name}.json")
    path = vocab_path(name)
    if not path.is_file():
        pytest.skip(f"{name} is not fetched: run python -m harness fetch")
    monkeypatch.setattr(spm, "SCAN_LIMIT", limit)
    monkeypatch.setattr(spm, "ROWS_FROM", rows_from)
    ours = Tokenizer.from_gguf(path)
    checked = 0
    for case in golden["cases"]:
        for enc in case.get("encode", []):
            flags = {"add_special": enc["add_special"], "parse_special": enc["parse_special"]}
            assert ours.tokenize(field_bytes(case), **flags) == enc["ids"], (case["id"], flags)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("name", SPM_VOCABS)
def test_rows_and_scan_merge_as_the_heap_does_on_every_token_and_the_boundary_slice(name):
    """`merge_batch` (every segment merged in rows at once, one merge per row a round)
    and `merge` (a scan per segment) give the ids of `merge_heap` (llama.cpp's heap, one
    segment at a time; each loop also checked against the goldens above) for the text of
    every token, alone and after U+2581, and for every segment of the boundary slice
    (`harness.inputs.boundaries`)."""
    from harness.golden.records import field_bytes
    from harness.inputs import boundaries
    from tokenizer.engines import spm

    path = vocab_path(name)
    if not path.is_file():
        pytest.skip(f"{name} is not fetched: run python -m harness fetch")
    engine = Tokenizer.from_gguf(path).engine
    segs = set()
    for text in engine.vocab.texts:
        try:
            word = text.decode("utf-8")
        except UnicodeDecodeError:
            continue
        segs.update((word, "\u2581" + word))
    for case in boundaries.cases(path, "slice"):
        try:
            text = field_bytes(case).decode("utf-8")
        except UnicodeDecodeError:
            continue
        segs.update(spm._SEGMENT.findall(("\u2581" + text).replace(" ", "\u2581")))
    segs.discard("")
    ordered = sorted(segs)
    rows = engine.merge_batch(ordered)
    scan = [engine.merge(list(map(str.encode, seg))) for seg in ordered]
    heap = [engine.merge_heap(list(map(str.encode, seg))) for seg in ordered]
    differ = [(seg, r, s, h) for seg, r, s, h in zip(ordered, rows, scan, heap) if not r == s == h]
    assert not differ, f"{len(differ)} segments differ (segment, rows, scan, heap): {differ[:3]}"
    assert len(ordered) > 10_000
