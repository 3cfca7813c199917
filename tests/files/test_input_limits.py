"""Reader bounds (data side): hostile goldens, corpora and GGUF headers cost little.

Every hostile input is generated on the fly in tmp_path and refused with a
clear error (exit 2 through the CLI), within a memory bound measured here
with tracemalloc: a small multiple of the file size for the GGUF reader, the
cap itself for an inflating `.json.gz`.
"""

from __future__ import annotations

import gzip
import json
import os
import struct
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest

from harness.files import input_limits
from harness.golden.files import GoldenError, load_golden
from harness.inputs.corpus import CorpusError, load_corpus
from tokenizer import GGUFError
from tokenizer.gguf import reader as gguf

GGUF_MEMORY_RATIO = 16  # peak Python allocation / file size, for any header shape below


def _peak(fn) -> tuple[int, float, object]:
    """(peak traced bytes, seconds, result or exception) of fn()."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - the caller checks what came out
        out = exc
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, time.perf_counter() - start, out


# --- golden files ------------------------------------------------------------------------------

def _gzip_of_zeros(path: Path, inflated: int) -> Path:
    """A gzip file inflating to `inflated` bytes of "0", compressed as a stream (no big buffer)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"0" * (1 << 20)
    with path.open("wb") as out:
        for _ in range(inflated // len(block)):
            out.write(packer.compress(block))
        out.write(packer.flush())
    return path


def test_a_golden_gz_bomb_is_refused_at_the_cap(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(input_limits, "MAX_GOLDEN_BYTES", 4 << 20)
    bomb = _gzip_of_zeros(tmp_path / "bomb.json.gz", 64 << 20)  # the cap is what is tested, not the size
    assert bomb.stat().st_size < 1 << 20
    peak, seconds, out = _peak(lambda: load_golden(bomb))
    assert isinstance(out, GoldenError) and "inflates to over" in str(out)
    assert peak < 3 * (4 << 20), peak  # the cap plus one chunk, not the 64 MiB
    assert seconds < 10


def test_bad_zlib_in_a_golden_is_a_golden_error(tmp_path: Path):
    good = gzip.compress(b'{"schema": "x"}')
    bad = tmp_path / "g.json.gz"
    bad.write_bytes(good[:12] + b"\x00garbage" + good[20:])
    with pytest.raises(GoldenError, match=r"g\.json\.gz"):
        load_golden(bad, check=False)


def test_a_truncated_gzip_golden_is_a_golden_error(tmp_path: Path):
    path = tmp_path / "g.json.gz"
    path.write_bytes(gzip.compress(b'{"cases": []}' * 100)[:-12])
    with pytest.raises(GoldenError, match="truncated"):
        load_golden(path, check=False)


def test_a_golden_over_the_size_cap_is_refused_before_reading(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(input_limits, "MAX_GOLDEN_BYTES", 1 << 20)
    path = tmp_path / "g.json"
    path.write_bytes(b" " * (2 << 20))
    with pytest.raises(GoldenError, match="over the limit"):
        load_golden(path)


@pytest.mark.parametrize("depth", [100, 200_000], ids=["over-limit", "over-recursion"])
def test_deeply_nested_golden_is_refused(tmp_path: Path, depth: int):
    path = tmp_path / "g.json"
    path.write_text("[" * depth + "]" * depth)
    with pytest.raises(GoldenError, match="nested deeper"):
        load_golden(path, check=False)


@pytest.mark.parametrize("ref", [{"as": 3}, {"of": 7, "pre": [], "post": []}], ids=["as", "of"])
def test_dangling_references_in_a_golden_are_named(tmp_path: Path, ref: dict):
    """`as`/`of` pointing at an encode item that does not exist: a GoldenError, not an IndexError."""
    detok = [{"as": "input"}] * 4
    encode = [{"ids": [1], "detokenize": detok}, {**ref}, {"as": 0}, {"as": 0}]
    if "of" in ref:
        encode[1] = {"ids": ref, "detokenize": detok}
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"cases": [{"id": "c", "text": "x", "encode": encode}]}))
    with pytest.raises(GoldenError, match="case 0 \\('c'\\)"):
        load_golden(path, check=False)


# --- corpora -----------------------------------------------------------------------------------

@pytest.mark.parametrize("megabytes, message", [(50, "big.jsonl: JSON Lines file is"),
                                                (5, "big.jsonl:2: line is over the limit")])
def test_a_huge_corpus_line_is_refused_quickly(tmp_path: Path, megabytes: int, message: str):
    """The issue's 50 MB line (was: 3 GB and a false "new llama.cpp crash"), and one under the file cap."""
    path = tmp_path / "big.jsonl"
    with path.open("wb") as out:
        out.write(b'{"id": "small", "text": "a"}\n{"id": "big", "text": "' + b"a" * (megabytes << 20) + b'"}\n')
    peak, seconds, out = _peak(lambda: load_corpus(path))
    assert isinstance(out, CorpusError) and message in str(out), out
    assert peak < 4 * input_limits.MAX_LINE_BYTES and seconds < 5, (peak, seconds)


