"""Long documents in the corpora and goldens (harness/inputs/documents.py, harness/golden/digest.py).

Goldens are recorded by `python -m harness record` from llama.cpp and never edited by hand;
these tests check the documents themselves, the digest format on our engine's own records
(a format round trip: no expected ids come from our engine), and that the committed goldens
hold the documents and replay them.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from harness.compare.findings import findings
from harness.compare.subject import Subject, gguf_texts, reference_table
from harness.golden import digest
from harness.golden import files as goldens
from harness.golden.records import evaluate_case
from harness.inputs import corpus, documents
from harness.models.model import Model
from harness.models.shipped import SHIPPED

# The shared mixed document before any vocabulary's special tokens are planted: a builder
# change shows here first, and every golden then needs re-recording (docs/golden.md).
MIXED_TEMPLATE_SHA256 = "69174b0f535a3b46a24606287535ec4f4ef613d5b786baf6c43485d867e8b0bd"


def _lines():
    return [line for line in documents.diverse_text().split("\n") if line]


def test_the_shared_documents_are_deterministic_and_long():
    first, again = documents.documents(None, "full"), documents.documents(None, "full")
    assert first == again
    sizes = {c["id"]: c["document"]["size"] for c in first}
    assert sizes["doc-diverse"] == 462_588
    assert 64 << 10 < sizes["doc-mixed"] < 128 << 10      # past a 64 KiB buffer
    assert 800 << 10 < sizes["doc-large"] < 1 << 20
    for case in first:
        assert hashlib.sha256(case["text"].encode()).hexdigest() == case["document"]["sha256"]


def test_the_mixed_template_is_pinned():
    template = documents.mixed_template(_lines())
    assert hashlib.sha256(template.encode()).hexdigest() == MIXED_TEMPLATE_SHA256
    assert template.count(documents.SLOT) > 50
    for part in ("def parse(", "\t\t", "\r\n", " " * 33, "\u3000"):
        assert part in template


def test_a_changed_diverse_corpus_is_refused(monkeypatch):
    monkeypatch.setattr(documents, "DIVERSE_SHA256", "0" * 64)
    with pytest.raises(documents.DocumentError, match="not the pinned"):
        documents.documents(None)


def test_the_level_switch_leaves_them_out(monkeypatch):
    monkeypatch.setenv(documents.LEVEL_ENV, "off")
    assert documents.documents(None) == []
    monkeypatch.setenv(documents.LEVEL_ENV, "default")
    assert [c["id"] for c in documents.documents(None)] == ["doc-diverse", "doc-mixed"]
    monkeypatch.setenv(documents.LEVEL_ENV, "mixed")
    assert [c["id"] for c in documents.documents(None)] == ["doc-mixed"]
    monkeypatch.setenv(documents.LEVEL_ENV, "full")
    assert [c["id"] for c in documents.documents(None)] == ["doc-diverse", "doc-mixed", "doc-large"]


@pytest.mark.vocab
def test_each_vocabulary_gets_its_own_special_tokens_in_context(require_vocab):
    path = require_vocab("llama-bpe")
    mixed = next(c for c in corpus.default_corpora(path) if c["id"] == "doc-mixed")
    planted = documents.special_texts(path)
    assert planted and all(token in mixed["text"] for token in planted)
    assert documents.SLOT not in mixed["text"]


@pytest.fixture(scope="module")
def spm_record(require_vocab):
    from tokenizer import Tokenizer

    path = require_vocab("llama-spm")
    case = next(c for c in documents.documents(path) if c["id"] == "doc-mixed")
    return path, case, evaluate_case(Tokenizer.from_gguf(path), case)


@pytest.mark.vocab
def test_a_digest_resolves_back_to_the_record_it_was_made_from(spm_record):
    _, case, record = spm_record
    packed = digest.compact(record, case)
    assert "text" not in packed and "encode" not in packed
    assert len(json.dumps(packed)) < len(json.dumps(record)) / 20
    assert digest.resolve({**packed, "text": case["text"]}, record)["encode"] == record["encode"]


@pytest.mark.vocab
def test_a_changed_id_is_localised_to_its_block_and_the_finding_stays_small(spm_record):
    path, case, record = spm_record
    packed = {**digest.compact(record, case), "text": case["text"]}
    changed = json.loads(json.dumps(record))
    changed["encode"][0]["ids"][1000] += 1
    resolved = digest.resolve(packed, changed)
    assert resolved["encode"][0]["ids"] is None
    assert resolved["encode"][0]["digest_diff"]["start"] == 768  # block 3 of 256 ids
    model = Model("llama-spm", path, "llama-spm")
    table = reference_table(gguf_texts(model), {}, None)
    subject = Subject(model=model, engine=None, table=table,
                      engine_table=table, command=lambda case_id: case_id)
    found = findings(subject, packed, resolved, changed)
    kinds = [kind for kind, _ in found]
    assert kinds[0] == "mismatches"
    entry = found[0][1]
    assert entry["category"] == "long document" and entry["first_diff"] == 768
    assert len(entry["got"]) <= 2 * 48 and len(entry["text"]) <= 600
    assert len(json.dumps(found)) < 50_000


@pytest.mark.vocab
def test_a_golden_with_a_document_validates_and_a_changed_document_is_refused(spm_record, tmp_path):
    path, case, record = spm_record
    golden = goldens.new_golden(gguf={"file": path.name, "sha256": "0" * 64, "size": 1},
                                llama={"llama_cpp_python": "x"}, tokenizer={"meta": {}}, vocab=None,
                                cases=[digest.compact(record, case)])
    written = goldens.write_golden(tmp_path / "g.json", golden)
    loaded = goldens.load_golden(written)
    assert documents.attach_inputs(loaded["cases"], path)[0]["text"] == case["text"]
    loaded["cases"][0]["document"]["sha256"] = "f" * 64
    with pytest.raises(documents.DocumentError, match="re-record the golden with python -m harness record"):
        documents.attach_inputs(loaded["cases"], path)


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in SHIPPED])
def test_every_shipped_golden_holds_the_documents_as_digests(name):
    golden = goldens.load_golden(goldens.GOLDEN_DIR / f"ggml-vocab-{name}.json", check=False)
    docs = {c["id"]: c for c in golden["cases"] if "document" in c}
    assert set(docs) == {"doc-diverse", "doc-mixed"}
    for case in docs.values():
        assert "digest" in case or "crash" in case


class _Counting:
    """An API whose detokenize is counted (ids and bytes are not what this test checks)."""

    def __init__(self) -> None:
        self.detokenized = 0

    def tokenize(self, data, *, add_special: bool, parse_special: bool):
        return [1] * (len(data) // 1000)

    def detokenize(self, ids, *, remove_special: bool, unparse_special: bool):
        self.detokenized += 1
        return b"x" * len(ids)


@pytest.mark.parametrize(("size", "calls"), [pytest.param(100, 16, id="short: every call"),
                                             pytest.param(96 << 10, 4, id="document: once per id list")])
def test_a_long_inputs_repeated_id_lists_are_detokenized_once(size, calls):
    api = _Counting()
    record = evaluate_case(api, {"id": "x", "text": "a" * size})
    assert api.detokenized == calls
    assert all(len(e["detokenize"]) == 4 for e in record["encode"])
