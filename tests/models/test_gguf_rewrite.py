"""harness.models.gguf_rewrite: keys rewritten, every other key, the tensor directory and the tensor bytes kept."""

from __future__ import annotations

import hashlib
import os
import resource
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.models import gguf_writer
from harness.models.gguf_rewrite import CHUNK, RewriteError, rewrite_metadata
from tokenizer.gguf.reader import read

META = {"general.architecture": "llama", "general.name": "tiny", "general.alignment": 64,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smaug-bpe",
        "tokenizer.ggml.tokens": ["a", "b", "ab"], "tokenizer.ggml.token_type": [1, 1, 3]}
ROOT = Path(__file__).resolve().parents[2]
TENSORS = [("tok_embd.weight", (8, 3), "F32"), ("odd", (5,), "F16"), ("big", (CHUNK // 2 + 7,), "F32")]


def model_file(path) -> None:
    """A GGUF with three tensors whose data is random bytes (the writer writes zeros: filled in afterwards)."""
    gguf_writer.write(path, META, tensors=TENSORS)
    f = read(path)
    rng = np.random.default_rng(0)
    with open(path, "r+b") as fh:
        for t in f.tensors:
            fh.seek(t.offset)
            fh.write(rng.integers(0, 256, t.nbytes, dtype=np.uint8).tobytes())


def digests(path) -> dict[str, str]:
    f = read(path)
    data = path.read_bytes()
    return {t.name: hashlib.sha256(data[t.offset:t.offset + t.nbytes]).hexdigest() for t in f.tensors}


def test_a_changed_key_keeps_every_other_key_and_the_tensor_bytes(tmp_path):
    src, dst = tmp_path / "x.gguf", tmp_path / "x.fixed.gguf"
    model_file(src)
    done = rewrite_metadata(src, dst, {"tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.add_bos_token": False})
    before, after = read(src), read(dst)
    assert after.metadata["tokenizer.ggml.pre"] == "llama-bpe"
    assert after.metadata["tokenizer.ggml.add_bos_token"] is False
    assert list(after.metadata)[:len(before.metadata)] == list(before.metadata)  # order kept, new key last
    for key in before.metadata:
        if key != "tokenizer.ggml.pre":
            assert np.array_equal(np.asarray(after.metadata[key]), np.asarray(before.metadata[key])), key
            assert after.types[key] == before.types[key], key
    assert after.alignment == 64 and all(t.offset % 64 == 0 for t in after.tensors)
    assert digests(dst) == digests(src) and any(src.read_bytes()[before.data_offset:])
    assert done.tensors_checked == 3 and done.changed == ("tokenizer.ggml.pre", "tokenizer.ggml.add_bos_token")


def test_the_zeroing_rewrite_would_lose_the_tensor_data(tmp_path):
    """The reason this module exists: gguf_writer.rewrite writes zeros, fine for vocab-only files only."""
    src = tmp_path / "x.gguf"
    model_file(src)
    gguf_writer.rewrite(src, tmp_path / "zeroed.gguf", {"tokenizer.ggml.pre": "llama-bpe"})
    assert digests(tmp_path / "zeroed.gguf") != digests(src)


def test_a_key_dropped_and_a_longer_header_move_the_data_but_not_its_bytes(tmp_path):
    src, dst = tmp_path / "x.gguf", tmp_path / "y.gguf"
    model_file(src)
    rewrite_metadata(src, dst, {"tokenizer.ggml.pre": "p" * 1000}, drop=["general.name"])
    assert "general.name" not in read(dst).metadata
    assert read(dst).data_offset != read(src).data_offset and digests(dst) == digests(src)


def test_a_vocab_only_file_is_rewritten_too(tmp_path):
    src, dst = tmp_path / "v.gguf", tmp_path / "w.gguf"
    gguf_writer.write(src, META)
    rewrite_metadata(src, dst, {"tokenizer.ggml.token_type": [1, 1, 4]})
    assert list(read(dst).metadata["tokenizer.ggml.token_type"]) == [1, 1, 4]
    assert read(dst).tensors == []


@pytest.mark.parametrize(("changes", "drop", "message"), [
    ({}, ["no.such.key"], "cannot drop keys it lacks"),
    ({"general.alignment": 3}, [], "power of two"),
])
def test_bad_changes_are_refused_and_leave_no_file(tmp_path, changes, drop, message):
    src, dst = tmp_path / "x.gguf", tmp_path / "y.gguf"
    model_file(src)
    with pytest.raises(RewriteError, match=message):
        rewrite_metadata(src, dst, changes, drop=drop)
    assert sorted(os.listdir(tmp_path)) == ["x.gguf"]


def test_the_output_cannot_be_the_input(tmp_path):
    src = tmp_path / "x.gguf"
    model_file(src)
    with pytest.raises(RewriteError, match="another file"):
        rewrite_metadata(src, src, {"tokenizer.ggml.pre": "llama-bpe"})


def test_links_planted_beside_the_output_are_not_followed(tmp_path):
    """issue 47: `.out.gguf.tmp -> in.gguf` beside --out cut the input to its header (every tensor byte lost)."""
    src, dst = tmp_path / "x.gguf", tmp_path / "y.gguf"
    model_file(src)
    before = src.read_bytes()
    (tmp_path / ".y.gguf.tmp").symlink_to(src)
    rewrite_metadata(src, dst, {"tokenizer.ggml.pre": "llama-bpe"})
    assert src.read_bytes() == before and digests(dst) == digests(src)
    assert (tmp_path / ".y.gguf.tmp").is_symlink()


def test_an_input_named_like_the_old_temp_file_is_kept(tmp_path):
    """issue 47: `repair .victim.gguf.tmp --out victim.gguf` deleted its own input."""
    src, dst = tmp_path / ".y.gguf.tmp", tmp_path / "y.gguf"
    model_file(src)
    before = src.read_bytes()
    rewrite_metadata(src, dst, {"tokenizer.ggml.pre": "llama-bpe"})
    assert src.read_bytes() == before and read(dst).metadata["tokenizer.ggml.pre"] == "llama-bpe"


ALIGNMENT_PROBE = """
import sys
from harness.models.gguf_rewrite import rewrite_metadata
try:
    rewrite_metadata(sys.argv[1], sys.argv[2], {"tokenizer.ggml.pre": "llama-bpe"})
except BaseException as exc:
    print(type(exc).__name__, exc)
"""


def alignment_file(path, alignment: int) -> None:
    """A vocabulary-only GGUF (no tensors: any power of two reads) whose general.alignment is `alignment`."""
    gguf_writer.write(path, META)
    data = bytearray(path.read_bytes())
    needle = b"general.alignment" + struct.pack("<II", 4, 64)  # key, UINT32, the value written
    at = data.index(needle) + len(needle) - 4
    data[at:at + 4] = struct.pack("<I", alignment)
    path.write_bytes(bytes(data))


def test_an_alignment_beyond_the_file_is_refused_naming_the_key_in_bounded_memory(tmp_path):
    """issue 46/47: general.alignment = 2**31 in a 384-byte file took 4.1 GB of memory and 2.1 GB of disk."""
    src, dst = tmp_path / "x.gguf", tmp_path / "y.gguf"
    alignment_file(src, 2**31)
    assert read(src).alignment == 2**31

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", ALIGNMENT_PROBE, str(src), str(dst)], capture_output=True,
                         text=True, timeout=60, preexec_fn=cap, env=env, check=False)
    assert out.stdout.startswith("SetupError") and "general.alignment is 2,147,483,648" in out.stdout, out
    assert sorted(os.listdir(tmp_path)) == ["x.gguf"]
