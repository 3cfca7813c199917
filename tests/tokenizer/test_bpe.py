"""BPE engine against llama.cpp itself, on the 14 shipped BPE vocabularies.

Expected values come only from llama.cpp: the live oracle (`LlamaOracle`,
llama-cpp-python's low-level API, vocab_only).  The `.inp`/`.out` vectors
are checked by tests/tokenizer/test_llama_vectors.py for every engine.

- A seeded differential run (tests/bpe_inputs.py): each input under the four
  add_special x parse_special flags, each id list under the four detokenize
  flags (`harness.golden.records.evaluate_case` on both sides).  100 inputs per
  vocabulary by default, 2,000 with --nightly.
- Every token's text, score, attribute and pieces (`vocab_record`).
- Inputs llama.cpp aborts on: we raise `LlamaCppAbort` instead, checked
  against a crash-isolated oracle.
"""

from __future__ import annotations

import pytest

from harness.golden.records import evaluate_case, vocab_record
from tests.bpe_inputs import inputs
from tests.conformance import synthetic_or_skip
from tokenizer import Tokenizer
from tokenizer.attrs import Attr
from tokenizer.unicode import LlamaCppAbort

BPE_SHIPPED = ("aquila", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4",
               "gpt-2", "gpt-neox", "llama-bpe", "mpt", "qwen2", "qwen35", "refact", "starcoder")
# inputs per vocabulary: the default run, and the nightly one
BUDGETS = [100, pytest.param(2000, marks=pytest.mark.nightly)]
_SEED_TAG = {100: "default", 2000: "nightly"}  # the input seeds the runs have always used


def _specials(tok: Tokenizer) -> list[bytes]:
    """Texts of CONTROL and USER_DEFINED tokens, for the generator to mix in."""
    wanted = Attr.CONTROL | Attr.USER_DEFINED
    return [tok.token_text(t) for t in range(tok.n_tokens) if tok.token_attr(t) & wanted][:64]


def differential(pair, seed: str, n: int) -> list[str]:
    """Readable descriptions of the inputs where our records differ from llama.cpp's, for (ours, oracle)."""
    ours, oracle = pair
    failures = []
    for i, data in enumerate(inputs(seed, n, _specials(ours))):
        case = {"id": f"{seed}-{i}", "bytes": data.hex()}
        expected = evaluate_case(oracle, case)
        try:
            got = evaluate_case(ours, case)
        except Exception as exc:  # noqa: BLE001 - reported as a failing case
            got = f"{type(exc).__name__}: {exc}"
        if got != expected:
            failures.append(f"case {i}: {data!r}")
    return failures


@pytest.mark.oracle
@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in BPE_SHIPPED])
def test_differential(pair_for, name, budget):
    failures = differential(pair_for(name), f"{name}:{_SEED_TAG[budget]}", budget)
    assert not failures, f"{len(failures)} of {budget} inputs differ: {failures[:5]}"


# The model names with sessions or loaders of their own, on synthetic vocabularies.
SYNTHETIC_MODELS = ("model-gemma4", "model-hybriddna", "model-whitespace")


@pytest.mark.oracle
@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in SYNTHETIC_MODELS])
def test_synthetic_model_differential(pair_for, name, budget):
    failures = differential(pair_for(synthetic_or_skip(name)), f"{name}:{_SEED_TAG[budget]}", budget)
    assert not failures, f"{len(failures)} of {budget} inputs differ: {failures[:5]}"


def _token_fields(api, t: int) -> tuple:
    return (api.token_text(t), api.token_score(t), api.token_attr(t),
            api.token_to_piece(t, special=False), api.token_to_piece(t, special=True),
            api.token_to_piece(t, lstrip=1, special=True))


