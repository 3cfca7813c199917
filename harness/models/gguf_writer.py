"""Write GGUF files: the inverse of `tokenizer.gguf.reader.read`.

Used to build synthetic vocabularies from the shipped ones and to round-trip
the reader in tests. `build()` returns the bytes, `write()` puts them in a file.

A value's on-disk type comes from, in order: `types[key]` (a `ValueType`, or a
`(ValueType.ARRAY, element type)` pair, exactly what `GGUFFile.types` holds),
then `constants.KEY_TYPES` (the type llama.cpp's loader insists on, e.g. UINT32
for every `*_token_id`), then the value itself (`infer_type`). So a file read
with `read` comes back with the same types, and a changed or added tokenizer
key gets the type llama.cpp expects without the caller spelling it out:

    >>> src = read("ggml-vocab-llama-spm.gguf")
    >>> write("x.gguf", src.metadata | {"tokenizer.ggml.pre": "qwen2"}, types=src.types)

`types` may name keys that `metadata` lacks (they are ignored), so dropping a
key from the metadata needs no change to `types`. `str` values are encoded with
``surrogateescape`` so the exact bytes a reader returned survive; `bytes` are
written as they are. Tensors are `(name, shape, ggml_type)` entries (or the
reader's `TensorInfo`s) written with zeroed data, each aligned. The output is
deterministic: keys in the order of `metadata`, tensors in the order given.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenizer.gguf.constants import (
    DEFAULT_ALIGNMENT,
    GGML_TYPES,
    GGUF_MAGIC,
    KEY_TYPES,
    MAX_DIMS,
    MAX_NAME,
    SCALAR_DTYPES,
    SCALAR_FORMATS,
    SUPPORTED_VERSIONS,
    Keys,
    ValueType,
)
from tokenizer.gguf.reader import MAX_ARRAY_DEPTH, read

__all__ = ["GGUFWriteError", "build", "header", "infer_type", "rewrite", "write"]

TypeSpec = ValueType | tuple[ValueType, ValueType | None]
MAX_TENSOR_DATA = 1 << 30  # zero-filled tensor bytes build() will hold in memory
_U32 = struct.Struct("<I")
_SCALAR_STRUCTS = {vt: struct.Struct(fmt) for vt, fmt in SCALAR_FORMATS.items()}
_GGML_BY_NAME = {name: tid for tid, (name, _, _) in GGML_TYPES.items()}
_Entry = tuple[str, tuple[int, ...], int, int, int]  # name, shape, ggml type id, offset, nbytes
# numpy dtype -> value type; bool before uint8 so numpy bool maps to BOOL
_DTYPE_TYPES: dict[np.dtype[Any], ValueType] = {np.dtype(bool): ValueType.BOOL} | {
    np.dtype(dt): vt for vt, dt in SCALAR_DTYPES.items() if vt != ValueType.BOOL
}
# inferred Python int types, narrowest first
_INT_RANGES = (
    (ValueType.INT32, -2**31, 2**31 - 1),
    (ValueType.UINT32, 0, 2**32 - 1),
    (ValueType.INT64, -2**63, 2**63 - 1),
    (ValueType.UINT64, 0, 2**64 - 1),
)


class GGUFWriteError(ValueError):
    """The metadata or tensors handed to the writer cannot be written as GGUF."""


@dataclass(frozen=True)
class _Layout:
    """What differs between GGUF versions: v1 has 32-bit lengths and dimensions."""

    length: struct.Struct
    dim: struct.Struct

    @classmethod
    def for_version(cls, version: int) -> _Layout:
        if version not in SUPPORTED_VERSIONS:
            raise GGUFWriteError(f"cannot write GGUF version {version} "
                                 f"(supported: {', '.join(map(str, SUPPORTED_VERSIONS))})")
        if version == 1:
            return cls(struct.Struct("<I"), struct.Struct("<I"))
        return cls(struct.Struct("<Q"), struct.Struct("<q"))


def write(path: str | os.PathLike[str], metadata: Mapping[str, Any], **options: Any) -> None:
    """Write `build(metadata, **options)` to `path` (atomically: temp file, then rename)."""
    data = build(metadata, **options)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gguf-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def rewrite(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    changes: Mapping[str, Any] | None = None,
    *,
    drop: Iterable[str] = (),
    types: Mapping[str, TypeSpec] | None = None,
) -> None:
    """Write `dst`: the GGUF file `src` with `changes` applied and `drop` removed.

    Keys keep their order, version and on-disk types, changed ones included
    (`types` overrides them; a new key gets its `KEY_TYPES` or inferred type).
    Tensors keep their directory entries but their data is written as zeros.

        >>> rewrite(vocab_path("llama-spm"), "x.gguf", {"tokenizer.ggml.pre": "qwen2"},
        ...         drop=["tokenizer.chat_template"])
    """
    f = read(src)
    dropped = set(drop)
    missing = dropped - f.metadata.keys()
    if missing:
        raise GGUFWriteError(f"cannot drop keys absent from {os.fspath(src)}: {sorted(missing)}")
    meta = {k: v for k, v in f.metadata.items() if k not in dropped} | dict(changes or {})
    write(dst, meta, types=f.types | dict(types or {}), version=f.version, tensors=f.tensors)


def build(
    metadata: Mapping[str, Any],
    *,
    types: Mapping[str, TypeSpec] | None = None,
    version: int = 3,
    alignment: int | None = None,
    tensors: Iterable[Any] = (),
) -> bytes:
    """The bytes of a GGUF file holding `metadata` and zero-filled `tensors`.

    `alignment` sets `general.alignment` (written as UINT32) when the metadata
    lacks it; when both are given they must agree.
    """
    head, placed = header(metadata, types=types, version=version, alignment=alignment, tensors=tensors)
    out = bytearray(head)
    align = _alignment(dict(metadata), alignment)
    for _, nbytes in placed:
        out += bytes(nbytes)
        _pad(out, align)
    return bytes(out)


def header(
    metadata: Mapping[str, Any],
    *,
    types: Mapping[str, TypeSpec] | None = None,
    version: int = 3,
    alignment: int | None = None,
    tensors: Iterable[Any] = (),
    max_data: int | None = MAX_TENSOR_DATA,
) -> tuple[bytes, list[tuple[int, int]]]:
    """The header of `build(...)`, padded to the alignment, and each tensor's (offset, nbytes).

    Offsets are relative to the end of the header (the data section), in the
    order the tensors are given, so a caller can put each tensor's own bytes
    there instead of zeros (`harness.models.gguf_rewrite`). `max_data` bounds
    the data section (None: no bound, for a caller that streams it).
    """
    layout = _Layout.for_version(version)
    meta = dict(metadata)
    align = _alignment(meta, alignment)
    entries = _tensor_entries(tensors, align, max_data)
    out = bytearray(GGUF_MAGIC)
    out += _U32.pack(version)
    _pack(out, layout.length, len(entries), "tensor count")
    _pack(out, layout.length, len(meta), "metadata count")
    for key, value in meta.items():
        _put_kv(out, key, value, _type_for(key, value, types), layout)
    for name, shape, ggml_type, offset, _ in entries:
        _put_tensor_info(out, name, shape, ggml_type, offset, layout)
    _pad(out, align)
    return bytes(out), [(offset, nbytes) for *_, offset, nbytes in entries]


def infer_type(value: Any) -> tuple[ValueType, ValueType | None]:
    """The (type, element type) the writer gives `value` when nothing else says.

    bool -> BOOL, int -> INT32, UINT32, INT64 or UINT64 (the narrowest that
    holds it, in that order), float -> FLOAT32, str/bytes -> STRING, numpy
    scalars and arrays by dtype, a list of str -> array of STRING, a list of
    arrays -> array of ARRAY, a list of bools -> array of BOOL, a list of ints
    -> array of the narrowest integer type above that holds them all, a list
    of numbers with a float among them -> array of FLOAT32. An empty list is
    an array of STRING.
    """
    if isinstance(value, (bool, np.bool_)):
        return ValueType.BOOL, None
    if isinstance(value, (str, bytes, bytearray)):
        return ValueType.STRING, None
    if isinstance(value, int):
        return _int_type(value, value), None
    if isinstance(value, float):
        return ValueType.FLOAT32, None
    if isinstance(value, np.generic):
        return _dtype_type(value.dtype), None
    if isinstance(value, np.ndarray) and value.dtype.kind not in "OUS":
        return ValueType.ARRAY, _dtype_type(value.dtype)
    if isinstance(value, (list, tuple, np.ndarray)):
        return ValueType.ARRAY, _element_type(value)
    raise GGUFWriteError(f"cannot infer a GGUF type for a {type(value).__name__}")


# -- types ------------------------------------------------------------------


def _type_for(key: str, value: Any, types: Mapping[str, TypeSpec] | None) -> tuple[ValueType, ValueType | None]:
    spec = types.get(key) if types else None
    if spec is None:
        spec = KEY_TYPES.get(key)
    if spec is None:
        try:
            return infer_type(value)
        except GGUFWriteError as exc:
            raise GGUFWriteError(f"key {key!r}: {exc}") from None
    vtype, etype = (spec, None) if isinstance(spec, ValueType) else spec
    vtype = ValueType(vtype)
    if vtype == ValueType.ARRAY and etype is None:
        etype = _inner_type(key, value)
    return vtype, (None if etype is None else ValueType(etype))


def _inner_type(key: str, value: Any) -> ValueType:
    """The element type of an array value whose type says only ARRAY."""
    try:
        vtype, etype = infer_type(value)
    except GGUFWriteError as exc:
        raise GGUFWriteError(f"key {key!r}: {exc}") from None
    if vtype != ValueType.ARRAY or etype is None:
        raise GGUFWriteError(f"key {key!r}: an ARRAY value must be a sequence, not {value!r}")
    return etype


def _dtype_type(dtype: np.dtype[Any]) -> ValueType:
    found = _DTYPE_TYPES.get(dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype)
    if found is None:
        raise GGUFWriteError(f"numpy dtype {dtype} has no GGUF value type")
    return found


def _int_type(lo: int, hi: int) -> ValueType:
    for vtype, tmin, tmax in _INT_RANGES:
        if tmin <= lo and hi <= tmax:
            return vtype
    raise GGUFWriteError(f"integer range [{lo}, {hi}] fits no GGUF integer type")


def _element_type(values: Iterable[Any]) -> ValueType:
    items = list(values)
    if all(isinstance(v, (str, bytes, bytearray)) for v in items):
        return ValueType.STRING
    if all(isinstance(v, (list, tuple, np.ndarray)) for v in items):
        return ValueType.ARRAY
    if all(isinstance(v, (bool, np.bool_)) for v in items):
        return ValueType.BOOL
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
        return _int_type(min(int(v) for v in items), max(int(v) for v in items))
    if all(isinstance(v, (int, float, np.integer, np.floating)) for v in items):
        return ValueType.FLOAT32
    raise GGUFWriteError("array elements of mixed or unsupported types")


# -- values -----------------------------------------------------------------


def _put_kv(out: bytearray, key: object, value: Any, vt: tuple[ValueType, ValueType | None],
            layout: _Layout) -> None:
    if not isinstance(key, str) or not key:
        raise GGUFWriteError(f"key {key!r}: keys must be non-empty str")
    try:
        raw_key = key.encode("utf-8")
    except UnicodeEncodeError:
        raise GGUFWriteError(f"key {key!r}: keys must be valid UTF-8") from None
    _pack(out, layout.length, len(raw_key), f"length of key {key!r}")
    out += raw_key
    vtype, etype = vt
    out += _U32.pack(vtype)
    _put_value(out, key, value, vtype, etype, layout, 0)


def _put_value(out: bytearray, key: str, value: Any, vtype: ValueType, etype: ValueType | None,
               layout: _Layout, depth: int) -> None:
    if vtype == ValueType.STRING:
        raw = _string_bytes(key, value)
        _pack(out, layout.length, len(raw), f"length of key {key!r}")
        out += raw
    elif vtype == ValueType.ARRAY:
        _put_array(out, key, value, etype, layout, depth)
    elif vtype == ValueType.BOOL:
        if not isinstance(value, (bool, np.bool_, int, np.integer)) or value not in (0, 1):
            raise GGUFWriteError(f"key {key!r}: BOOL value must be True/False, not {value!r}")
        out += bytes([int(value)])
    else:
        _pack_scalar(out, key, value, vtype)


def _pack_scalar(out: bytearray, key: str, value: Any, vtype: ValueType) -> None:
    if isinstance(value, (float, np.floating)) and vtype not in (
            ValueType.FLOAT32, ValueType.FLOAT64):
        raise GGUFWriteError(f"key {key!r}: {value!r} is not an integer ({vtype.name})")
    try:
        out += _SCALAR_STRUCTS[vtype].pack(value)
    except (struct.error, OverflowError, TypeError) as exc:
        raise GGUFWriteError(f"key {key!r}: cannot write {value!r} as {vtype.name} ({exc})") from None


def _put_array(out: bytearray, key: str, value: Any, etype: ValueType | None, layout: _Layout,
               depth: int) -> None:
    if etype is None:
        raise GGUFWriteError(f"key {key!r}: an array needs an element type")
    if depth >= MAX_ARRAY_DEPTH:
        raise GGUFWriteError(f"key {key!r}: arrays nested deeper than {MAX_ARRAY_DEPTH}")
    if isinstance(value, (str, bytes, bytearray)) or not hasattr(value, "__len__"):
        raise GGUFWriteError(f"key {key!r}: an ARRAY value must be a sequence, not {value!r}")
    out += _U32.pack(etype)
    _pack(out, layout.length, len(value), f"element count of key {key!r}")
    if etype == ValueType.STRING:
        out += _string_array_bytes(key, value, layout)
    elif etype == ValueType.ARRAY:
        for i, item in enumerate(value):
            inner = _inner_type(f"{key}[{i}]", item)
            _put_array(out, f"{key}[{i}]", item, inner, layout, depth + 1)
    else:
        out += _numeric_bytes(key, value, etype)


def _string_array_bytes(key: str, values: Any, layout: _Layout) -> bytes:
    """Length-prefixed strings; the fast path is one comprehension per step."""
    try:
        raws = [v.encode("utf-8", "surrogateescape") for v in values]
    except (AttributeError, UnicodeEncodeError):  # bytes, or bad items: name the culprit
        raws = [_string_bytes(f"{key}[{i}]", v) for i, v in enumerate(values)]
    pack = layout.length.pack
    if raws and len(max(raws, key=len)) > 2**32 - 1 and layout.length.size == 4:
        raise GGUFWriteError(f"key {key!r}: a string is too long for GGUF v1")
    return b"".join([part for raw in raws for part in (pack(len(raw)), raw)])


def _string_bytes(key: str, value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if not isinstance(value, str):
        raise GGUFWriteError(f"key {key!r}: a STRING value must be str or bytes, not {value!r}")
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise GGUFWriteError(f"key {key!r}: string cannot be encoded ({exc.reason})") from None


def _numeric_bytes(key: str, value: Any, etype: ValueType) -> bytes:
    """Little-endian bytes of a numeric array, refusing values the type cannot hold."""
    target = np.dtype(SCALAR_DTYPES[etype])
    try:
        src = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise GGUFWriteError(f"key {key!r}: not a numeric array ({exc})") from None
    if src.ndim != 1:
        raise GGUFWriteError(f"key {key!r}: arrays are one-dimensional, got shape {src.shape}")
    if src.size == 0:
        return b""
    problem = _numeric_problem(src, etype, target)
    if problem:
        raise GGUFWriteError(f"key {key!r}: cannot write as array of {etype.name}: {problem}")
    with np.errstate(over="ignore", invalid="ignore"):
        converted = src.astype(target)
    if target.kind == "f" and src.dtype.kind == "f" and (np.isinf(converted) & np.isfinite(src)).any():
        raise GGUFWriteError(f"key {key!r}: values overflow {etype.name}")
    return converted.tobytes()


def _numeric_problem(src: np.ndarray, etype: ValueType, target: np.dtype[Any]) -> str | None:
    kind = src.dtype.kind
    if etype == ValueType.BOOL:
        if kind == "b" or (kind in "iu" and ((src == 0) | (src == 1)).all()):
            return None
        return "elements must be True/False"
    if target.kind in "iu":
        if kind == "O" and all(isinstance(v, (int, np.integer)) for v in src.tolist()):
            kind = "i"
        if kind not in "biu":
            return f"elements of dtype {src.dtype} are not integers"
        info = np.iinfo(target)
        lo, hi = int(src.min()), int(src.max())
        return None if info.min <= lo and hi <= info.max else f"range [{lo}, {hi}] overflows"
    return None if kind in "biuf" else f"elements of dtype {src.dtype} are not numbers"


# -- layout -----------------------------------------------------------------


def _alignment(meta: dict[str, Any], alignment: int | None) -> int:
    if Keys.ALIGNMENT in meta:
        value = meta[Keys.ALIGNMENT]
        if alignment is not None and alignment != value:
            raise GGUFWriteError(
                f"alignment={alignment} disagrees with {Keys.ALIGNMENT}={value} in the metadata")
        alignment = value
    elif alignment is not None:
        meta[Keys.ALIGNMENT] = alignment
    else:
        return DEFAULT_ALIGNMENT
    if not isinstance(alignment, (int, np.integer)) or alignment <= 0 \
            or alignment & (alignment - 1) or alignment >= 2**32:
        raise GGUFWriteError(f"alignment {alignment!r} is not a power of two below 2**32")
    return int(alignment)


def _tensor_entries(tensors: Iterable[Any], align: int, max_data: int | None) -> list[_Entry]:
    """(name, shape, ggml type id, relative offset, nbytes) for each tensor."""
    entries: list[_Entry] = []
    names: set[str] = set()
    offset = 0
    for t in tensors:
        name, shape, ggml_type = _tensor_fields(t)
        _check_tensor_name(name, names)
        ggml_type = _ggml_type_id(name, ggml_type)
        nbytes = _tensor_nbytes(name, shape, ggml_type)
        entries.append((name, shape, ggml_type, offset, nbytes))
        offset += nbytes + (-nbytes) % align
        if max_data is not None and offset > max_data:
            raise GGUFWriteError(f"tensor {name!r}: tensor data passes {offset} bytes, more "
                                 f"than the {max_data} this in-memory writer builds")
    return entries


def _tensor_fields(t: Any) -> tuple[str, tuple[int, ...], int | str]:
    if hasattr(t, "ggml_type"):
        return t.name, tuple(t.shape), t.ggml_type
    try:
        name, shape, ggml_type = t
        return name, tuple(int(d) for d in shape), ggml_type
    except (TypeError, ValueError):
        raise GGUFWriteError(f"tensor {t!r}: expected (name, shape, ggml_type)") from None


def _check_tensor_name(name: object, seen: set[str]) -> None:
    if not isinstance(name, str):
        raise GGUFWriteError(f"tensor name {name!r} is not a str")
    try:
        n = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise GGUFWriteError(f"tensor name {name!r} is not valid UTF-8") from None
    if n >= MAX_NAME:
        raise GGUFWriteError(f"tensor name {name!r} is {n} bytes, at most {MAX_NAME - 1}")
    if name in seen:
        raise GGUFWriteError(f"duplicate tensor name {name!r}")
    seen.add(name)


def _ggml_type_id(name: str, ggml_type: int | str) -> int:
    tid = _GGML_BY_NAME.get(ggml_type, ggml_type) if isinstance(ggml_type, str) else ggml_type
    if tid not in GGML_TYPES:
        raise GGUFWriteError(f"tensor {name!r}: unknown ggml type {ggml_type!r}")
    return int(tid)


def _tensor_nbytes(name: str, shape: tuple[int, ...], tid: int) -> int:
    _, block, type_size = GGML_TYPES[tid]
    if len(shape) > MAX_DIMS or any(d < 0 for d in shape):
        raise GGUFWriteError(f"tensor {name!r}: shape {shape} needs 0..{MAX_DIMS} "
                             "non-negative dimensions")
    if shape and shape[0] % block:
        raise GGUFWriteError(f"tensor {name!r}: first dimension {shape[0]} is not a "
                             f"multiple of the block size {block}")
    return int(np.prod(shape, dtype=object)) // block * type_size


def _put_tensor_info(out: bytearray, name: str, shape: tuple[int, ...], ggml_type: int, offset: int,
                     layout: _Layout) -> None:
    raw = name.encode("utf-8")
    _pack(out, layout.length, len(raw), f"length of tensor name {name!r}")
    out += raw
    out += _U32.pack(len(shape))
    for d in shape:
        _pack(out, layout.dim, d, f"dimension of tensor {name!r}")
    out += _U32.pack(ggml_type)
    out += struct.pack("<Q", offset)


def _pack(out: bytearray, st: struct.Struct, value: int, what: str) -> None:
    try:
        out += st.pack(value)
    except struct.error:
        raise GGUFWriteError(f"{what}: {value} does not fit the format") from None


def _pad(out: bytearray, align: int) -> None:
    out += bytes((-len(out)) % align)
