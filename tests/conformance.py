"""The conformance checks the engine parity tests share: ours against llama.cpp, cell by cell.

Every check compares our `Tokenizer` (`ours`) with llama.cpp through the live
oracle (`llama`, a `harness.oracle.llama.LlamaOracle`); expected values come only
from llama.cpp. A failing check says how many cases differ and shows the first
one: the input or token id, our answer and llama.cpp's.

The flag tables are pytest params with readable ids, so a test parametrized
with them names its cell: `test_tokenize[add_special=True-parse_special=False]`.

    @pytest.mark.parametrize("add_special, parse_special", FLAGS)
    def test_tokenize_corpus(pair, add_special, parse_special):
        assert_same_tokens(*pair, CORPUS, add_special=add_special, parse_special=parse_special)

The end of this module holds that matrix as ready-made tests (`test_tokenize`, ...,
`test_differential`) for a test module with a `pair` fixture, a `CORPUS` and a
`random_inputs(seed, count)`: it imports them, and pytest runs them as its own.
"""

from __future__ import annotations

import itertools
import random

import pytest

from harness.errors import SetupError
from harness.models import synth
from harness.models.paths import resolve
from harness.models.shipped import FETCH_COMMAND

# (False, False), (False, True), (True, False), (True, True): tokenize's
# (add_special, parse_special) and detokenize's (remove_special, unparse_special).
FLAG_PAIRS = tuple(itertools.product((False, True), repeat=2))


def flag_table(ident) -> list:
    """One pytest param (a, b) per pair in FLAG_PAIRS, its id `ident(a, b)`."""
    return [pytest.param(a, b, id=ident(a, b)) for a, b in FLAG_PAIRS]


FLAGS = flag_table(lambda a, p: f"add_special={a}-parse_special={p}")
DETOK = flag_table(lambda r, u: f"remove_special={r}-unparse_special={u}")
SPECIAL = [pytest.param(s, id=f"special={s}") for s in (False, True)]
LSTRIP = [pytest.param(n, id=f"lstrip={n}") for n in (0, 1)]

# Per-token answers (methods taking a token id) and vocabulary-wide getters.
TOKEN_FIELDS = ("token_text", "token_score", "token_attr", "is_eog", "is_control")
GETTERS = ("bos", "eos", "eot", "eom", "sep", "nl", "pad", "mask", "fim_pre", "fim_suf",
           "fim_mid", "fim_pad", "fim_rep", "fim_sep", "add_bos", "add_eos", "add_sep", "n_tokens",
           "vocab_type", "pre")
# The subset the WPM and UGM tests check (no EOT/EOM, FIM ids or pre-tokenizer name).
ENCODER_GETTERS = ("bos", "eos", "sep", "nl", "pad", "mask", "add_bos", "add_eos", "add_sep",
                   "n_tokens", "vocab_type")


# --- vocabularies and pairs ------------------------------------------------------------------

def _or_skip(find, name: str):
    try:
        return find(name)
    except SetupError as exc:
        pytest.skip(f"{exc} (fetch with: {FETCH_COMMAND})")


def shipped_or_skip(name: str):
    """A shipped vocabulary's path (`harness.models.paths.resolve`), or skip naming the fetch command."""
    return _or_skip(resolve, name)


def synthetic_or_skip(name: str):
    """A synthetic vocabulary's path (`harness.models.synth.ensure`), or skip naming the fetch command."""
    return _or_skip(synth.ensure, name)


def synthetic_pair(name: str):
    """A `pair` fixture: (ours, llama) on synthetic vocabulary `name`, from conftest's `pair_for`.

        pair = synthetic_pair("rwkv-world")
    """
    @pytest.fixture
    def pair(pair_for):
        return pair_for(synthetic_or_skip(name))
    return pair


def write_variants(folder, builders: dict) -> dict:
    """name -> path of `folder/<name>.gguf`, holding the bytes `builders[name]()` returns."""
    paths = {}
    for name, build in builders.items():
        paths[name] = folder / f"{name}.gguf"
        paths[name].write_bytes(build())
    return paths


# --- the checks ------------------------------------------------------------------------------

