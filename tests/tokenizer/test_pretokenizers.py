"""Every pre-tokenizer name and behaviour llama.cpp knows, checked against llama.cpp.

Three sources of truth, all llama.cpp's:
- its source (`src/llama-vocab.cpp` in the pinned sdist): the regex list and
  byte encoding of each `LLAMA_VOCAB_PRE_TYPE_*`, and the `tokenizer.ggml.pre`
  names and flags of `load()`, parsed here and compared with our registries;
- the live oracle, on the synthetic `pre-<name>` vocabularies (`python -m
  harness synth`): a seeded differential run per name, 20 inputs by default,
  2,000 with --nightly.  `pre-whitespace` runs crash-isolated: llama.cpp
  aborts on some of its inputs (see `test_whitespace_pre_aborts`).
"""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

from tests.bpe_inputs import inputs
from tests.conformance import synthetic_or_skip
from tests.llama_sources import llama_source
from tokenizer import UnsupportedVocab
from tokenizer.pretokenize import behaviours as pt
from tokenizer.pretokenize.names import PRE_NAMES, resolve

# inputs per pre-tokenizer name: the default run, and the nightly one
BUDGETS = [20, pytest.param(2000, marks=pytest.mark.nightly)]


# --- llama.cpp's source, parsed ----------------------------------------------------------

def _source() -> str:
    return llama_source("llama-vocab.cpp")


def _cpp_string(body: str) -> str:
    simple = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'"}
    return re.sub(r"\\(.)", lambda m: simple[m.group(1)], body)


@lru_cache(maxsize=1)
def cpp_behaviours() -> dict[str, tuple[tuple[str, ...], bool]]:
    """LLAMA_VOCAB_PRE_TYPE_* (lower case) -> (regex_exprs, byte_encode), from llm_tokenizer_bpe."""
    src = _source()
    start = src.index("llm_tokenizer_bpe(const llama_vocab & vocab)")
    body = src[start:src.index("std::vector<std::string> regex_exprs;", start)]
    found: dict[str, tuple[tuple[str, ...], bool]] = {}
    pending: list[str] = []
    for block in re.split(r"\n\s*(?=case LLAMA_VOCAB_PRE_TYPE_\w+:|default:)", body):
        head = re.match(r"\s*(?:case LLAMA_VOCAB_PRE_TYPE_(\w+):|default:)", block)
        if not head:
            continue
        pending.append((head.group(1) or "default").lower())
        if "regex_exprs" not in block:
            continue
        code = "\n".join(line for line in block.splitlines() if not line.strip().startswith("//"))
        exprs = code[code.index("regex_exprs = {"):]
        exprs = exprs[:exprs.index("};")]
        literals = tuple(_cpp_string(s) for s in re.findall(r'"((?:[^"\\]|\\.)*)"', exprs))
        for name in pending:
            found[name] = (literals, "byte_encode = false" not in block)
        pending = []
    return found


@lru_cache(maxsize=1)
def cpp_pre_names() -> dict[str, tuple[str, dict[str, bool], bool]]:
    """tokenizer.ggml.pre value -> (pre type, flags set, BOS id dropped), from load()."""
    src = _source()
    start = src.index('tokenizer_pre == "default"')
    chain = src[start:src.index("unknown pre-tokenizer type", start)]
    found = {}
    for branch in chain.split("} else if (")[1:]:
        names = re.findall(r'tokenizer_pre == "([^"]+)"', branch)
        pre_type = re.search(r"pre_type = LLAMA_VOCAB_PRE_TYPE_(\w+);", branch).group(1).lower()
        flags = {k: v == "true" for k, v in re.findall(r"\b(\w+) = (true|false);", branch)}
        no_bos = "special_bos_id = LLAMA_TOKEN_NULL" in branch
        for name in names:
            found[name] = (pre_type, flags, no_bos)
    found["default"] = ("default", {}, False)
    return found


# --- registries against the source -------------------------------------------------------

def test_every_behaviour_is_registered():
    assert set(pt.REGISTRY) == set(cpp_behaviours())


@pytest.mark.parametrize("name", sorted(pt.REGISTRY))
def test_behaviour_matches_source(name):
    """Pattern text must match character for character: llama.cpp picks splitters by it."""
    patterns, byte_encode = cpp_behaviours()[name]
    assert pt.REGISTRY[name].patterns == patterns
    assert pt.REGISTRY[name].byte_encode == byte_encode


def test_every_pre_name_is_known():
    assert set(PRE_NAMES) == set(cpp_pre_names())


