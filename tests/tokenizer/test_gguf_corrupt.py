"""The strict reader on hostile bytes: only ever `GGUFError`, fast and small.

One explicit test per kind of corruption the reader rejects, each checking that
the message names the byte offset (built by hand, so the offset is known) and
the key or tensor. Then Hypothesis corrupts real and synthetic files
(truncation, flipped bytes, inflated counts and lengths, bad types, duplicate
keys): the reader either parses or raises `GGUFError`, never its internal
safety net, within a time bound; tiny files claiming huge counts stay within a
memory bound. The budget is the Hypothesis profile's; `nox -s nightly` runs the
nightly test under the `nightly` profile (3,000 examples).
"""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.models.gguf_writer import build
from tests.gguf_strategies import (
    array_payload,
    gguf_files,
    gguf_string,
    header,
    kv,
    padded,
    tensor_info,
)
from tokenizer.errors import GGUFError
from tokenizer.gguf.constants import ValueType as VT
from tokenizer.gguf.reader import parse, read

H = 24  # bytes in a v3 header: magic, version, tensor count, metadata count
U8, U32, U64 = (struct.Struct(f).pack for f in ("<B", "<I", "<Q"))


def rejects(data: bytes, *fragments: str, offset: int) -> str:
    with pytest.raises(GGUFError) as info:
        parse(data, name="bad.gguf")
    msg = str(info.value)
    assert f"(offset {offset:#x})" in msg, msg
    for fragment in fragments:
        assert fragment in msg, msg
    assert "internal error" not in msg, msg
    return msg


def one_tensor(name, dims, ggml_type, offset, *, data: int = 0) -> bytes:
    return padded(header(1, 0) + tensor_info(name, dims, ggml_type, offset)) + bytes(data)


# -- one test per rejection case ---------------------------------------------

