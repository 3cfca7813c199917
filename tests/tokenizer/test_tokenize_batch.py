"""`Tokenizer.tokenize_batch`, and the per-call fast paths, against llama.cpp.

The batch shares work between its texts (BPE merges the words new to its cache
once for the whole batch, in numpy when they are many), so each of its paths is
checked here against llama.cpp: every shipped golden's cases as one batch per flag
combination (the ids llama.cpp recorded; the merge word by word and in numpy),
and the diverse corpus's documents, with special tokens between words, against
the live oracle. Expected ids come from llama.cpp only, never from our engine.
"""

from __future__ import annotations

import pytest

from harness.golden import files as goldens
from harness.golden.records import FLAGS
from harness.inputs.documents import DIVERSE
from harness.inputs.strategies import case_input
from tests.tokenizer.test_bpe_batch import golden_and_gguf
from tokenizer import Tokenizer
from tokenizer.engines import bpe


def _shipped_goldens() -> list:
    return [pytest.param(p, id=p.stem) for p in goldens.golden_files(goldens.GOLDEN_DIR)
            if p.name.startswith("ggml-vocab-")]


# word by word is the path of a short call, which every golden test takes already: the batch's in the nightly
@pytest.mark.parametrize("merge", ["numpy", pytest.param("word-by-word", marks=pytest.mark.nightly)])
@pytest.mark.parametrize("path", _shipped_goldens())
def test_batch_of_every_golden_case_gives_llama_ids(path, merge, monkeypatch):
    """All of a golden's cases in one call per flag combination, a fresh tokenizer each."""
    monkeypatch.setattr(bpe, "BATCH_MIN", 0 if merge == "numpy" else 1 << 40)
    golden, gguf_path = golden_and_gguf(path)
    bad = []
    for k, (add, parse) in enumerate(FLAGS):
        cases = [(case, case["encode"][k]["ids"]) for case in golden["cases"]
                 if len(case.get("encode") or []) > k and "ids" in case["encode"][k]]
        got = Tokenizer.from_gguf(gguf_path).tokenize_batch([case_input(c) for c, _ in cases],
                                                             add_special=add, parse_special=parse)
        bad += [f"{c['id']} add_special={add} parse_special={parse}"
                for (c, expected), ids in zip(cases, got) if ids != expected]
    assert not bad, f"{len(bad)} cases differ from llama.cpp, e.g. {bad[:5]}"


BATCH_VOCABS = ["llama-bpe", "qwen2", "gpt-2", "gemma-4", "llama-spm", "phi-3", "bert-bge", "nomic-bert-moe"]


def _documents(ours: Tokenizer) -> list[str]:
    """400 lines of the diverse corpus, every tenth with the vocabulary's special texts in it, and an empty one."""
    lines = [t for t in DIVERSE.read_text(encoding="utf-8").split("\n")
             if t.strip()][:400]
    specials = [ours.vocab.texts[t].decode("utf-8", "replace") for t in ours.vocab.special_tokens[:8]]
    for i in range(0, len(lines), 10):
        words = lines[i].split(" ")
        lines[i] = " ".join(words[:3] + [specials[i // 10 % len(specials)]] + words[3:]) if specials else lines[i]
    return [*lines, ""]


# two flag pairs by default, the other two in the nightly: the batch path is the same code under every pair
DOCUMENT_FLAGS = [pytest.param(add, parse, id=f"{int(add)}-{int(parse)}",
                               marks=() if add == parse else pytest.mark.nightly) for add, parse in FLAGS]


@pytest.mark.parametrize("name", BATCH_VOCABS)
@pytest.mark.parametrize(("add", "parse"), DOCUMENT_FLAGS)
def test_batch_of_documents_gives_llama_ids(pair_for, name, add, parse):
    """The documents in one `tokenize_batch` call and one `tokenize` call each, each with a
    fresh tokenizer: llama.cpp's ids for every document."""
    ours, llama = pair_for(name)
    docs = _documents(ours)
    expected = [llama.tokenize(d.encode(), add_special=add, parse_special=parse) for d in docs]
    got = Tokenizer.from_gguf(_path(name)).tokenize_batch(docs, add_special=add, parse_special=parse)
    bad = [i for i, (a, b) in enumerate(zip(got, expected)) if a != b]
    assert not bad, f"{len(bad)} documents differ in the batch, first {docs[bad[0]][:60]!r}"
    one = Tokenizer.from_gguf(_path(name))
    bad = [i for i, d in enumerate(docs) if one.tokenize(d, add_special=add, parse_special=parse) != expected[i]]
    assert not bad, f"{len(bad)} documents differ one call each, first {docs[bad[0]][:60]!r}"


def _path(name: str):
    from harness.models.paths import resolve

    return resolve(name)


def test_batch_takes_str_and_bytes_and_refuses_other_types(pair_for):
    ours, llama = pair_for("llama-bpe")
    kw = {"add_special": False, "parse_special": False}
    expected = [llama.tokenize(t, **kw) for t in (b"Hello world", b"\xff caf\xc3")]
    assert ours.tokenize_batch(["Hello world", b"\xff caf\xc3"], **kw) == expected
    assert ours.tokenize_batch([], **kw) == []
    with pytest.raises(TypeError, match="str or bytes"):
        ours.tokenize_batch([1], **kw)  # type: ignore[list-item]
