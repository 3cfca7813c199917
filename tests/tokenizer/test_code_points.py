"""The record of llama.cpp's every-code-point answers (tests/tokenizer/code_points.py): a batch that
differs is found, a record of another release or file is refused. No oracle: a planted tokenizer."""

from __future__ import annotations

import json

import pytest

from tests.tokenizer import code_points as cp

SEP = b"<sep>"


def _length(data: bytes) -> list[int]:
    """A stand-in tokenizer: one id, the input's length."""
    return [len(data)]


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """A record of `_length` on a planted GGUF file, made as `record` writes one."""
    monkeypatch.setattr(cp, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(cp, "llama_version", lambda: "9.9.9")
    gguf = tmp_path / "v.gguf"
    gguf.write_bytes(b"GGUF planted")
    cp.RECORDS.mkdir()
    body = {"llama_cpp_python": "9.9.9", "gguf_sha256": cp.sha256_file(gguf), "batch": cp.BATCH,
            "digests": [cp.digest(_length(data)) for _, data in cp.batches(SEP)]}
    cp.record_path("v").write_text(json.dumps(body), encoding="utf-8")
    return gguf


def test_an_engine_that_agrees_differs_nowhere(recorded):
    assert cp.stale("v", recorded) is None
    assert cp.differing("v", _length, SEP) == []


def test_the_batch_that_differs_is_named_by_its_first_code_point(recorded):
    start = 300 * cp.BATCH
    first = cp.probe(start)

    def off_by_one(data: bytes) -> list[int]:
        return [len(data) + data.startswith(first)]

    assert cp.differing("v", off_by_one, SEP) == [start]


@pytest.mark.parametrize(("change", "said"), [
    ({"llama_cpp_python": "0.3.1"}, "recorded with llama-cpp-python 0.3.1, this is 9.9.9"),
    ({"gguf_sha256": "0" * 64}, "from another file"),
    ({"batch": 1024}, "another batching"),
    ({"digests": []}, "another batching"),
])
def test_a_record_of_another_release_file_or_batching_is_stale(recorded, change, said):
    where = cp.record_path("v")
    where.write_text(json.dumps({**json.loads(where.read_text()), **change}), encoding="utf-8")
    assert said in (cp.stale("v", recorded) or "")


def test_a_missing_record_is_stale(recorded):
    cp.record_path("v").unlink()
    assert "missing" in (cp.stale("v", recorded) or "")


def test_the_committed_records_cover_every_probe_vocabulary():
    for name in cp.PROBE_VOCABS:
        record = json.loads(cp.record_path(name).read_text(encoding="utf-8"))
        assert record["batch"] == cp.BATCH and len(record["digests"]) == -(-cp.MAX_CODEPOINTS // cp.BATCH)
