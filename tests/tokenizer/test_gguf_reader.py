"""The strict GGUF reader against a second reader (the `gguf` package).

Every shipped vocabulary is read by ours and by `gguf.GGUFReader`, and
compared key by key (order and names), type by type, and value by value on the
exact bytes. `GGUFReader` needs about 100 s for all 19 files, so the default
run cross-checks six of them (about 12 s of CPU; GGUF v2 and v3, SPM, BPE and
WPM) and `--nightly` all 19. Every file's header is still pinned in the
default run by the writer's byte-exact rebuild (tests/models/test_gguf_writer.py). A file
written by the `gguf` package's own writer covers every value type and nested arrays; hand-built bytes cover
GGUF v1; a sparse multi-gigabyte file shows that tensor data is never read.
"""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

from harness.models.shipped import SHIPPED
from tests.gguf_strategies import array_payload, gguf_string, header, kv, padded, tensor_info
from tokenizer.gguf.constants import ValueType as VT
from tokenizer.gguf.reader import as_bytes, read

gguf = pytest.importorskip("gguf")

QUICK = ("bert-bge", "llama-spm", "phi-3", "deepseek-coder", "baichuan", "aquila")  # aquila is v2
VOCABS = [
    pytest.param(name, id=name, marks=() if name in QUICK else pytest.mark.nightly)
    for name in SHIPPED
]


@pytest.fixture(scope="module", params=VOCABS)
def pair(request, require_vocab):
    """(ours, GGUFReader) for one vocabulary; module scope groups the tests by
    vocabulary, so only one GGUFReader (hundreds of MB of views) lives at a time."""
    path = require_vocab(request.param)
    return read(path), gguf.GGUFReader(path)


def their_value(field):
    """A GGUFReader field as our reader returns it (strings as exact bytes)."""
    vtype = field.types[0]
    if vtype == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]])
    if vtype != gguf.GGUFValueType.ARRAY:
        return field.parts[field.data[0]][0]
    if field.types[1] == gguf.GGUFValueType.STRING:
        return [bytes(field.parts[i]) for i in field.data]
    parts = [field.parts[i] for i in field.data]
    return np.concatenate(parts) if parts else np.array([])


def our_value(value):
    if isinstance(value, str):
        return as_bytes(value)
    if isinstance(value, list):
        return [as_bytes(v) for v in value]
    return value


def test_header_matches(pair):
    ours, theirs = pair
    assert ours.version == int(theirs.fields["GGUF.version"].parts[-1][0])
    assert len(ours.metadata) == int(theirs.fields["GGUF.kv_count"].parts[-1][0])
    assert len(ours.tensors) == int(theirs.fields["GGUF.tensor_count"].parts[-1][0]) == 0
    assert ours.alignment == theirs.alignment
    assert ours.data_offset == ours.file_size  # no tensors: the header ends the file


def test_keys_match_in_order(pair):
    ours, theirs = pair
    assert list(ours.metadata) == [k for k in theirs.fields if not k.startswith("GGUF.")]


def test_types_match(pair):
    ours, theirs = pair
    for key, (vtype, etype) in ours.types.items():
        expected = [int(t) for t in theirs.fields[key].types]
        assert [int(vtype)] + ([] if etype is None else [int(etype)]) == expected, key


def test_values_match(pair):
    ours, theirs = pair
    for key, value in ours.metadata.items():
        expected, got = their_value(theirs.fields[key]), our_value(value)
        if isinstance(expected, np.ndarray):
            assert isinstance(got, np.ndarray), key
            assert got.dtype == expected.dtype or (got.dtype == bool and expected.dtype == np.uint8)
            assert got.tobytes() == expected.tobytes(), key
        else:
            assert type(got) is type(expected.item() if isinstance(expected, np.generic)
                                     else expected), key
            assert got == expected, key