@pytest.mark.parametrize("pre", sorted(PRE_NAMES))
def test_pre_name_matches_load(pre):
    pre_type, flags, no_bos = cpp_pre_names()[pre]
    spec = resolve(pre, model="gpt2")
    assert (spec.name, spec.pre_type, spec.no_default_bos) == (pre, pre_type, no_bos)
    # normalizer_opts.lowercase = false (whitespace only) is the Vocab's business, not a flag
    flags = {k: v for k, v in flags.items() if k != "lowercase"}
    assert {k: spec.overrides[k] for k in flags} == flags
    bpe_base = {"add_space_prefix": False, "escape_whitespaces": False, "clean_spaces": True}
    for key, value in bpe_base.items():
        assert spec.overrides[key] == flags.get(key, value)


def test_unknown_pre_name_is_refused_with_neighbours():
    with pytest.raises(UnsupportedVocab, match=r"'qwen3'.*nearest known: qwen35, qwen2"):
        resolve("qwen3", model="gpt2")


def test_missing_pre_is_default_and_gemma4_model_forces_gemma4():
    assert (resolve(None, model="gpt2").pre_type, resolve("", model="gpt2").pre_type) == ("default", "default")
    spec = resolve("gpt-2", model="gemma4")
    assert (spec.name, spec.pre_type, spec.force_add_bos) == ("gemma4", "gemma4", True)


def test_non_bpe_models_ignore_pre():
    assert resolve("no-such-name", model="llama").pre_type == "default"


def test_registry_refuses_duplicates_and_lists_known_names():
    with pytest.raises(ValueError, match="registered twice"):
        pt.register("gpt2", "x")
    with pytest.raises(UnsupportedVocab, match=r"known: .*qwen2"):
        pt.get("qwen3")


# --- every name against the live oracle ----------------------------------------------------

def _differential(pre: str, n: int) -> list[str]:
    from harness.golden.records import evaluate_case
    from harness.oracle.llama import LlamaOracle
    from tokenizer import Tokenizer

    path = synthetic_or_skip(f"pre-{pre}")
    ours, oracle = Tokenizer.from_gguf(path), LlamaOracle(path)
    failures = []
    try:
        for i, data in enumerate(inputs(f"pre-{pre}", n)):
            case = {"id": str(i), "bytes": data.hex()}
            try:
                got = evaluate_case(ours, case)
            except Exception as exc:  # noqa: BLE001 - a failing case
                got = repr(exc)
            if got != evaluate_case(oracle, case):
                failures.append(f"case {i}: {data!r}")
    finally:
        oracle.close()
    return failures


SAFE_NAMES = [pytest.param(p, id=p) for p in sorted(PRE_NAMES) if p != "whitespace"]


@pytest.mark.oracle
@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("pre", SAFE_NAMES)
def test_pre_name_differential(pre, budget):
    failures = _differential(pre, budget)
    assert not failures, f"{len(failures)} of {budget} differ: {failures[:5]}"


WHITESPACE_CASES = [
    pytest.param(b"hello world", False, id="words"),
    pytest.param(b"x\ty\n", False, id="tab-newline"),
    pytest.param(b" ", False, id="lone-space"),
    pytest.param(b"a  b", True, id="double-space"),
    pytest.param("x \u2003y".encode(), True, id="space-em-space"),
]


@pytest.mark.oracle
def test_whitespace_pre_aborts_where_llama_does():
    """pre 'whitespace' on a gpt2 model: llama.cpp's find_bpe_rank asserts on a space in a symbol.

    We raise `LlamaCppAbort` on exactly those inputs and agree elsewhere.
    """
    from harness.golden.records import evaluate_case
    from harness.oracle.session import OracleCrash, OracleSession
    from tokenizer import Tokenizer
    from tokenizer.unicode import LlamaCppAbort

    path = synthetic_or_skip("pre-whitespace")
    ours = Tokenizer.from_gguf(path)
    with OracleSession(path, timeout=60) as session:
        for param in WHITESPACE_CASES:
            data, aborts = param.values
            case = {"id": param.id, "bytes": data.hex()}
            if aborts:
                with pytest.raises(OracleCrash):
                    session.evaluate(case)
                with pytest.raises(LlamaCppAbort):
                    evaluate_case(ours, case)
            else:
                assert evaluate_case(ours, case) == session.evaluate(case), param.id


@pytest.mark.parametrize("name", sorted(pt.REGISTRY))
def test_memoised_split_equals_in_context_split(name):
    """`Splitter.split` memoises later stages per piece; it must equal running them in context."""
    from tokenizer.pretokenize.splitter import Splitter, Text
    from tokenizer.unicode import decode_lenient

    splitter = Splitter.for_pretokenizer(pt.REGISTRY[name])
    for data in inputs(f"memo-{name}", 40):
        cps = decode_lenient(data) * 2  # repeated, so the second half hits the memo
        assert splitter.split(cps) == [cps[a:b] for a, b in splitter.spans(Text(cps))], data
