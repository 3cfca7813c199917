"""A class for every conversion difference, found by experiment (harness.references.class_experiments).

Each class has a planted twin: a tiny original built in the test by its own library
(tests/reference_files.py) and the GGUF the converter would write for it. The ids
compared are llama.cpp's (in an oracle worker) and the original library's (in the
reference child); the facts a class names come from llama.cpp's pinned sources
(`src/llama-vocab.cpp`, `src/unicode-data.cpp`) or Python's `unicodedata`, never from
our engine's tables.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from harness.references import causes, class_experiments, llama_facts
from tests import reference_files as rf
from tests.llama_sources import llama_source

ALL = [(False, False), (False, True), (True, False), (True, True)]
OFF = [(False, False), (True, False)]  # parse_special off
GARAY = "\U00010d50"  # GARAY CAPITAL LETTER A, Unicode 16.0: after llama.cpp's 15.1 tables


def finder(tmp: Path, gguf: Path, spec: str) -> causes.Finder:
    (tmp / "work").mkdir(exist_ok=True)
    return causes.Finder(gguf, spec, tmp / "work")


@pytest.fixture(scope="module")
def bpe_twin(tmp_path_factory):
    """A byte-level BPE original (GPT-2's split, so the GGUF's `gpt-2` regex is the original's) with `</s>` as
    a non-special added token, as a Gemma-style tokenizer.json has it; the GGUF types `</s>` USER_DEFINED, as
    the converter's get_vocab_base does (it does not "look special")."""
    tmp = tmp_path_factory.mktemp("bpe-twin")
    original = rf.with_added(rf.bpe_json(tmp / "o" / "tokenizer.json", ignore_merges=False, bos=False), ("</s>",))
    return original, rf.bpe_gguf(original, tmp / "twin.gguf", pre="gpt-2", add_bos=False)


@pytest.fixture(scope="module")
def unigram_twin(tmp_path_factory):
    """A SentencePiece Unigram model (nmt_nfkc, byte fallback) written `llama` by the converter's
    _set_vocab_sentencepiece: llama.cpp merges by score instead of the Viterbi search, and normalizes nothing."""
    tmp = tmp_path_factory.mktemp("unigram-twin")
    model = rf.unigram_model(tmp / "o" / "tokenizer.model")
    return model, rf.spm_gguf(model, tmp / "twin.gguf")


@pytest.mark.oracle
def test_a_letter_newer_than_llama_cpps_tables_is_the_unicode_version_class(tmp_path, bpe_twin):
    """Before 's, the original keeps the contraction whole after a Unicode 16 letter; llama.cpp, for which the
    code point is unassigned, does not. An older letter of the same category in its place: both agree."""
    original, gguf = bpe_twin
    with finder(tmp_path, gguf, f"hf:{original.parent}") as f:
        found = f.explain({"id": "u", "text": f"{GARAY}'s"}, ALL).as_dict()
    assert found["cause"] == "unicode-version" and found["class"] == "unicode-version"
    [sub] = found["detail"]["substituted"]
    assert sub["code_point"] == "U+10D50" and sub["category"] == "Lu" and sub["as"] == "U+0041"
    assert "Unicode 15.1, src/unicode-data.cpp" in sub["newer_than"]  # llama.cpp's version, from its own source
    assert all(row["original"] == row["llama.cpp"] for row in found["evidence"])


@pytest.mark.oracle
def test_a_non_special_token_the_loader_retypes_is_the_loader_retyping_class(tmp_path, bpe_twin):
    """`</s>` is in llama-vocab.cpp's end-of-generation list: the loader makes it CONTROL whatever the GGUF
    says, so under parse_special off llama.cpp splits what the original matches whole."""
    original, gguf = bpe_twin
    with finder(tmp_path, gguf, f"hf:{original.parent}") as f:
        candidate = next(c for c in f.candidates if c.name == "loader-retyping")
        found = f.explain({"id": "s", "text": "a</s>b"}, OFF).as_dict()
    assert found["cause"] == "loader-retyping" and found["class"] == "loader-retyping"
    assert "'</s>' is in llama-vocab.cpp's end-of-generation (EOG) text list" in candidate.what
    assert "its type will be overridden" in candidate.what  # the loader's own words, read from its source


@pytest.mark.oracle
def test_a_unigram_model_written_llama_is_the_model_type_class(tmp_path, unigram_twin):
    """The same normalized text, other pieces: running the GGUF as UGM (`t5`) makes both agree."""
    model, gguf = unigram_twin
    with finder(tmp_path, gguf, f"spm:{model}") as f:
        assert f.original_model == "Unigram" and f.models_differ
        found = f.explain({"id": "m", "text": "the cat sat on the mat"}, [(False, False)]).as_dict()
        assert not next(c for c in f.candidates if c.name == "model-type").exact  # repair names it, never writes it
    assert found["cause"] == "model-type" and found["class"] == "model-type"


@pytest.mark.oracle
def test_a_normalizer_no_key_carries_is_the_normalizer_class(tmp_path, unigram_twin):
    """nmt_nfkc maps fullwidth letters and ligatures; llama.cpp's SPM does not: both sides given the
    original's own normalized text (sentencepiece's normalize, asked of the reference child) agree."""
    model, gguf = unigram_twin
    with finder(tmp_path, gguf, f"spm:{model}") as f:
        for text in ("ＡＢＣ", "ﬁne"):
            found = f.explain({"id": "n", "text": text}, [(False, False)]).as_dict()
            assert found["cause"] == "original-normalized" and found["class"] == "normalizer", (text, found)


def test_a_case_nothing_explains_is_classed_by_its_pieces():
    """Same text in different pieces: segmentation only (the model type when the two models differ); other
    texts: normalization; a side with no ids: unexplained."""
    tokens = ["<s>", "a", "b", "ab", "c"]
    types = [3, 1, 1, 1, 1]
    assert class_experiments.pieces_class([([0, 3], [1, 2])], tokens, types, False) == "segmentation-only"
    assert class_experiments.pieces_class([([3], [1, 2])], tokens, types, True) == "model-type"
    assert class_experiments.pieces_class([([3], [1, 4])], tokens, types, False) == "normalization"
    assert class_experiments.pieces_class([([3], None)], tokens, types, False) == "unexplained"
    assert class_experiments.models_differ("Unigram", "spm") and not class_experiments.models_differ("BPE", "spm")


def test_the_facts_come_from_llama_cpps_own_sources():
    """The retyping lists and the Unicode tables are read from the pinned llama-vocab.cpp and unicode-data.cpp."""
    vocab = llama_source("llama-vocab.cpp")
    llama_source("unicode-data.cpp")
    rules = {r.role: r.texts for r in llama_facts.retyping_rules() or ()}
    assert "</s>" in rules["end-of-generation (EOG)"] and "<｜fim▁hole｜>" in rules["fill-in-the-middle suffix"]
    assert all(f't.first == "{t}"' in vocab for texts in rules.values() for t in texts)
    assert llama_facts.llama_version() == "15.1"
    assert not llama_facts.llama_assigned(0x10D50) and llama_facts.llama_assigned(0x11F00)
    assert llama_facts.tables_version(llama_facts.python_assigned) == unicodedata.unidata_version.rsplit(".", 1)[0]
    assert class_experiments.substituted(f"x{GARAY}'s") == "xA's"
    assert class_experiments.substituted("plain ascii, é") == "plain ascii, é"  # old code points stay
