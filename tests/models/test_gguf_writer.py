"""Our GGUF writer: byte-exact rebuilds, a Hypothesis round trip, type inference, refusals.

The rebuild test is the strongest: every shipped vocabulary, read with our
reader and written back with its own types, gives the original file byte for
byte (plus the alignment padding llama.cpp's writer adds). A second reader
(the `gguf` package) and llama.cpp itself read what we write.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from harness.models.gguf_writer import GGUFWriteError, build, infer_type, write
from harness.models.shipped import SHIPPED
from tests.gguf_strategies import gguf_files
from tokenizer.gguf.constants import Keys, ValueType
from tokenizer.gguf.reader import as_bytes, parse, read

VT = ValueType


def assert_same(a, b, where: str = "value") -> None:
    """Exact equality: types, dtypes and bits (so -0.0 != 0.0, True != 1)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), where
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert isinstance(b, float) and struct.pack("<d", a) == struct.pack("<d", b), where
    else:
        assert type(a) is type(b) and a == b, where


def expected_value(vt: tuple, value):
    """What the reader returns for a value written with type `vt`."""
    vtype, _ = vt
    if vtype == VT.FLOAT32:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if vtype in (VT.FLOAT64,):
        return float(value)
    return value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gguf_files())
def test_round_trip_write_then_read(spec):
    data = build(**spec)
    f = parse(data)
    meta = spec["metadata"]
    assert f.version == spec["version"]
    assert list(f.metadata)[: len(meta)] == list(meta)
    for key, value in meta.items():
        assert f.types[key] == spec["types"][key], key
        assert_same(f.metadata[key], expected_value(spec["types"][key], value), key)
    assert f.alignment == (spec["alignment"] or 32)
    assert [(t.name, t.shape, t.ggml_type) for t in f.tensors] == spec["tensors"]
    assert all((t.offset - f.data_offset) % f.alignment == 0 for t in f.tensors)
    assert len(data) % f.alignment == 0


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in SHIPPED])
def test_rebuild_of_shipped_vocabulary_is_byte_exact(name, require_vocab):
    path = require_vocab(name)
    original = path.read_bytes()
    f = read(path)
    rebuilt = build(f.metadata, types=f.types, version=f.version)
    assert rebuilt[: len(original)] == original
    assert not any(rebuilt[len(original):]) and len(rebuilt) % 32 == 0


def test_changed_vocabulary_keeps_types_and_exact_token_bytes(require_vocab, tmp_path):
    src = read(require_vocab("llama-spm"))
    out = tmp_path / "changed.gguf"
    write(out, src.metadata | {Keys.PRE: "qwen2", Keys.ADD_EOS: True, Keys.SEP_ID: 13},
          types=src.types)
    f = read(out)
    assert f.metadata[Keys.PRE] == "qwen2" and f.types[Keys.PRE] == (VT.STRING, None)
    assert f.types[Keys.ADD_EOS] == (VT.BOOL, None)
    assert f.types[Keys.SEP_ID] == (VT.UINT32, None)  # llama.cpp refuses an INT32 id
    assert [as_bytes(t) for t in f.metadata[Keys.TOKENS]] == \
        [as_bytes(t) for t in src.metadata[Keys.TOKENS]]


def test_gguf_package_reads_what_we_write(tmp_path):
    gguf = pytest.importorskip("gguf")
    meta = {
        "u8": np.array([1, 255], np.uint8), "i64": -2**40, "f64": 0.1, "flag": False,
        "text": "h\u00e9", "words": ["a", "\u00df", ""], "general.alignment": 64,
    }
    types = {"i64": VT.INT64, "f64": VT.FLOAT64}
    path = tmp_path / "ours.gguf"
    write(path, meta, types=types, tensors=[("w", (64, 2), "Q8_0"), ("b", (3,), "F32")])
    r = gguf.GGUFReader(path)
    assert r.fields["i64"].contents() == -2**40
    assert r.fields["f64"].contents() == 0.1
    assert r.fields["flag"].contents() is False
    assert r.fields["text"].contents() == "h\u00e9"
    assert r.fields["words"].contents() == ["a", "\u00df", ""]
    assert list(r.fields["u8"].contents()) == [1, 255]
    assert r.alignment == 64
    assert [(t.name, list(t.shape), int(t.tensor_type)) for t in r.tensors] == \
        [("w", [64, 2], 8), ("b", [3], 0)]
    assert [t.data_offset for t in r.tensors] == [t.offset for t in read(path).tensors]