CASES = [
    pytest.param(b"GGUX" + header(0, 0)[4:], ("bad magic",), 0, id="bad-magic"),
    pytest.param(header(0, 0, version=4), ("unsupported GGUF version 4",), 4, id="version-4"),
    pytest.param(header(0, 0, version=0), ("unsupported GGUF version 0",), 4, id="version-0"),
    pytest.param(header(0, 0, version=3 << 24), ("big-endian",), 4, id="version-big-endian"),
    pytest.param(header(0, 1) + gguf_string("k") + U32(13) + b"\0", ("'k'", "unknown value type 13"),
                 H + 9, id="unknown-value-type"),
    pytest.param(header(0, 1) + kv("arr", VT.ARRAY, U32(99) + U64(0)),
                 ("'arr'", "unknown value type 99"), H + 15, id="unknown-element-type"),
    pytest.param(b"GGUF" + U32(3) + b"\x01\x02", ("truncated", "tensor count"), 8,
                 id="truncated-header"),
    pytest.param(header(0, 1) + kv("k", VT.UINT64, b"\x01\x02"), ("truncated", "'k'"), H + 13,
                 id="truncated-scalar"),
    pytest.param(header(0, 1) + kv("k", VT.STRING, gguf_string(b"abc")[:-1]),
                 ("truncated", "'k'"), H + 21, id="truncated-string"),
    pytest.param(header(0, 2) + kv("k", VT.UINT8, b"\x01") + gguf_string(b"kk", length=99)
                 + bytes(8), ("truncated", "key of metadata entry 1"), H + 22,
                 id="truncated-key"),
    pytest.param(header(0, 1) + kv("k", VT.ARRAY, array_payload(
        VT.STRING, 2, gguf_string("x") + gguf_string(b"yy", length=50))),
                 ("truncated", "element 1", "'k'", "50 bytes"), H + 34, id="truncated-string-array"),
    pytest.param(header(0, 1) + kv("b", VT.BOOL, b"\x02"), ("'b'", "bool byte is 2"), H + 13,
                 id="bool-byte-2"),
    pytest.param(header(0, 1) + kv("ba", VT.ARRAY, array_payload(VT.BOOL, 3, b"\x01\x00\x07")),
                 ("'ba'", "element 2", "bool byte 7"), H + 28, id="bool-array-byte-7"),
    pytest.param(header(0, 2) + kv("k", VT.UINT8, b"\x01") + kv("k", VT.UINT8, b"\x02"),
                 ("duplicate key 'k'",), H + 14, id="duplicate-key"),
    pytest.param(header(0, 1) + kv(b"\xffk", VT.UINT8, b"\x01"), ("not valid UTF-8",), H,
                 id="key-not-utf8"),
    pytest.param(header(0, 1) + kv(b"", VT.UINT8, b"\x01") + b"\0", ("empty key",), H, id="empty-key"),
    pytest.param(header(0, 1) + kv("general.alignment", VT.UINT32, U32(48)),
                 ("'general.alignment'", "48", "power of two"), H + 29, id="alignment-48"),
    pytest.param(header(0, 1) + kv("general.alignment", VT.UINT32, U32(0)),
                 ("'general.alignment'", "power of two"), H + 29, id="alignment-0"),
    pytest.param(header(0, 1) + kv("general.alignment", VT.UINT64, U64(32)),
                 ("'general.alignment'", "UINT64", "expected UINT32"), H + 29,
                 id="alignment-wrong-type"),
    pytest.param(header(0, 2**63), ("metadata count", str(2**63)), 16, id="huge-kv-count"),
    pytest.param(header(2**63, 0), ("tensor count", str(2**63)), 8, id="huge-tensor-count"),
    pytest.param(header(0, 1) + kv("a", VT.ARRAY, array_payload(VT.UINT32, 2**60, b"")),
                 ("'a'", "claims", str(2**60)), H + 17, id="huge-array-count"),
    pytest.param(header(0, 1) + kv("s", VT.STRING, gguf_string(b"", length=2**63)),
                 ("truncated", "'s'"), H + 21, id="huge-string-length"),
    pytest.param(header(0, 1) + kv("n", VT.ARRAY, b"".join(
        array_payload(VT.ARRAY, 1, b"") for _ in range(9))), ("'n'", "nested deeper"),
                 H + 13 + 8 * 12, id="nested-too-deep"),
    pytest.param(one_tensor("t", [1] * 5, 0, 0), ("tensor 't'", "n_dims 5"), H + 9,
                 id="n-dims-5"),
    pytest.param(one_tensor("t", [4], 4, 0), ("tensor 't'", "unknown ggml type 4"), H + 21,
                 id="ggml-type-removed"),
    pytest.param(one_tensor("t", [4], 43, 0), ("tensor 't'", "unknown ggml type 43"), H + 21,
                 id="ggml-type-count"),
    pytest.param(one_tensor("t", [2**62, 4], 0, 0), ("tensor 't'", "overflows int64"), H,
                 id="element-count-overflow"),
    pytest.param(one_tensor("t", [2**40, 2**21], 0, 0), ("tensor 't'", "byte size"), H,
                 id="byte-size-overflow"),
    pytest.param(one_tensor("t", [-1], 0, 0), ("tensor 't'", "negative"), H,
                 id="negative-dimension"),
    pytest.param(one_tensor("t", [33], 2, 0), ("tensor 't'", "block size 32"), H,
                 id="not-a-whole-block"),
    pytest.param(one_tensor("t", [1], 0, 4, data=64), ("tensor 't'", "not a multiple", "32"),
                 H + 25, id="misaligned-offset"),
    pytest.param(one_tensor("t", [8], 0, 0, data=16), ("tensor 't'", "outside the file"),
                 H + 25, id="outside-the-file"),
    pytest.param(one_tensor("t", [8], 0, 2**64 - 32), ("tensor 't'", "outside the file"),
                 H + 25, id="offset-wraps"),
    pytest.param(one_tensor("t" * 64, [1], 0, 0), ("64 bytes", "at most 63"), H,
                 id="tensor-name-too-long"),
    pytest.param(header(1, 0) + tensor_info("t", [4], 0, 0)[:-3], ("truncated", "tensor 't'"),
                 H + 25, id="truncated-tensor-info"),
    pytest.param(header(1, 0) + tensor_info("t", [1], 0, 0), ("tensor data should start",),
                 H + 33, id="data-section-missing"),
]


@pytest.mark.parametrize("data, fragments, offset", CASES)
def test_rejection_names_offset_and_culprit(data, fragments, offset):
    rejects(data, *fragments, offset=offset)


def test_overlapping_tensors_are_named():
    body = tensor_info("t1", [16], 0, 0) + tensor_info("t2", [16], 0, 32)
    data = padded(header(2, 0) + body) + bytes(128)
    data_offset = len(padded(header(2, 0) + body))
    rejects(data, "'t1'", "'t2'", "overlap", offset=data_offset + 32)


def test_duplicate_tensor_names_are_named():
    body = tensor_info("t", [1], 0, 0) + tensor_info("t", [1], 0, 32)
    rejects(padded(header(2, 0) + body) + bytes(64), "duplicate tensor name 't'",
            offset=H + len(tensor_info("t", [1], 0, 0)))


def test_tensor_name_must_be_utf8():
    rejects(one_tensor("\udcff", [1], 0, 0, data=32), "name of tensor 0", "UTF-8", offset=H)


def test_empty_file_is_a_gguf_error(tmp_path):
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"")
    with pytest.raises(GGUFError, match="empty file"):
        read(path)


def test_missing_path_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        read(tmp_path / "absent.gguf")


# -- time and memory bounds ---------------------------------------------------

