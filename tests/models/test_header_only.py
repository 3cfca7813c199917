"""A GGUF file cut after its metadata is checked through a vocab-only copy (harness/models/header_only.py).

The cut files are built here: a shipped vocabulary's metadata with two
tensors (our writer, harness/models/gguf_writer.py), cut inside the tensor data,
inside the tensor directory, or as the first shard of a split upload. A file
cut inside its metadata stays an input error naming the offset.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.models import gguf_writer, header_only
from tokenizer.errors import GGUFError
from tokenizer.gguf import reader as gguf
from tokenizer.gguf.constants import ValueType

ROOT = Path(__file__).resolve().parents[2]
TENSORS = [("token_embd.weight", (1024, 256), "F32"), ("output.weight", (1024, 256), "F32")]
SPLIT = {"split.no": 0, "split.count": 3, "split.tensors.count": 6}
SPLIT_TYPES = {"split.no": (ValueType.UINT16, None), "split.count": (ValueType.UINT16, None),
               "split.tensors.count": (ValueType.INT32, None)}


def model_bytes(vocab: Path, *, split: bool = False) -> tuple[bytes, gguf.GGUFFile]:
    """A whole model: `vocab`'s metadata (plus split keys), two 1 MiB tensors."""
    src = gguf.read(vocab)
    meta, types = dict(src.metadata), dict(src.types)
    if split:
        meta, types = meta | SPLIT, types | SPLIT_TYPES
    data = gguf_writer.build(meta, types=types, version=src.version, tensors=TENSORS)
    return data, gguf.parse(data)


def cut_file(tmp_path: Path, vocab: Path, where: str, name: str = "cut.gguf", *, split: bool = False) -> Path:
    data, full = model_bytes(vocab, split=split)
    ends = {"in-data": full.data_offset + 1000, "in-tensor-directory": full.data_offset - 40,
            "after-metadata": gguf.parse(data, metadata_only=True).data_offset,
            "in-metadata": 200_000}
    path = tmp_path / name
    path.write_bytes(data[:ends[where]])
    return path


@pytest.fixture
def spm(require_vocab, tmp_path: Path, monkeypatch) -> Path:
    """llama-spm's shipped file; then a cache of the test's own for the vocab-only copies."""
    path = require_vocab("llama-spm")
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    return path


@pytest.mark.parametrize("where", ["in-data", "in-tensor-directory", "after-metadata"])
def test_a_file_cut_after_its_metadata_gives_the_vocabulary_file_byte_for_byte(tmp_path, spm, where):
    cut = cut_file(tmp_path, spm, where)
    with pytest.raises(GGUFError):
        gguf.read(cut)  # the strict reader refuses the cut file, as llama.cpp does
    head = gguf.read(cut, metadata_only=True)
    assert head.metadata["tokenizer.ggml.tokens"] == gguf.read(spm).metadata["tokenizer.ggml.tokens"]
    assert head.tensors == [] and head.data_offset == spm.stat().st_size  # where the metadata ends
    found = header_only.find_cut(cut)
    assert found is not None and found.n_tensors == 2 and found.size == cut.stat().st_size
    copy = header_only.vocab_only(found)
    # llama.cpp's own vocab-only file is exactly the metadata with 0 tensors
    assert copy.name == "cut.gguf" and copy.read_bytes() == spm.read_bytes()


def test_the_first_shard_of_a_split_upload_loses_only_its_split_keys(tmp_path, spm):
    cut = cut_file(tmp_path, spm, "in-data", "model-00001-of-00003.gguf", split=True)
    copy = header_only.vocab_only(header_only.find_cut(cut))
    assert copy.name == "model-00001-of-00003.gguf"
    assert copy.read_bytes() == spm.read_bytes()  # llama.cpp would look for shards 2 and 3 otherwise


def test_whole_files_and_files_cut_inside_their_metadata_are_left_alone(tmp_path, spm):
    whole = tmp_path / "whole.gguf"
    whole.write_bytes(model_bytes(spm)[0])
    assert header_only.find_cut(whole) is None
    assert header_only.find_cut(spm) is None  # no tensors: nothing can be cut off
    inside = cut_file(tmp_path, spm, "in-metadata")
    assert header_only.find_cut(inside) is None
    with pytest.raises(GGUFError, match=r"tokenizer.ggml.tokens.*\(offset 0x279\)"):
        gguf.read(inside, metadata_only=True)


@pytest.mark.oracle
def test_llama_cpp_refuses_the_cut_file_and_loads_the_copy(tmp_path, spm):
    from harness.oracle.llama import LlamaOracle, OracleError

    cut = cut_file(tmp_path, spm, "in-data")
    with pytest.raises(OracleError, match="not within the file bounds"):
        LlamaOracle(cut)  # src/llama-model-loader.h, llama_tensor_weight: even with vocab_only
    with LlamaOracle(header_only.vocab_only(header_only.find_cut(cut))) as oracle:
        assert oracle.tokenize("Hello world", add_special=True, parse_special=False)[0] == 1


def harness(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600, check=False)


def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "Hello world"}\n{"id": "b", "text": " two  spaces\\n"}\n')
    return path


@pytest.mark.oracle
def test_run_record_and_compare_check_a_cut_file_and_say_so(tmp_path, spm):
    cut = cut_file(tmp_path, spm, "in-data", "model-00001-of-00003.gguf", split=True)
    common = ["--model", str(cut), "--corpus", str(corpus(tmp_path))]
    done = harness("run", *common, "--no-default-corpora", "--report", str(tmp_path / "r"), "--quiet")
    assert done.returncode == 0, (done.stdout, done.stderr)
    row = json.loads((tmp_path / "r" / "report.json").read_text())["summary"]["per_model"]["model-00001-of-00003"]
    source = row["source"]
    assert source["kind"] == "header-only" and source["n_tensors"] == 2 and source["size"] == cut.stat().st_size
    assert source["header_bytes"] == spm.stat().st_size + 22 + 25 + 35  # the three split.* records
    assert any(n.startswith("checked header-only: model-00001-of-00003.gguf is cut") for n in row["notes"])
    assert "checked header-only: model-00001-of-00003.gguf" in (tmp_path / "r" / "report.html").read_text()

    done = harness("record", *common, "--out", str(tmp_path / "g"))
    assert done.returncode == 0 and "checked header-only" in done.stdout, (done.stdout, done.stderr)
    golden = json.loads((tmp_path / "g" / "model-00001-of-00003.json").read_text())
    assert golden["gguf"]["source"]["header_sha256"] == source["header_sha256"] and golden["vocab"] is not None
    done = harness("compare", "--golden", str(tmp_path / "g"), "--model", str(cut),
                   "--report", str(tmp_path / "r2"), "--quiet")
    assert done.returncode == 0, (done.stdout, done.stderr)


@pytest.mark.oracle
def test_a_file_cut_inside_its_metadata_is_still_not_checked_naming_the_offset(tmp_path, spm):
    cut = cut_file(tmp_path, spm, "in-metadata")
    done = harness("run", "--model", str(cut), "--corpus", str(corpus(tmp_path)), "--no-default-corpora",
                   "--report", str(tmp_path / "r"), "--quiet")
    assert done.returncode == 2 and done.stdout.startswith("NOT CHECKED"), (done.stdout, done.stderr)
    reason = json.loads((tmp_path / "r" / "report.json").read_text())["summary"]["not_checked"]["cut"]
    assert "tokenizer.ggml.tokens" in reason and "offset 0x279" in reason