def test_a_deeply_nested_corpus_line_is_refused(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "x", "extra": ' + "[" * 5000 + "]" * 5000 + "}\n")
    with pytest.raises(CorpusError, match=r"c\.jsonl:1: JSON nested deeper"):
        load_corpus(path)


def test_an_inp_input_over_the_line_cap_is_refused(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(input_limits, "MAX_LINE_BYTES", 100)
    path = tmp_path / "v.inp"
    path.write_bytes(b"short\n__ggml_vocab_test__\n" + b"x" * 200)
    with pytest.raises(CorpusError, match="input 1 is 200 bytes"):
        load_corpus(path)


# --- the GGUF reader ---------------------------------------------------------------------------

def _s(raw: bytes) -> bytes:
    return struct.pack("<Q", len(raw)) + raw


def _header(n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


def nested_empty_arrays(n: int) -> bytes:
    """One key holding `n` empty nested UINT8 arrays: 12 bytes each on disk."""
    kv = _s(b"x.nested") + struct.pack("<I", 9) + struct.pack("<IQ", 9, n)
    return _header(0, 1) + kv + struct.pack("<IQ", 0, 0) * n


def many_keys(n: int) -> bytes:
    return _header(0, n) + b"".join(_s(b"k%d" % i) + struct.pack("<IB", 0, 1) for i in range(n))


def many_short_strings(n: int) -> bytes:
    return _header(0, 1) + _s(b"x.s") + struct.pack("<I", 9) + struct.pack("<IQ", 8, n) + _s(b"ab") * n


def many_tensors(n: int) -> bytes:
    body = b"".join(_s(b"t%d" % i) + struct.pack("<I", 0) + struct.pack("<IQ", 0, 0) for i in range(n))
    return _header(n, 0) + body + b"\0" * 32


def test_two_million_empty_nested_arrays_are_refused_fast(tmp_path: Path):
    """The issue's case: 24 MB of empty nested arrays took 384 MB and 9 s."""
    path = tmp_path / "nested.gguf"
    path.write_bytes(nested_empty_arrays(2_000_000))
    peak, seconds, out = _peak(lambda: gguf.read(path))
    assert isinstance(out, GGUFError), out
    assert "nested arrays" in str(out) and "x.nested" in str(out) and "offset 0x" in str(out)
    assert peak < 1 << 20 and seconds < 1, (peak, seconds)


def test_nested_arrays_under_the_cap_still_read():
    f = gguf.parse(nested_empty_arrays(gguf.MAX_NESTED_ARRAYS))
    assert len(f.metadata["x.nested"]) == gguf.MAX_NESTED_ARRAYS


@pytest.mark.parametrize("build, n", [
    pytest.param(nested_empty_arrays, 20_000, id="nested-arrays"),
    pytest.param(many_keys, 20_000, id="keys"),
    pytest.param(many_short_strings, 50_000, id="strings"),
    pytest.param(many_tensors, 10_000, id="tensors"),
])
def test_reader_memory_is_a_small_multiple_of_the_file(build, n):
    data = build(n)
    peak, _, out = _peak(lambda: gguf.parse(data))
    assert not isinstance(out, Exception) or isinstance(out, GGUFError), out
    assert peak < GGUF_MEMORY_RATIO * len(data), f"{peak / len(data):.1f}x the file size"


@pytest.mark.parametrize("kind", ["dev-zero", "link-to-dev-zero", "fifo", "directory"])
def test_a_side_file_that_is_no_file_is_refused_before_a_byte_is_read(tmp_path: Path, kind: str):
    """issue 47: `--known-crashes /dev/zero` read until memory ran out; a FIFO waits for a writer forever."""
    path = {"dev-zero": Path("/dev/zero"), "directory": tmp_path}.get(kind, tmp_path / "side.json")
    if kind == "link-to-dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    started = time.monotonic()
    with pytest.raises(input_limits.NotARegularFile, match=f"^{path}: expected differences is a"):
        input_limits.read_side_json(path, "expected differences")
    with pytest.raises(input_limits.InputTooLarge):  # what the CLI turns into exit 2
        input_limits.read_capped(path, 1 << 20, "golden file")
    assert time.monotonic() - started < 5


def test_a_side_file_is_bounded_and_decoded(tmp_path: Path, monkeypatch):
    path = tmp_path / "side.json"
    path.write_text('{"a": [1, 2]}')
    assert input_limits.read_side_json(path, "settings") == {"a": [1, 2]}
    monkeypatch.setattr(input_limits, "MAX_SIDE_FILE_BYTES", 4)
    with pytest.raises(input_limits.InputTooLarge, match="settings is 13 bytes, over the limit of 4"):
        input_limits.read_side_text(path, "settings", limit=input_limits.MAX_SIDE_FILE_BYTES)
    path.write_bytes(b"\xff{}")
    with pytest.raises(ValueError, match="settings is not UTF-8"):
        input_limits.read_side_text(path, "settings")
    path.write_text("[" * 100 + "]" * 100)
    with pytest.raises(ValueError, match="nested deeper"):
        input_limits.read_side_json(path, "settings")