HUGE = [
    pytest.param(header(0, 2**63 - 1), id="kv-count"),
    pytest.param(header(2**63 - 1, 0), id="tensor-count"),
    pytest.param(header(0, 1) + kv("a", VT.ARRAY, array_payload(VT.STRING, 2**62, b"")),
                 id="string-array-count"),
    pytest.param(header(0, 1) + kv("a", VT.ARRAY, array_payload(VT.ARRAY, 2**62, b"")),
                 id="nested-array-count"),
    pytest.param(header(0, 1) + kv("a", VT.ARRAY, array_payload(VT.UINT64, 2**61, bytes(64))),
                 id="u64-array-count"),
    pytest.param(header(0, 1) + kv("s", VT.STRING, gguf_string(b"", length=2**64 - 1)),
                 id="string-length"),
    pytest.param(header(0, 1) + gguf_string(b"", length=2**40) + bytes(40), id="key-length"),
    pytest.param(header(0, 1, version=1) + kv("a", VT.ARRAY, array_payload(
        VT.STRING, 2**32 - 1, bytes(4), version=1), version=1), id="v1-string-array-count"),
    pytest.param(header(0, 1) + kv("a", VT.ARRAY, array_payload(VT.STRING, 2**20, bytes(64))),
                 id="string-array-count-just-too-big"),
]


@pytest.mark.parametrize("data", HUGE)
def test_tiny_file_claiming_huge_counts_is_cheap(data):
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(GGUFError):
            parse(data)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - start < 0.5
    assert peak < 1 << 20, f"peak {peak} bytes for a {len(data)}-byte input"


# -- Hypothesis corruption ----------------------------------------------------


def only_gguf_errors(data: bytes) -> None:
    """The property: parse, or a GGUFError that is not the safety net; quickly."""
    start = time.perf_counter()
    try:
        parse(data)
    except GGUFError as exc:
        assert "internal error" not in str(exc), str(exc)
    assert time.perf_counter() - start < 5.0


def field_positions(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of every length, count and type field of a valid file."""
    f = parse(data)
    w = 4 if f.version == 1 else 8
    spots = [(8, w), (8 + w, w)]
    for key, at in f.offsets.items():
        vtype, _ = f.types[key]
        spots.append((at - 4, 4))                  # value type
        spots.append((at - 4 - len(key.encode()) - w, w))  # key length
        if vtype == VT.STRING:
            spots.append((at, w))
        elif vtype == VT.ARRAY:
            spots += [(at, 4), (at + 4, w)]           # element type, count
    return spots


@st.composite
def corrupted(draw, base: bytes) -> bytes:
    """`base` truncated, with bytes flipped, or with a length/count/type field inflated."""
    data = bytearray(base)
    how = draw(st.sampled_from(["truncate", "flip", "inflate"]))
    if how == "truncate":
        return bytes(data[: draw(st.integers(0, len(data) - 1))])
    if how == "flip":
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        return bytes(data)
    at, width = draw(st.sampled_from(field_positions(base)))
    big = draw(st.one_of(st.integers(0, 64), st.integers(0, 2**(8 * width) - 1),
                         st.just(2**(8 * width) - 1)))
    data[at:at + width] = big.to_bytes(width, "little")
    return bytes(data)


def synthetic() -> st.SearchStrategy[bytes]:
    return gguf_files().map(lambda spec: build(**spec)).filter(lambda d: len(d) > 24)


# No max_examples here: the budget is the Hypothesis profile's (default 100; `ci`, `dev`,
# `nightly` through --hypothesis-profile or $GGUF_PARITY_HYPOTHESIS_PROFILE, see conftest.py).
CORRUPTION = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@CORRUPTION
@given(synthetic().flatmap(corrupted))
def test_corrupted_synthetic_files_only_raise_gguf_error(data):
    only_gguf_errors(data)


@CORRUPTION
@given(st.data())
def test_corrupted_real_file_only_raises_gguf_error(shipped_header, data):
    only_gguf_errors(data.draw(corrupted(shipped_header)))


@CORRUPTION
@given(st.binary(max_size=200).map(lambda b: b"GGUF" + U32(3) + b))
def test_random_bytes_after_the_magic_only_raise_gguf_error(data):
    only_gguf_errors(data)


@CORRUPTION
@given(gguf_files(), st.text("xyz", min_size=1, max_size=4))
def test_duplicate_keys_are_refused(spec, suffix):
    meta = {"a" + suffix: 1, "b" + suffix: "v"} | spec["metadata"]
    data = bytearray(build(meta, types=spec["types"], version=spec["version"]))
    f = parse(bytes(data))
    second = f.offsets["b" + suffix] - 4 - len(("b" + suffix).encode())
    data[second] = ord("a")
    with pytest.raises(GGUFError, match="duplicate key"):
        parse(bytes(data))


@CORRUPTION
@given(synthetic().flatmap(corrupted))
def test_corruption_stays_within_a_memory_bound(data):
    tracemalloc.start()
    try:
        only_gguf_errors(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (8 << 20) + len(data) * 16


@pytest.mark.nightly
@CORRUPTION
@given(st.data())
def test_nightly_corruption(shipped_header, data):
    base = data.draw(st.one_of(st.just(shipped_header), synthetic()))
    only_gguf_errors(data.draw(corrupted(base)))


@pytest.fixture(scope="module")
def shipped_header(require_vocab) -> bytes:
    """llama-spm's bytes: a real header with a 32000-token string array."""
    return require_vocab("llama-spm").read_bytes()