def _show(value, width: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= width else f"{text[:width]}... ({len(text)} characters)"


def _differing(items, ours, llama) -> list:
    """(item, ours(item), llama(item)) for each item where the two answers differ."""
    bad = []
    for item in items:
        got, expected = ours(item), llama(item)
        if got != expected:
            bad.append((item, got, expected))
    return bad


def _first(bad: list, show=_show) -> str:
    item, got, expected = bad[0]
    return f"first {show(item)}: ours {_show(got)}, llama.cpp {_show(expected)}"


def _show_case(case) -> str:
    text, ids = case
    return f"ids {_show(ids)}" + ("" if text is None else f" (llama.cpp's for {_show(text)})")


def assert_same_tokens(ours, llama, texts, *, add_special: bool, parse_special: bool,
                       label: str = "") -> None:
    """Every text tokenizes to the same ids on both sides under the given flags."""
    flags = {"add_special": add_special, "parse_special": parse_special}
    bad = _differing(texts, lambda t: ours.tokenize(t, **flags), lambda t: llama.tokenize(t, **flags))
    assert not bad, f"{label}{len(bad)} inputs differ ({flags}); {_first(bad)}"


def assert_same_detokenize(ours, llama, texts=(), *, remove_special: bool, unparse_special: bool,
                           id_lists=(), label: str = "") -> None:
    """The same bytes from detokenizing llama.cpp's ids for each text (add_special and
    parse_special on), and each list of `id_lists`, under the given flags."""
    flags = {"remove_special": remove_special, "unparse_special": unparse_special}
    cases = [(text, llama.tokenize(text, add_special=True, parse_special=True)) for text in texts]
    cases += [(None, ids) for ids in id_lists]
    bad = _differing(cases, lambda c: ours.detokenize(c[1], **flags),
                     lambda c: llama.detokenize(c[1], **flags))
    assert not bad, f"{label}{len(bad)} id lists differ ({flags}); {_first(bad, _show_case)}"


def assert_same_detokenize_every_flag(ours, llama, ids, *, label: str = "") -> None:
    """`ids` detokenize to the same bytes under all four detokenize flag pairs."""
    for remove, unparse in FLAG_PAIRS:
        assert_same_detokenize(ours, llama, id_lists=[ids], remove_special=remove,
                               unparse_special=unparse, label=label)


def assert_same_round_trip(ours, llama, texts, *, flags=((True, True),)) -> None:
    """Per text: the same ids under each (add_special, parse_special) of `flags`, then the
    same bytes from llama.cpp's ids (add_special and parse_special on) under every
    detokenize flag pair."""
    for text in texts:
        for add, parse in flags:
            assert_same_tokens(ours, llama, [text], add_special=add, parse_special=parse)
        ids = llama.tokenize(text, add_special=True, parse_special=True)
        assert_same_detokenize_every_flag(ours, llama, ids, label=f"{_show(text)}: ")


def assert_same_pieces(ours, llama, *, special: bool, lstrip: int = 0, ids=None,
                       label: str = "") -> None:
    """token_to_piece agrees for each of `ids` (default: every token llama.cpp has)."""
    ids = range(llama.n_tokens) if ids is None else ids
    bad = _differing(ids, lambda t: ours.token_to_piece(t, lstrip=lstrip, special=special),
                     lambda t: llama.token_to_piece(t, lstrip=lstrip, special=special))
    assert not bad, (f"{label}{len(bad)} pieces differ (special={special}, lstrip={lstrip}), "
                     f"first ids {[b[0] for b in bad[:10]]}; {_first(bad)}")


def assert_same_field(ours, llama, field: str, *, ids=None, label: str = "") -> None:
    """A per-token answer (`token_text`, `is_eog`, ...) agrees for each of `ids` (default: all)."""
    ids = range(llama.n_tokens) if ids is None else ids
    bad = _differing(ids, getattr(ours, field), getattr(llama, field))
    assert not bad, (f"{label}{field} differs for {len(bad)} ids, first {[b[0] for b in bad[:10]]}; "
                     f"{_first(bad)}")


def assert_same_getter(ours, llama, name: str) -> None:
    """A vocabulary-wide answer (`bos`, `add_eos`, `n_tokens`, ...) agrees."""
    got, expected = getattr(ours, name), getattr(llama, name)
    assert got == expected, f"{name}: ours {got!r}, llama.cpp {expected!r}"


def differential(ours, llama, texts, *, every_detokenize_flag: bool = True,
                 limit: int = 10) -> list:
    """The first `limit` differences over `texts`, each under the four tokenize flag pairs.

    Where the ids agree, llama.cpp's ids are detokenized under all four detokenize
    flag pairs, or, with `every_detokenize_flag=False`, only under
    remove_special=add_special, unparse_special=parse_special.
    """
    failures = []
    for text in texts:
        for add, parse in FLAG_PAIRS:
            ids = llama.tokenize(text, add_special=add, parse_special=parse)
            if ours.tokenize(text, add_special=add, parse_special=parse) != ids:
                failures.append((text, "tokenize", add, parse))
                continue
            for remove, unparse in FLAG_PAIRS if every_detokenize_flag else [(add, parse)]:
                if ours.detokenize(ids, remove_special=remove, unparse_special=unparse) != \
                        llama.detokenize(ids, remove_special=remove, unparse_special=unparse):
                    failures.append((text, "detokenize", ids, remove, unparse))
        if len(failures) >= limit:
            break
    return failures[:limit]


# --- seeded inputs ---------------------------------------------------------------------------

def mixed_inputs(seed, count: int, *, max_parts: int, kinds):
    """`count` seeded inputs, each 1..max_parts parts joined.

    `kinds` is a list of (bound, make): a part rolls r in [0, 1) and takes the first
    kind with r < bound (give the last one a bound of 1.0); `make(rng)` returns its bytes.
    """
    rng = random.Random(seed)
    for _ in range(count):
        yield b"".join(_part(rng, kinds) for _ in range(rng.randint(1, max_parts)))


def _part(rng: random.Random, kinds) -> bytes:
    roll = rng.random()
    return next(make for bound, make in kinds if roll < bound)(rng)


def choice_of(items):
    """A part kind: one of `items`."""
    return lambda rng: rng.choice(items)


def _code_point(rng: random.Random, ranges) -> str:
    return chr(rng.choice([rng.randint(lo, hi) for lo, hi in ranges]))


def code_points(ranges, max_len: int):
    """A part kind: 1..max_len code points, each from one of the (low, high) `ranges`
    (surrogates included, encoded with surrogatepass)."""
    def make(rng):
        return "".join(_code_point(rng, ranges)
                       for _ in range(rng.randint(1, max_len))).encode("utf-8", "surrogatepass")
    return make


def one_code_point(ranges):
    """A part kind: a single code point from one of the (low, high) `ranges`."""
    return lambda rng: _code_point(rng, ranges).encode("utf-8", "surrogatepass")


def random_bytes(max_len: int):
    """A part kind: 1..max_len random bytes (often invalid UTF-8)."""
    return lambda rng: bytes(rng.randint(0, 255) for _ in range(rng.randint(1, max_len)))


def sample_pieces(ours, n: int = 3000, seed: int = 0) -> list[bytes]:
    """`n` seeded token texts (with repeats), for inputs built from vocabulary pieces."""
    rng = random.Random(seed)
    return [ours.token_text(rng.randrange(ours.n_tokens)) for _ in range(n)]


# --- the conformance matrix as tests ---------------------------------------------------------
# The same cells for each engine module that has a `pair` fixture (ours, llama) and a
# `CORPUS` list. A module takes them by importing them: pytest collects an imported test
# function as the importing module's own (its node id, fixtures and marks), so
# `tests/tokenizer/test_rwkv.py::test_tokenize[add_special=False-parse_special=True]` names its cell.

@pytest.mark.parametrize("add_special, parse_special", FLAGS)
def test_tokenize(pair, request, add_special, parse_special):
    assert_same_tokens(*pair, request.module.CORPUS, add_special=add_special,
                       parse_special=parse_special)


@pytest.mark.parametrize("remove_special, unparse_special", DETOK)
def test_detokenize(pair, request, remove_special, unparse_special):
    assert_same_detokenize(*pair, request.module.CORPUS, remove_special=remove_special,
                           unparse_special=unparse_special)


@pytest.mark.parametrize("special", SPECIAL)
@pytest.mark.parametrize("lstrip", LSTRIP)
def test_pieces(pair, special, lstrip):
    assert_same_pieces(*pair, special=special, lstrip=lstrip)


@pytest.mark.parametrize("field", TOKEN_FIELDS)
def test_vocab_entries(pair, field):
    assert_same_field(*pair, field)


@pytest.mark.parametrize("name", GETTERS)
def test_special_ids_and_flags(pair, name):
    assert_same_getter(*pair, name)


# A module that also has `random_inputs(seed, count)` takes these: each input under the four
# tokenize flag pairs, each id list detokenized with the flags it was tokenized with.

def _flag_matched_differential(pair, request, *, seed: int, count: int) -> list:
    return differential(*pair, request.module.random_inputs(seed, count), every_detokenize_flag=False)


def _assert_no_differences(failures: list) -> None:
    assert failures == [], f"{len(failures)} differences (at most 10 kept), first {_show(failures[0])}"


# inputs per differential run: the default run, and the nightly one (each with its own seed)
BUDGETS = [150, pytest.param(2000, marks=pytest.mark.nightly)]
SEEDS = {150: 1, 2000: 2}


@pytest.mark.parametrize("budget", BUDGETS)
def test_differential(pair, request, budget):
    _assert_no_differences(_flag_matched_differential(pair, request, seed=SEEDS[budget], count=budget))