@pytest.mark.oracle
def test_llama_cpp_loads_a_rewritten_vocabulary(require_vocab, tmp_path):
    # Through the oracle, which owns llama.cpp's process-wide log callback: a callback
    # installed here would be freed after the test while llama.cpp still calls it.
    from harness.oracle.llama import LlamaOracle

    src = read(require_vocab("llama-spm"))
    path = tmp_path / "flags.gguf"
    write(path, src.metadata | {Keys.ADD_BOS: False, Keys.ADD_EOS: True, Keys.EOS_ID: 7},
          types=src.types)
    with LlamaOracle(path) as llama:
        assert llama.n_tokens == len(src.metadata[Keys.TOKENS])
        assert (llama.add_bos, llama.add_eos, llama.eos) == (False, True, 7)


@pytest.mark.parametrize("value, expected", [
    pytest.param(True, (VT.BOOL, None), id="bool"),
    pytest.param(7, (VT.INT32, None), id="int32"),
    pytest.param(-2**31, (VT.INT32, None), id="int32-min"),
    pytest.param(2**31, (VT.UINT32, None), id="uint32"),
    pytest.param(2**32, (VT.INT64, None), id="int64"),
    pytest.param(-2**40, (VT.INT64, None), id="int64-negative"),
    pytest.param(2**63, (VT.UINT64, None), id="uint64"),
    pytest.param(0.5, (VT.FLOAT32, None), id="float"),
    pytest.param("x", (VT.STRING, None), id="str"),
    pytest.param(b"\xff", (VT.STRING, None), id="bytes"),
    pytest.param(np.uint16(3), (VT.UINT16, None), id="numpy-scalar"),
    pytest.param(np.zeros(2, np.float64), (VT.ARRAY, VT.FLOAT64), id="numpy-f64"),
    pytest.param(np.zeros(2, bool), (VT.ARRAY, VT.BOOL), id="numpy-bool"),
    pytest.param(["a", b"b"], (VT.ARRAY, VT.STRING), id="list-str"),
    pytest.param([], (VT.ARRAY, VT.STRING), id="list-empty"),
    pytest.param([1, 2**32], (VT.ARRAY, VT.INT64), id="list-int"),
    pytest.param([1, 0.5], (VT.ARRAY, VT.FLOAT32), id="list-float"),
    pytest.param([[1], ["a"]], (VT.ARRAY, VT.ARRAY), id="list-nested"),
])
def test_infer_type(value, expected):
    assert infer_type(value) == expected


@pytest.mark.parametrize("key, value", [
    pytest.param(Keys.BOS_ID, 5, id="token-id"),
    pytest.param(Keys.ADD_BOS, 1, id="add-bos-from-int"),
    pytest.param(Keys.SCORES, [0, 1], id="scores"),
    pytest.param(Keys.TOKEN_TYPE, [1, 2], id="token-type"),
])
def test_llama_cpp_key_types_win_over_inference(key, value):
    from tokenizer.gguf.constants import KEY_TYPES
    f = parse(build({key: value}))
    expected = KEY_TYPES[key]
    assert f.types[key] == (expected if isinstance(expected, tuple) else (expected, None))


