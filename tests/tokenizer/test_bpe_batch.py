"""The batch merge of `tokenizer.engines.bpe` against llama.cpp's goldens.

A long text merges all its new words in one numpy batch (`Merger.merge_batch`);
a short one merges word by word (`Merger.merge_ids`), and that is what the golden
replay exercises.  Here every BPE golden's cases go through the batch path (the
threshold set to 0), and the ids must be the ones llama.cpp recorded.  Expected
ids come from the golden files only, never from our engine.
"""

from __future__ import annotations

import pytest

from harness.golden import files as goldens
from harness.golden.records import FLAGS
from harness.inputs.strategies import case_input
from harness.runs.replay import locate
from tokenizer import Tokenizer
from tokenizer.engines import bpe


def _bpe_goldens() -> list:
    found = []
    for path in goldens.golden_files(goldens.GOLDEN_DIR):
        golden = goldens.load_golden(path, check=False)
        if (golden.get("vocab") or {}).get("vocab_type") == "bpe":
            found.append(pytest.param(path, id=path.stem))
    return found


def _batch_mismatches(golden: dict, tok: Tokenizer) -> list[str]:
    bad = []
    for case in golden["cases"]:
        if "encode" not in case:
            continue  # a long document, recorded as a digest: the golden replay checks it (harness.golden.digest)
        data = case_input(case)
        for (add, parse), expected in zip(FLAGS, case.get("encode") or []):
            if "ids" not in expected:
                continue  # llama.cpp crashed or refused (no "encode"/"ids"): the replay judges those
            ids = tok.tokenize(data, add_special=add, parse_special=parse)
            if ids != expected["ids"]:
                bad.append(f"{case['id']} add_special={add} parse_special={parse}: {data[:40]!r}")
    return bad


def golden_and_gguf(path):
    """A golden and the path of its GGUF; skips when llama.cpp refused it or the file is not built."""
    golden = goldens.load_golden(path)
    if golden.get("load_error"):
        pytest.skip("llama.cpp refuses this vocabulary")
    gguf_path, why = locate(golden["gguf"], path.parent)
    if gguf_path is None:
        pytest.skip(f"{why} (python -m harness fetch / python -m harness synth)")
    return golden, gguf_path


@pytest.mark.parametrize("path", _bpe_goldens())
def test_batch_merge_matches_golden(path, monkeypatch):
    golden, gguf_path = golden_and_gguf(path)
    monkeypatch.setattr(bpe, "BATCH_MIN", 0)  # every text, however short, as one batch
    bad = _batch_mismatches(golden, Tokenizer.from_gguf(gguf_path))
    assert not bad, f"{len(bad)} cases differ from llama.cpp, e.g. {bad[:5]}"