@pytest.mark.oracle
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in BPE_SHIPPED])
def test_token_fields_sample(pair_for, name):
    """Text, score, attribute and pieces of every special token and every 16th other one."""
    ours, oracle = pair_for(name)
    sample = sorted(set(range(0, ours.n_tokens, 16)) | set(range(ours.n_tokens - 300, ours.n_tokens))
                    | {t for t in range(ours.n_tokens) if ours.token_attr(t) & ~4})
    bad = [t for t in sample if _token_fields(ours, t) != _token_fields(oracle, t)]
    assert not bad, f"{len(bad)} of {len(sample)} tokens differ, e.g. {bad[:10]}"


@pytest.mark.oracle
@pytest.mark.nightly
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in BPE_SHIPPED])
def test_vocab_record(pair_for, name):
    """Every token's text, score, attribute and both pieces, flags and special ids."""
    ours, oracle = pair_for(name)
    assert vocab_record(ours) == vocab_record(oracle)


# gemma-4 has one merge that crosses a cut point of `WordCutter`: (">", "▁</").
@pytest.mark.oracle
@pytest.mark.parametrize("data", [
    pytest.param(b"<b> </b>", id="tag-space-close"),
    pytest.param(b"x>  </", id="two-spaces"),
    pytest.param(b"> </" * 5, id="repeated"),
    pytest.param(b"<div> </div> <p> </p>", id="html"),
])
def test_gemma4_cut_points(pair_for, data):
    ours, oracle = pair_for("gemma-4")
    flags = {"add_special": False, "parse_special": False}
    assert ours.tokenize(data, **flags) == oracle.tokenize(data, **flags)


# Lead bytes F4 90.. to F7 decode to code points above U+10FFFF, which llama.cpp
# cannot re-encode: std::invalid_argument escapes llama_tokenize and aborts.
ABORTING_INPUTS = [
    pytest.param(b"a\xf4\x90\x80\x80", id="f4-90-above-10ffff"),
    pytest.param(b"\xf7\xbf\xbf\xbf b", id="f7-lead"),
]


@pytest.mark.parametrize("data", ABORTING_INPUTS)
def test_abort_inputs_raise(data, require_vocab):
    tok = Tokenizer.from_gguf(require_vocab("gpt-2"))
    with pytest.raises(LlamaCppAbort):
        tok.tokenize(data, add_special=False, parse_special=False)


@pytest.mark.oracle
def test_abort_inputs_crash_llama(require_vocab):
    """The same inputs really abort llama.cpp (so raising is the faithful answer)."""
    from harness.oracle.session import OracleCrash, OracleSession

    with OracleSession(require_vocab("gpt-2"), timeout=60) as session:
        for param in ABORTING_INPUTS:
            data = param.values[0]
            with pytest.raises(OracleCrash):
                session.evaluate({"id": param.id, "bytes": data.hex()})


@pytest.mark.oracle
@pytest.mark.parametrize("text, refused", [
    pytest.param(b"\xf5\x80\x80\x80", True, id="f5-lead"),
    pytest.param(b"a\xf4\x90\x80\x80", True, id="f4-90"),
    pytest.param(b"\xf4\x8f\xbf\xbf", False, id="f4-8f-last-code-point"),
])
def test_token_text_above_10ffff(text, refused, require_vocab, tmp_path):
    """llama.cpp decodes every byte-level piece while loading; one above U+10FFFF fails the load."""
    from harness.models import gguf_writer
    from harness.oracle.llama import LlamaOracle, OracleError
    from tokenizer import UnsupportedVocab
    from tokenizer.gguf import reader as gguf

    src = require_vocab("gpt-2")
    tokens = list(gguf.read(src).metadata["tokenizer.ggml.tokens"])
    tokens[1000] = text.decode("utf-8", "surrogateescape")
    path = tmp_path / "vocab.gguf"
    gguf_writer.rewrite(src, path, {"tokenizer.ggml.tokens": tokens})
    if refused:
        with pytest.raises(OracleError, match="invalid codepoint"):
            LlamaOracle(path)
        with pytest.raises(UnsupportedVocab, match="token 1000"):
            Tokenizer.from_gguf(path)
    else:
        with LlamaOracle(path) as oracle:
            assert Tokenizer.from_gguf(path).token_to_piece(1000, special=True) == \
                oracle.token_to_piece(1000, special=True)