@pytest.mark.parametrize("kwargs, message", [
    pytest.param({"metadata": {"": 1}}, "non-empty", id="empty-key"),
    pytest.param({"metadata": {"k\ud800": 1}}, "UTF-8", id="key-not-utf8"),
    pytest.param({"metadata": {"k": 300}, "types": {"k": VT.UINT8}}, "UINT8", id="int-range"),
    pytest.param({"metadata": {"k": 1.5}, "types": {"k": VT.INT32}}, "not an integer", id="float-as-int"),
    pytest.param({"metadata": {"k": 2}, "types": {"k": VT.BOOL}}, "BOOL", id="bool-2"),
    pytest.param({"metadata": {"k": [1, -1]}, "types": {"k": (VT.ARRAY, VT.UINT32)}},
                 "overflows", id="array-range"),
    pytest.param({"metadata": {"k": [1.5]}, "types": {"k": (VT.ARRAY, VT.INT8)}},
                 "not integers", id="array-float-as-int"),
    pytest.param({"metadata": {"k": [1e300]}, "types": {"k": (VT.ARRAY, VT.FLOAT32)}},
                 "overflow", id="array-float32-overflow"),
    pytest.param({"metadata": {"k": "abc"}, "types": {"k": (VT.ARRAY, VT.UINT8)}},
                 "sequence", id="string-as-array"),
    pytest.param({"metadata": {"k": [1, "a"]}}, "mixed", id="mixed-list"),
    pytest.param({"metadata": {"k": object()}}, "cannot infer", id="unknown-python-type"),
    pytest.param({"metadata": {}, "alignment": 48}, "power of two", id="alignment"),
    pytest.param({"metadata": {Keys.ALIGNMENT: 64}, "alignment": 32}, "disagrees",
                 id="alignment-conflict"),
    pytest.param({"metadata": {}, "version": 4}, "version", id="version"),
    pytest.param({"metadata": {}, "tensors": [("t", (1, 1, 1, 1, 1), 0)]}, "dimensions",
                 id="tensor-dims"),
    pytest.param({"metadata": {}, "tensors": [("t", (33,), "Q4_0")]}, "block size",
                 id="tensor-block"),
    pytest.param({"metadata": {}, "tensors": [("t", (1,), 4)]}, "unknown ggml type",
                 id="tensor-removed-type"),
    pytest.param({"metadata": {}, "tensors": [("t", (1,), 0), ("t", (1,), 0)]}, "duplicate",
                 id="tensor-duplicate"),
    pytest.param({"metadata": {}, "tensors": [("x" * 64, (1,), 0)]}, "bytes", id="tensor-name"),
    pytest.param({"metadata": {}, "tensors": [("t", (2**20, 2**20), 0)]}, "in-memory",
                 id="tensor-data-too-big"),
])
def test_writer_refuses(kwargs, message):
    with pytest.raises(GGUFWriteError, match=message):
        build(**kwargs)


def test_output_is_deterministic_and_version_1_has_32_bit_lengths():
    meta = {"a": "xyz", "b": np.arange(3, dtype=np.int16)}
    assert build(meta, version=1) == build(dict(meta), version=1)
    v1, v3 = build(meta, version=1), build(meta, version=3)
    assert struct.unpack_from("<II", v1, 8) == (0, 2)
    assert struct.unpack_from("<QQ", v3, 8) == (0, 2)
    assert parse(v1).metadata["a"] == parse(v3).metadata["a"] == "xyz"


def test_types_for_absent_keys_are_ignored():
    data = build({"kept": 1}, types={"kept": VT.UINT8, "dropped": VT.STRING})
    assert parse(data).types == {"kept": (VT.UINT8, None)}


def test_tensors_round_trip_byte_exact_through_the_reader():
    tensors = [("a", (64, 3), "Q8_0"), ("b", (), "F32"), ("c", (5, 0), 1)]
    for version in (1, 2, 3):
        data = build({"x": 1}, tensors=tensors, alignment=16, version=version)
        f = parse(data)
        assert [t.type_name for t in f.tensors] == ["Q8_0", "F32", "F16"]
        assert [t.nbytes for t in f.tensors] == [204, 4, 0]
        assert build(f.metadata, types=f.types, tensors=f.tensors, version=version) == data


def test_rewrite_changes_drops_and_keeps_the_rest(require_vocab, tmp_path):
    from harness.models.gguf_writer import rewrite
    src = require_vocab("bert-bge")
    out = tmp_path / "rewritten.gguf"
    rewrite(src, out, {Keys.PRE: "gpt-2", "custom.flag": True, Keys.PAD_ID: 1},
            drop=[Keys.MODEL], types={Keys.PAD_ID: VT.UINT32})
    before, after = read(src), read(out)
    assert Keys.MODEL not in after.metadata
    assert after.metadata[Keys.PRE] == "gpt-2" and after.metadata["custom.flag"] is True
    assert after.types["custom.flag"] == (VT.BOOL, None)
    kept = [k for k in before.metadata if k != Keys.MODEL]
    assert list(after.metadata)[: len(kept)] == kept
    for key in kept:
        if key not in (Keys.PRE, Keys.PAD_ID):
            assert after.types[key] == before.types[key], key
            assert_same(after.metadata[key], before.metadata[key], key)
    with pytest.raises(GGUFWriteError, match="absent"):
        rewrite(src, out, drop=["no.such.key"])
