"""A strict, read-only GGUF parser: metadata and tensor directory, never tensor data.

`read(path)` returns a `GGUFFile`. Every byte is taken through one bounds-checked
cursor (`_Cursor`), and every length or count is checked against the bytes that
remain before anything is allocated or looped over, so a hostile header can
neither over-read, nor allocate gigabytes, nor loop for long. Anything wrong
raises `GGUFError` naming the byte offset and the key or tensor; `read()` raises
nothing else, apart from `OSError` for the path itself.

Versions 1, 2 and 3 are read (v1 has 32-bit lengths, counts and dimensions),
with all 13 value types, arrays of every element type, arrays of strings and
nested arrays (up to `MAX_ARRAY_DEPTH` deep, `MAX_NESTED_ARRAYS` in all), and
`general.alignment`.

Values: integers and floats come back as Python `int`/`float`, bools as `bool`,
strings as `str`, numeric arrays as little-endian numpy arrays (BOOL arrays as
numpy `bool`), string arrays as `list[str]`, nested arrays as `list` of arrays.
String values are decoded with ``surrogateescape``: valid UTF-8 reads as itself
and any other byte survives as a lone surrogate, so `as_bytes(s)` gives back the
exact bytes on disk. Keys and tensor names must be valid UTF-8. A top-level string
array's exact bytes are also kept, joined by NUL, in `GGUFFile.raw_strings` (when
no element holds a NUL itself).

Example:
    >>> f = read("ggml-vocab-llama-spm.gguf")
    >>> f.metadata["tokenizer.ggml.model"]
    'llama'
    >>> f.types["tokenizer.ggml.scores"]
    (<ValueType.ARRAY: 9>, <ValueType.FLOAT32: 6>)
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GGUFError, GGUFTruncated
from .constants import (
    DEFAULT_ALIGNMENT,
    GGML_TYPES,
    GGUF_MAGIC,
    MAX_DIMS,
    MAX_NAME,
    SCALAR_DTYPES,
    SCALAR_FORMATS,
    SUPPORTED_VERSIONS,
    Keys,
    ValueType,
)

__all__ = ["MAX_ARRAY_DEPTH", "MAX_NESTED_ARRAYS", "GGUFFile", "StringArray", "TensorInfo", "as_bytes", "parse", "read"]

MAX_ARRAY_DEPTH = 8  # arrays nested deeper than this are refused, not recursed into
# Nested arrays in a whole file (llama.cpp refuses them all): each becomes a Python object of
# ~100 bytes from 12 bytes on disk, so without a cap 2 million empty ones in 24 MB took 384 MB.
MAX_NESTED_ARRAYS = 1 << 16
_INT64_MAX = 2**63 - 1
_SCALAR_STRUCTS = {vt: struct.Struct(fmt) for vt, fmt in SCALAR_FORMATS.items()}
_SCALAR_NP = {vt: np.dtype(dt) for vt, dt in SCALAR_DTYPES.items()}


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor directory. `offset` is absolute in the file."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    type_name: str
    offset: int
    nbytes: int


@dataclass(frozen=True)
class GGUFFile:
    """A parsed GGUF header: metadata values, value types and tensor directory.

    `data_offset` is where the tensor data section starts, as llama.cpp's
    `gguf_get_data_offset` reports it: padded to `alignment` when the file has
    tensors, and the end of the header when it has none.
    """

    version: int
    metadata: dict[str, Any]
    types: dict[str, tuple[ValueType, ValueType | None]]  # key -> (type, element type)
    tensors: list[TensorInfo]
    alignment: int
    data_offset: int
    file_size: int
    offsets: dict[str, int] = field(default_factory=dict)  # key -> byte offset of its value
    # key -> a string array's exact bytes, its strings joined by NUL (when none holds a NUL),
    # so the vocabulary takes token texts and merges without encoding them again
    raw_strings: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)

    def where(self, key: str) -> str:
        """`"key 'k' (offset 0x1f3a0)"`, for error messages about a key."""
        off = self.offsets.get(key)
        return f"key {key!r}" + ("" if off is None else f" (offset {off:#x})")


# a tensor as read, before its type and extent are checked: name, shape, ggml type, offset,
# and where its record and its type field start
_RawTensor = tuple[str, tuple[int, ...], int, int, int, int]


def as_bytes(value: str) -> bytes:
    """The exact on-disk bytes of a string value returned by the reader."""
    return value.encode("utf-8", "surrogateescape")


def read(path: str | os.PathLike[str], *, metadata_only: bool = False, lazy_strings: bool = False) -> GGUFFile:
    """Parse the GGUF header of the file at `path` (memory-mapped, read-only).

    Only the pages the header spans are touched; tensor data is never read.
    With `metadata_only`, reading stops after the metadata: the tensor
    directory is not read, so a file cut after its metadata (a first chunk, a
    download stopped early) reads, with `tensors` empty and `data_offset` the
    end of the metadata. A file cut inside its metadata still fails.
    With `lazy_strings`, a top-level string array that `raw_strings` holds is
    returned as a `StringArray`, decoded only when it is first used.
    """
    name = os.fspath(path)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise GGUFError(f"{name}: empty file (offset 0x0): not a GGUF file")
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as exc:  # e.g. a special file that cannot be mapped
            raise GGUFError(f"{name}: cannot map the file (offset 0x0): {exc}") from None
        with mm:
            return parse(mm, name=name, metadata_only=metadata_only, lazy_strings=lazy_strings)


def parse(buf: bytes | bytearray | memoryview | mmap.mmap, *, name: str = "<bytes>",
          metadata_only: bool = False, lazy_strings: bool = False) -> GGUFFile:
    """Parse a GGUF header held in memory (same rules and errors as `read`)."""
    try:
        return _Parser(buf, name, lazy_strings=lazy_strings).run(metadata_only=metadata_only)
    except GGUFError:
        raise
    except (struct.error, ValueError, OverflowError, MemoryError, IndexError,
            RecursionError) as exc:
        # A safety net that the corruption tests check is never reached.
        raise GGUFError(
            f"{name}: malformed GGUF (internal error {type(exc).__name__}: {exc})"
        ) from exc


Buffer = bytes | bytearray | mmap.mmap


class _Cursor:
    """The only thing that touches the bytes: every take is bounds-checked."""

    def __init__(self, buf: Buffer, name: str) -> None:
        self.buf = buf
        self.size = len(buf)
        self.pos = 0
        self.name = name

    def remaining(self) -> int:
        return self.size - self.pos

    def fail(self, what: str, at: int | None = None) -> GGUFError:
        at = self.pos if at is None else at
        return GGUFError(f"{self.name}: {what} (offset {at:#x})")

    def short(self, what: str, needed: int, at: int | None = None) -> GGUFTruncated:
        """A `GGUFTruncated` naming the offset: `needed` bytes of file would hold what is announced."""
        at = self.pos if at is None else at
        return GGUFTruncated(f"{self.name}: {what} (offset {at:#x})", needed)

    def need(self, n: int, what: str) -> None:
        if n < 0 or n > self.size - self.pos:
            raise self.short(
                f"truncated: {what} needs {n} bytes but only {self.size - self.pos} remain",
                self.pos + max(n, 0))

    def take(self, n: int, what: str) -> bytes:
        self.need(n, what)
        start = self.pos
        self.pos += n
        return bytes(self.buf[start:self.pos])

    def scalar(self, vtype: ValueType, what: str) -> Any:
        st = _SCALAR_STRUCTS[vtype]
        self.need(st.size, what)
        (value,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return value

    def array(self, vtype: ValueType, count: int, what: str) -> np.ndarray:
        dtype = _SCALAR_NP[vtype]
        self.need(count * dtype.itemsize, what)
        out = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos).copy()
        self.pos += count * dtype.itemsize
        return out

    def strings(self, count: int, len_type: ValueType, what: str,
                lazy: bool = False) -> tuple[Sequence[str], bytes | None]:
        """`count` length-prefixed strings, decoded with surrogateescape, and their raw bytes.

        Where each string starts is found with numpy (`_string_starts_numpy`),
        or else by walking the length fields (`_string_starts`); numpy then cuts them out of the
        array's bytes at once, leaving the strings joined by NUL, which one
        `decode` and one `split` turn into the list. That joined `bytes` is
        returned too, unless an element holds a NUL itself (then it is None
        and each element is decoded on its own); with `lazy`, the list is a
        `StringArray` that decodes them on first use. A short buffer stops the
        walk, and `_strings_checked` reads the array again to name the
        element and offset.
        """
        begin, width = self.pos, _SCALAR_STRUCTS[len_type].size
        found = _string_starts_numpy(self.buf, begin, self.size, count, width)
        if found is None:
            walked = _string_starts(self.buf, begin, self.size, count, len_type)
            if walked is None:
                return self._strings_checked(count, len_type, what), None  # raises, naming the element
            end = walked.pop()  # the walk's last entry is where the array ends
            found = np.array(walked, dtype=np.int64), end
        starts, end = found
        region = bytes(self.buf[begin:end])
        self.pos = end
        if not count:
            return [], None
        joined = _joined(region, starts - begin, width)
        if joined.count(0) != count - 1:  # an element holds a NUL: cut them one by one
            cuts = [*starts.tolist(), end + width]
            return [region[a - begin:b - begin - width].decode("utf-8", "surrogateescape")
                    for a, b in itertools.pairwise(cuts)], None
        if lazy:
            return StringArray(joined, count), joined
        return joined.decode("utf-8", "surrogateescape").split("\x00"), joined

    def _strings_checked(self, count: int, len_type: ValueType, what: str) -> list[str]:
        """`strings` one element at a time, each length and each string checked first."""
        buf, size = self.buf, self.size
        unpack = _SCALAR_STRUCTS[len_type].unpack_from
        width = _SCALAR_STRUCTS[len_type].size
        out: list[str] = []
        pos = self.pos
        for i in range(count):
            if width > size - pos:
                self.pos = pos
                raise self.short(f"truncated: length of element {i} of {what}", pos + width)
            (n,) = unpack(buf, pos)
            pos += width
            if n > size - pos:
                self.pos = pos - width
                raise self.short(
                    f"truncated: element {i} of {what} claims {n} bytes "
                    f"but only {size - pos} remain", pos + n)
            out.append(buf[pos:pos + n].decode("utf-8", "surrogateescape"))
            pos += n
        self.pos = pos
        return out


class StringArray(Sequence[str]):
    """A string array read with `lazy_strings`: its bytes joined by NUL (no element holds
    one), decoded into a `list[str]` (surrogateescape) the first time it is used.

    `Tokenizer.from_gguf` reads this way: its vocabulary takes the token texts
    and merges from `GGUFFile.raw_strings` as bytes, so the 408,403 `str`s of
    llama-bpe's two arrays are never built unless someone asks for them.
    """

    __slots__ = ("_count", "_strings", "joined")

    def __init__(self, joined: bytes, count: int) -> None:
        self.joined, self._count = joined, count
        self._strings: list[str] | None = None

    @property
    def strings(self) -> list[str]:
        if self._strings is None:
            self._strings = self.joined.decode("utf-8", "surrogateescape").split("\x00")
        return self._strings

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):  # type: ignore[no-untyped-def]  # int or slice, as a list's
        return self.strings[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self.strings)

    def __eq__(self, other: object) -> bool:
        return self.strings == (other.strings if isinstance(other, StringArray) else other)

    __hash__ = None  # type: ignore[assignment]  # like a list

    def __repr__(self) -> str:
        return f"<StringArray of {self._count}>"


def _decode_all(raw: Sequence[bytes | bytearray]) -> list[str]:
    """Each of `raw` decoded with surrogateescape, in one `decode` when no element holds a NUL.

    Exact: a NUL is a whole UTF-8 character, so an invalid sequence at the end
    of one element cannot run into the next, and each byte surrogateescape
    stands in for is the same either way (tests/tokenizer/test_gguf_reader.py checks
    it against one decode per element). `_Cursor.strings` relies on the same.
    """
    joined = b"\x00".join(raw)
    if joined.count(0) == len(raw) - 1:
        return joined.decode("utf-8", "surrogateescape").split("\x00")
    return [r.decode("utf-8", "surrogateescape") for r in raw]


def _string_starts(buf: Buffer, pos: int, size: int, count: int, len_type: ValueType) -> list[int] | None:
    """Where each of `count` length-prefixed strings starts, then where the last one ends;
    None when the buffer ends first. Only the length fields are read."""
    unpack = _SCALAR_STRUCTS[len_type].unpack_from
    width = _SCALAR_STRUCTS[len_type].size
    starts: list[int] = []
    append = starts.append
    try:
        for _ in range(count):
            (n,) = unpack(buf, pos)  # struct.error when fewer than `width` bytes remain
            pos += width
            append(pos)
            pos += n
            if pos > size:
                return None
    except struct.error:
        return None
    append(pos)
    return starts


def _string_starts_numpy(buf: Buffer, pos: int, size: int, count: int,
                         width: int) -> tuple[np.ndarray, int] | None:
    """`_string_starts` without a Python step per string, or None when this cannot tell.

    Guess: a length field is a `width`-byte value below 65,536 (bytes 2 and up
    zero) with a non-NUL byte before it (or the array start) and after it (the
    string's first byte), which holds when no string is empty or holds a NUL.
    Then check the guess the way the walk goes: the first field at `pos`, each
    next one right after the string before it. What passes is the walk's
    answer; anything else (too few fields, or a guess off the chain) gives None.
    """
    if count < 1024:  # the walk is quicker
        return None
    span = count * 24
    while True:
        stop = min(size, pos + span)
        n = stop - pos
        window = bytes(buf[pos:stop]) + bytes(width)
        zero = np.frombuffer(window, dtype=np.uint8) == 0
        guess = ~zero[width:n + width]  # the string's first byte
        for k in range(2, width):
            guess &= zero[k:n + k]
        guess[1:] &= ~zero[:n - 1]
        fields = np.flatnonzero(guess)[:count]
        if len(fields) == count and fields[0] == 0:
            value = np.ndarray(shape=(n,), dtype=f"<u{width}", buffer=window, strides=(1,))
            after = fields + width + value[fields].astype(np.int64)
            if after[-1] <= n and np.array_equal(after[:-1], fields[1:]):
                return fields + (pos + width), int(after[-1]) + pos
            if after[-1] <= n or stop == size:
                return None  # off the chain, or a file cut short: the walk says which
        elif stop == size:
            return None
        span *= 2


def _joined(region: bytes, starts: np.ndarray, width: int) -> bytes:
    """The strings of an array's bytes (`region`, each string at `starts`, after its
    `width`-byte length) joined by one NUL: the last byte of each length field but the
    first becomes the NUL, the rest of the fields are dropped."""
    data = np.frombuffer(region, dtype=np.uint8).copy()
    data[starts - 1] = 0
    keep = np.ones(len(data), dtype=bool)
    for back in range(2, width + 1):
        keep[starts - back] = False
    keep[starts[0] - 1] = False  # the first string has no NUL before it
    return data[keep].tobytes()


class _Parser:
    def __init__(self, buf: Buffer | memoryview, name: str, *, lazy_strings: bool = False) -> None:
        if isinstance(buf, memoryview):  # its slices cannot .decode(); bytes can
            buf = buf.tobytes()
        self.cur = _Cursor(buf, name)
        self.version = 0
        self.len_type = ValueType.UINT64
        self.nested = 0  # nested arrays read so far (MAX_NESTED_ARRAYS)
        self.raw_strings: dict[str, bytes] = {}
        self.lazy_strings = lazy_strings

    # -- primitives ---------------------------------------------------------

    def length(self, what: str) -> int:
        return int(self.cur.scalar(self.len_type, what))

    def string(self, what: str, *, strict: bool = False) -> str:
        at = self.cur.pos
        n = self.length(f"length of {what}")
        raw = self.cur.take(n, what)
        if strict:
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self.cur.fail(f"{what} is not valid UTF-8 ({exc.reason})", at) from None
        return raw.decode("utf-8", "surrogateescape")

    def value_type(self, what: str) -> ValueType:
        at = self.cur.pos
        raw = self.cur.scalar(ValueType.UINT32, what)
        try:
            return ValueType(raw)
        except ValueError:
            raise self.cur.fail(f"{what}: unknown value type {raw}", at) from None

    # -- values -------------------------------------------------------------

    def value(self, vtype: ValueType, key: str, depth: int = 0) -> Any:
        if vtype == ValueType.STRING:
            return self.string(f"string value of key {key!r}")
        if vtype == ValueType.ARRAY:
            return self.array(key, depth)
        at = self.cur.pos
        value = self.cur.scalar(vtype, f"value of key {key!r}")
        if vtype == ValueType.BOOL:
            if value not in (0, 1):
                raise self.cur.fail(f"key {key!r}: bool byte is {value}, not 0 or 1", at)
            return bool(value)
        return value

    def array(self, key: str, depth: int) -> Any:
        if depth >= MAX_ARRAY_DEPTH:
            raise self.cur.fail(f"key {key!r}: arrays nested deeper than {MAX_ARRAY_DEPTH}")
        etype = self.value_type(f"element type of array {key!r}")
        count_at = self.cur.pos
        count = self.length(f"element count of array {key!r}")
        min_size = _min_size(etype, self.len_type)
        if count > self.cur.remaining() // min_size:
            raise self.cur.short(
                f"key {key!r}: array claims {count} elements of type {etype.name}, "
                f"more than the {self.cur.remaining()} remaining bytes can hold",
                self.cur.pos + count * min_size, count_at)
        if etype in SCALAR_DTYPES:
            return self.scalar_array(key, etype, count)
        if etype == ValueType.STRING:
            top = depth == 0
            strings, joined = self.cur.strings(count, self.len_type, f"array {key!r}",
                                               lazy=top and self.lazy_strings)
            if top and joined is not None:
                self.raw_strings[key] = joined
            return strings
        self.nested += count
        if self.nested > MAX_NESTED_ARRAYS:
            raise self.cur.fail(
                f"key {key!r}: more than {MAX_NESTED_ARRAYS} nested arrays in the file "
                f"(this array holds {count}; llama.cpp refuses nested arrays)", count_at)
        return [self.array(key, depth + 1) for _ in range(count)]

    def scalar_array(self, key: str, etype: ValueType, count: int) -> np.ndarray:
        start = self.cur.pos
        arr = self.cur.array(etype, count, f"array {key!r}")
        if etype != ValueType.BOOL:
            return arr
        bad = np.flatnonzero(arr > 1)
        if bad.size:
            i = int(bad[0])
            raise self.cur.fail(
                f"key {key!r}: element {i} is bool byte {arr[i]}, not 0 or 1", start + i)
        return arr.astype(bool)

    # -- file structure -----------------------------------------------------

    def header(self) -> tuple[int, int]:
        magic = self.cur.take(4, "magic")
        if magic != GGUF_MAGIC:
            raise self.cur.fail(f"bad magic {magic!r}: not a GGUF file (expected b'GGUF')", 0)
        self.version = self.cur.scalar(ValueType.UINT32, "version")
        if self.version not in SUPPORTED_VERSIONS:
            hint = ""
            if self.version and not self.version & 0xFFFF:
                hint = " (a big-endian file? only little-endian GGUF is read)"
            raise self.cur.fail(
                f"unsupported GGUF version {self.version}{hint} (supported: "
                f"{', '.join(map(str, SUPPORTED_VERSIONS))})", 4
            )
        if self.version == 1:
            self.len_type = ValueType.UINT32
        n_tensors = self.length("tensor count")
        n_kv = self.length("metadata count")
        return n_tensors, n_kv

    def metadata(self, n_kv: int) -> tuple[dict[str, Any], dict[str, tuple[ValueType, ValueType | None]],
                                           dict[str, int]]:
        w = _len_width(self.len_type)
        # smallest possible KV: key length + 1-byte key + type + 1-byte value
        self.check_count(n_kv, w + 1 + 4 + 1, "metadata count", 8 + w)
        values: dict[str, Any] = {}
        types: dict[str, tuple[ValueType, ValueType | None]] = {}
        offsets: dict[str, int] = {}
        for i in range(n_kv):
            key = self.key(i, values)
            vtype = self.value_type(f"value type of key {key!r}")
            etype = _peek_element_type(self.cur) if vtype == ValueType.ARRAY else None
            offsets[key] = self.cur.pos
            values[key] = self.value(vtype, key)
            types[key] = (vtype, etype)
        return values, types, offsets

    def key(self, i: int, seen: Mapping[str, Any]) -> str:
        at = self.cur.pos
        key = self.string(f"key of metadata entry {i}", strict=True)
        if not key:
            raise self.cur.fail(f"metadata entry {i} has an empty key", at)
        if key in seen:
            raise self.cur.fail(f"duplicate key {key!r} (metadata entry {i})", at)
        return key

    def check_count(self, count: int, min_size: int, what: str, at: int) -> None:
        if count > self.cur.remaining() // min_size:
            raise self.cur.short(
                f"{what} is {count}, more than the {self.cur.remaining()} remaining "
                f"bytes can hold", self.cur.pos + count * min_size, at)

    def tensor_infos(self, n_tensors: int) -> list[_RawTensor]:
        w = _len_width(self.len_type)
        dim_w = 4 if self.version == 1 else 8
        self.check_count(n_tensors, w + 4 + 4 + 8, "tensor count", 8)
        infos: list[_RawTensor] = []
        names: set[str] = set()
        for i in range(n_tensors):
            at = self.cur.pos
            name = self.tensor_name(i, names)
            n_dims = self.cur.scalar(ValueType.UINT32, f"n_dims of tensor {name!r}")
            if n_dims > MAX_DIMS:
                raise self.cur.fail(
                    f"tensor {name!r}: n_dims {n_dims} exceeds {MAX_DIMS}", self.cur.pos - 4)
            self.cur.need(n_dims * dim_w, f"dimensions of tensor {name!r}")
            dim_type = ValueType.UINT32 if self.version == 1 else ValueType.INT64
            shape = tuple(
                self.cur.scalar(dim_type, f"dimension {d} of tensor {name!r}")
                for d in range(n_dims)
            )
            type_at = self.cur.pos
            ggml_type = self.cur.scalar(ValueType.UINT32, f"type of tensor {name!r}")
            offset = self.cur.scalar(ValueType.UINT64, f"offset of tensor {name!r}")
            infos.append((name, shape, ggml_type, offset, at, type_at))
        return infos

    def tensor_name(self, i: int, names: set[str]) -> str:
        at = self.cur.pos
        name = self.string(f"name of tensor {i}", strict=True)
        if len(name.encode()) >= MAX_NAME:
            raise self.cur.fail(
                f"tensor {i} name {name[:MAX_NAME]!r}... is {len(name.encode())} bytes, "
                f"llama.cpp allows at most {MAX_NAME - 1}", at)
        if name in names:
            raise self.cur.fail(f"duplicate tensor name {name!r} (tensor {i})", at)
        names.add(name)
        return name

    def tensors(self, raw: list[_RawTensor], data_offset: int, alignment: int) -> list[TensorInfo]:
        out = []
        for name, shape, ggml_type, offset, at, type_at in raw:
            if ggml_type not in GGML_TYPES:
                raise self.cur.fail(f"tensor {name!r}: unknown ggml type {ggml_type}", type_at)
            type_name, block, type_size = GGML_TYPES[ggml_type]
            nbytes = _tensor_nbytes(self.cur, name, shape, block, type_size, at)
            if offset % alignment:
                raise self.cur.fail(
                    f"tensor {name!r}: data offset {offset} is not a multiple of "
                    f"the alignment {alignment}", type_at + 4)
            start = data_offset + offset
            if start + nbytes > self.cur.size:
                raise self.cur.fail(
                    f"tensor {name!r}: data [{start:#x}, {start + nbytes:#x}) lies outside "
                    f"the file of {self.cur.size:#x} bytes", type_at + 4)
            out.append(TensorInfo(name, shape, ggml_type, type_name, start, nbytes))
        _check_overlaps(self.cur, out)
        return out

    def run(self, *, metadata_only: bool = False) -> GGUFFile:
        n_tensors, n_kv = self.header()
        values, types, offsets = self.metadata(n_kv)
        alignment = _alignment(self.cur, values, types, offsets)
        raw = [] if metadata_only else self.tensor_infos(n_tensors)
        data_offset = self.cur.pos
        if raw:
            data_offset += (-data_offset) % alignment
            if data_offset > self.cur.size:
                raise self.cur.fail(
                    f"truncated: tensor data should start at {data_offset:#x} but the file "
                    f"has {self.cur.size:#x} bytes")
        tensors = self.tensors(raw, data_offset, alignment)
        return GGUFFile(
            version=self.version,
            metadata=values,
            types=types,
            tensors=tensors,
            alignment=alignment,
            data_offset=data_offset,
            file_size=self.cur.size,
            offsets=offsets,
            raw_strings=self.raw_strings,
        )


def _len_width(len_type: ValueType) -> int:
    return _SCALAR_STRUCTS[len_type].size


def _min_size(etype: ValueType, len_type: ValueType) -> int:
    """Fewest bytes one array element of `etype` can take on disk."""
    if etype in SCALAR_DTYPES:
        return _SCALAR_NP[etype].itemsize
    if etype == ValueType.STRING:
        return _len_width(len_type)
    return 4 + _len_width(len_type)  # nested array: element type + count


def _peek_element_type(cur: _Cursor) -> ValueType | None:
    """The element type of the array at the cursor, or None (the read then fails)."""
    if cur.remaining() < 4:
        return None
    raw = _SCALAR_STRUCTS[ValueType.UINT32].unpack_from(cur.buf, cur.pos)[0]
    return ValueType(raw) if raw in ValueType._value2member_map_ else None


def _alignment(cur: _Cursor, values: Mapping[str, Any],
               types: Mapping[str, tuple[ValueType, ValueType | None]], offsets: Mapping[str, int]) -> int:
    if Keys.ALIGNMENT not in values:
        return DEFAULT_ALIGNMENT
    at = offsets[Keys.ALIGNMENT]
    vtype = types[Keys.ALIGNMENT][0]
    value = values[Keys.ALIGNMENT]
    if vtype != ValueType.UINT32:
        raise cur.fail(f"key {Keys.ALIGNMENT!r} has type {vtype.name}, expected UINT32", at)
    if value == 0 or value & (value - 1):
        raise cur.fail(f"key {Keys.ALIGNMENT!r} is {value}, not a power of two", at)
    return int(value)


def _tensor_nbytes(cur: _Cursor, name: str, shape: tuple[int, ...], block: int, type_size: int,
                   at: int) -> int:
    elements = 1
    for d, n in enumerate(shape):
        if n < 0:
            raise cur.fail(f"tensor {name!r}: dimension {d} is negative ({n})", at)
        elements *= n
    if elements > _INT64_MAX:
        raise cur.fail(
            f"tensor {name!r}: element count of shape {shape} overflows int64", at)
    if shape and shape[0] % block:
        raise cur.fail(
            f"tensor {name!r}: first dimension {shape[0]} is not a multiple of the "
            f"block size {block} of its type", at)
    nbytes = elements // block * type_size
    if nbytes > _INT64_MAX:
        raise cur.fail(f"tensor {name!r}: byte size {nbytes} overflows int64", at)
    return nbytes


def _check_overlaps(cur: _Cursor, tensors: list[TensorInfo]) -> None:
    ordered = sorted((t for t in tensors if t.nbytes), key=lambda t: t.offset)
    for a, b in itertools.pairwise(ordered):
        if a.offset + a.nbytes > b.offset:
            raise cur.fail(
                f"tensors {a.name!r} [{a.offset:#x}, {a.offset + a.nbytes:#x}) and "
                f"{b.name!r} [{b.offset:#x}, ...) overlap", b.offset)