def test_reads_every_value_type_written_by_gguf_py(tmp_path):
    path = tmp_path / "all-types.gguf"
    w = gguf.GGUFWriter(path, "test")
    T = gguf.GGUFValueType
    scalars = {
        "u8": (255, T.UINT8), "i8": (-128, T.INT8), "u16": (65535, T.UINT16),
        "i16": (-32768, T.INT16), "u32": (2**32 - 1, T.UINT32), "i32": (-2**31, T.INT32),
        "f32": (0.5, T.FLOAT32), "bool": (True, T.BOOL), "str": ("h\u00e9llo", T.STRING),
        "u64": (2**64 - 1, T.UINT64), "i64": (-2**63, T.INT64), "f64": (0.1, T.FLOAT64),
    }
    for key, (value, vtype) in scalars.items():
        w.add_key_value(key, value, vtype)
    arrays = {
        "a.u8": ([0, 255], T.UINT8), "a.i8": ([-1, 1], T.INT8), "a.u16": ([7], T.UINT16),
        "a.i16": ([-7], T.INT16), "a.u32": ([1, 2, 3], T.UINT32), "a.i32": ([-3], T.INT32),
        "a.f32": ([1.5, -2.0], T.FLOAT32), "a.bool": ([True, False], T.BOOL),
        "a.u64": ([2**64 - 1], T.UINT64), "a.i64": ([-2**63], T.INT64),
        "a.f64": ([0.25], T.FLOAT64), "a.str": (["a", "", "\u00df"], T.STRING),
    }
    for key, (value, etype) in arrays.items():
        w.add_key_value(key, value, T.ARRAY, sub_type=etype)
    w.add_array("a.nested", [[1, 2], [3]])
    w.add_tensor("w", np.zeros((2, 64), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    f = read(path)
    for key, (value, vtype) in scalars.items():
        assert f.types[key] == (VT(int(vtype)), None), key
        assert f.metadata[key] == value and type(f.metadata[key]) is type(value), key
    for key, (value, etype) in arrays.items():
        assert f.types[key] == (VT.ARRAY, VT(int(etype))), key
        assert list(f.metadata[key]) == value, key
    assert f.metadata["a.bool"].dtype == bool
    assert f.types["a.nested"] == (VT.ARRAY, VT.ARRAY)
    assert [list(a) for a in f.metadata["a.nested"]] == [[1, 2], [3]]
    (t,) = f.tensors
    assert (t.name, t.shape, t.type_name, t.nbytes) == ("w", (64, 2), "F32", 512)
    assert t.offset == f.data_offset and t.offset % 32 == 0


def test_reads_version_1():
    body = kv("s", VT.STRING, gguf_string("x\xff", version=1), version=1)
    body += kv("a", VT.ARRAY, array_payload(VT.STRING, 2, gguf_string("p", version=1)
                                            + gguf_string("", version=1), version=1), version=1)
    body += tensor_info("t", [4, 2], 0, 0, version=1)
    data = padded(header(1, 2, version=1) + body) + bytes(32)
    from tokenizer.gguf.reader import parse
    f = parse(data)
    assert f.version == 1
    assert f.metadata == {"s": "x\xff", "a": ["p", ""]}
    assert [(t.name, t.shape, t.nbytes) for t in f.tensors] == [("t", (4, 2), 32)]


def test_string_bytes_survive_exactly():
    raw = b"\xe2\x82 split \xff\xfe \xc3"
    data = header(0, 1) + kv("k", VT.ARRAY, array_payload(VT.STRING, 2, gguf_string(raw) * 2))
    from tokenizer.gguf.reader import parse
    assert [as_bytes(s) for s in parse(data).metadata["k"]] == [raw, raw]


def test_tensor_data_is_never_read(tmp_path):
    dims, size = [2**18, 2**10], 2**30  # one 1 GiB F32 tensor, a sparse file
    head = padded(header(1, 1) + kv("general.alignment", VT.UINT32, struct.pack("<I", 64))
                  + tensor_info("big", dims, 0, 0), 64)
    path = tmp_path / "sparse.gguf"
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + size)
    start = time.perf_counter()
    f = read(path)
    assert time.perf_counter() - start < 1.0
    assert f.alignment == 64 and f.tensors[0].nbytes == size and f.tensors[0].offset == len(head)
