"""A golden's file identity (harness.golden.identity) and `compare --golden DIR --model PATH`.

The identity hashes only the bytes before the tensor data, so a multi-GB model
is checked by reading its metadata; the vocabulary here is the shipped
llama-spm file, made "large" by a sparse 2 GiB tail of tensor data.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from harness.golden.identity import identity, mismatch

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden" / "ggml-vocab-llama-spm.json"


@pytest.fixture
def big_model(tmp_path, require_vocab) -> Path:
    """llama-spm's GGUF with 2 GiB of (sparse) tensor data appended."""
    path = tmp_path / "ggml-vocab-llama-spm.gguf"
    shutil.copyfile(require_vocab("llama-spm"), path)
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size + (2 << 30))
    return path


def test_identity_reads_the_metadata_not_the_tensor_data(big_model):
    start = time.perf_counter()
    header = identity(big_model)
    assert time.perf_counter() - start < 20  # hashing 2 GiB would take far longer on this machine class
    assert header["hashed"] == "metadata" and header["hashed_bytes"] < 2 << 20
    assert header["size"] == big_model.stat().st_size
    assert mismatch(header, big_model) is None


def test_a_changed_tensor_byte_keeps_the_identity_a_changed_metadata_byte_does_not(big_model):
    header = identity(big_model)
    with big_model.open("r+b") as f:
        f.seek(header["hashed_bytes"] + 12345)
        f.write(b"\x01")  # tensor data: no tokenizer reads it
    assert mismatch(header, big_model) is None
    with big_model.open("r+b") as f:
        f.seek(header["hashed_bytes"] - 100)
        f.write(b"\xff")
    assert "differ" in mismatch(header, big_model)


def test_size_is_checked_first_and_named(tmp_path, require_vocab):
    path = tmp_path / "x.gguf"
    shutil.copyfile(require_vocab("llama-spm"), path)
    header = identity(path)
    with path.open("ab") as f:
        f.write(b"\0")
    assert "size" in mismatch(header, path)


def test_a_golden_recorded_with_a_whole_file_hash_is_still_checked(tmp_path, require_vocab):
    import hashlib
    path = tmp_path / "x.gguf"
    shutil.copyfile(require_vocab("phi-3"), path)
    data = path.read_bytes()
    legacy = {"file": path.name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}  # no "hashed"
    assert mismatch(legacy, path) is None
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the tail counts in a whole-file hash
    assert "content differ" in mismatch(legacy, path)


def _compare(tmp_path, capsys, *args: str) -> tuple[int, str]:
    from harness.cli import main
    code = main(["compare", "--report", str(tmp_path / "r"), "--quiet", *args])
    return code, capsys.readouterr().err


def test_compare_replays_a_golden_against_a_model_given_by_path(tmp_path, capsys, require_vocab):
    goldens, elsewhere = tmp_path / "goldens", tmp_path / "models"
    goldens.mkdir()
    elsewhere.mkdir()
    shutil.copyfile(GOLDEN, goldens / GOLDEN.name)
    model = elsewhere / "ggml-vocab-llama-spm.gguf"
    shutil.copyfile(require_vocab("llama-spm"), model)
    code, err = _compare(tmp_path, capsys, "--golden", str(goldens), "--model", str(model))
    assert code == 0, err


def test_compare_with_the_wrong_model_names_what_differs(tmp_path, capsys, require_vocab):
    goldens = tmp_path / "goldens"
    goldens.mkdir()
    shutil.copyfile(GOLDEN, goldens / GOLDEN.name)
    wrong = tmp_path / "ggml-vocab-llama-spm.gguf"
    shutil.copyfile(require_vocab("phi-3"), wrong)
    code, err = _compare(tmp_path, capsys, "--golden", str(goldens), "--model", str(wrong))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(wrong) in err and "size" in err and GOLDEN.name in err


def test_compare_without_the_model_says_where_it_looked(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "empty-cache"))
    goldens = tmp_path / "goldens"
    goldens.mkdir()
    shutil.copyfile(GOLDEN, goldens / GOLDEN.name)
    code, err = _compare(tmp_path, capsys, "--golden", str(goldens))
    assert code == 2, err
    assert "ggml-vocab-llama-spm.gguf" in err and str(goldens) in err and "--model PATH" in err
