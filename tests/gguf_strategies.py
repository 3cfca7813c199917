"""Hypothesis strategies for GGUF content, and raw byte builders for hand-made files.

The strategies produce what `harness.models.gguf_writer.build` takes (metadata,
explicit types, version, alignment, tensors) and aim at the traps of a GGUF
reader: every value type and element type, string values that are not valid
UTF-8, empty and nested arrays, v1's 32-bit lengths, alignments other than 32,
tensors of block-quantised types.

The raw builders (`header`, `gguf_string`, `kv`, `tensor_info`, `padded`)
assemble bytes by hand, independent of our writer, so a test can place a
malformed field at an offset it knows.
"""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tokenizer.gguf.constants import GGML_TYPES, SCALAR_DTYPES, ValueType

# -- raw bytes ----------------------------------------------------------------


def length_format(version: int) -> str:
    return "<I" if version == 1 else "<Q"


def header(n_tensors: int, n_kv: int, *, version: int = 3, magic: bytes = b"GGUF") -> bytes:
    """Magic, version, tensor count, metadata count."""
    fmt = length_format(version)
    return magic + struct.pack("<I", version) + struct.pack(fmt, n_tensors) + struct.pack(fmt, n_kv)


def gguf_string(raw: bytes | str, *, version: int = 3, length: int | None = None) -> bytes:
    """A length-prefixed string; `length` overrides the prefix (to lie about it)."""
    raw = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw
    return struct.pack(length_format(version), len(raw) if length is None else length) + raw


def kv(key: bytes | str, vtype: int, payload: bytes, *, version: int = 3) -> bytes:
    """One metadata entry: key, value type, then the already-encoded value."""
    return gguf_string(key, version=version) + struct.pack("<I", vtype) + payload


def array_payload(etype: int, count: int, body: bytes, *, version: int = 3) -> bytes:
    """An array value: element type, element count, elements."""
    return struct.pack("<I", etype) + struct.pack(length_format(version), count) + body


def tensor_info(name: str, dims, ggml_type: int, offset: int, *, version: int = 3) -> bytes:
    """One tensor directory entry (v1 dimensions are uint32, later ones int64)."""
    dim_fmt = "<I" if version == 1 else "<q"
    out = gguf_string(name, version=version) + struct.pack("<I", len(dims))
    out += b"".join(struct.pack(dim_fmt, d) for d in dims)
    return out + struct.pack("<I", ggml_type) + struct.pack("<Q", offset)


def padded(data: bytes, alignment: int = 32) -> bytes:
    return data + bytes((-len(data)) % alignment)


# -- strategies ---------------------------------------------------------------

_INT_BOUNDS = {
    ValueType.UINT8: (0, 2**8 - 1), ValueType.INT8: (-2**7, 2**7 - 1),
    ValueType.UINT16: (0, 2**16 - 1), ValueType.INT16: (-2**15, 2**15 - 1),
    ValueType.UINT32: (0, 2**32 - 1), ValueType.INT32: (-2**31, 2**31 - 1),
    ValueType.UINT64: (0, 2**64 - 1), ValueType.INT64: (-2**63, 2**63 - 1),
}
NUMERIC_TYPES = tuple(SCALAR_DTYPES)  # every fixed-size type, BOOL included


def keys() -> st.SearchStrategy[str]:
    """Non-empty keys of any valid UTF-8 (a reader must not assume ASCII keys)."""
    return st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12)


def gguf_strings() -> st.SearchStrategy[str]:
    """Strings as the reader returns them: arbitrary bytes, surrogateescape-decoded.

    Token texts can be invalid UTF-8 (byte tokens, split multibyte sequences);
    the round trip must keep every byte.
    """
    return st.one_of(
        st.text(max_size=12),
        st.binary(max_size=12),
    ).map(lambda v: v.decode("utf-8", "surrogateescape") if isinstance(v, bytes)
          else v.encode("utf-8", "surrogatepass").decode("utf-8", "surrogateescape"))


def scalars(vtype: ValueType) -> st.SearchStrategy:
    """A Python value of the fixed-size `vtype`, over its whole range (no NaN)."""
    if vtype == ValueType.BOOL:
        return st.booleans()
    if vtype in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[vtype]
        return st.integers(lo, hi)
    width = 32 if vtype == ValueType.FLOAT32 else 64
    return st.floats(width=width, allow_nan=False)


def numeric_arrays(etype: ValueType, *, max_size: int = 8) -> st.SearchStrategy:
    """A numpy array of `etype`'s dtype (numpy bool for BOOL), possibly empty."""
    dtype = np.dtype(bool) if etype == ValueType.BOOL else np.dtype(SCALAR_DTYPES[etype])
    elements = st.floats(width=dtype.itemsize * 8, allow_nan=False) if dtype.kind == "f" else None
    return hnp.arrays(dtype, st.integers(0, max_size), elements=elements)


@st.composite
def arrays(draw, *, depth: int = 0) -> tuple[ValueType, object]:
    """(element type, value) of an array: numeric, of strings, or nested (<= 2 deep)."""
    choices = [*NUMERIC_TYPES, ValueType.STRING] + ([ValueType.ARRAY] if depth < 2 else [])
    etype = draw(st.sampled_from(choices))
    if etype == ValueType.STRING:
        return etype, draw(st.lists(gguf_strings(), max_size=6))
    if etype == ValueType.ARRAY:
        inner = draw(st.lists(arrays(depth=depth + 1), max_size=3))
        return etype, [value for _, value in inner]
    return etype, draw(numeric_arrays(etype))


@st.composite
def values(draw) -> tuple[tuple[ValueType, ValueType | None], object]:
    """((type, element type), value) for any of the 13 value types."""
    vtype = draw(st.sampled_from(list(ValueType)))
    if vtype == ValueType.STRING:
        return (vtype, None), draw(gguf_strings())
    if vtype == ValueType.ARRAY:
        etype, value = draw(arrays())
        return (vtype, etype), value
    return (vtype, None), draw(scalars(vtype))


@st.composite
def tensors(draw) -> list[tuple[str, tuple[int, ...], int]]:
    """A few tensors of assorted ggml types, first dimension a multiple of the block."""
    names = draw(st.lists(st.text("abcdefgh.", min_size=1, max_size=10), unique=True, max_size=3))
    out = []
    for name in names:
        tid = draw(st.sampled_from(sorted(GGML_TYPES)))
        block = GGML_TYPES[tid][1]
        dims = draw(st.lists(st.integers(0, 3), max_size=3))
        first = block * draw(st.integers(0, 2))
        shape = (first, *dims) if draw(st.booleans()) else ()
        out.append((name, shape, tid))
    return out


@st.composite
def gguf_files(draw) -> dict:
    """Keyword arguments for `build`: metadata, explicit types, version, alignment, tensors."""
    entries = draw(st.dictionaries(keys(), values(), max_size=6))
    return {
        "metadata": {k: v for k, (_, v) in entries.items()},
        "types": {k: t for k, (t, _) in entries.items()},
        "version": draw(st.sampled_from([1, 2, 3])),
        "alignment": draw(st.sampled_from([None, 1, 8, 32, 64])),
        "tensors": draw(tensors()),
    }
