"""A GGUF file cut after its metadata, checked through a vocab-only copy of that metadata.

The first chunk of a split upload, a download stopped early, or a first shard
(`-00001-of-0000N.gguf`) holds the whole tokenizer but not the tensor data.
llama.cpp refuses such a file even with `vocab_only`: its model loader checks
every tensor's data against the file size before the vocabulary is read
(`llama_tensor_weight` in src/llama-model-loader.h: "tensor data is not within
the file bounds"), and a file with `split.count` > 1 makes it open the other
shards (src/llama-model-loader.cpp). gguf.cpp itself reads the metadata and the
tensor directory without touching the data.

So `vocab_only(cut)` writes what llama.cpp's own vocab-only files are: the
header with a tensor count of 0 and the metadata byte for byte, minus the
`split.*` keys (which only name the other shards); no tensor directory, no data.
Both llama.cpp and the engine under test then load that file, and the report
says so (`Cut.as_source`).

A file cut inside its metadata is not a cut file here: it stays an input error
naming the offset, as before.

    >>> cut = find_cut(Path("model-00001-of-00004.gguf"))
    >>> cut.header_bytes, cut.size            # 1,842,208 of 4,993,024,000 bytes
    >>> vocab_only(cut)                       # .../header-only/<sha>/model-00001-of-00004.gguf
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizer.errors import GGUFError
from tokenizer.gguf import reader as gguf

from ..files.atomic import write_bytes_atomic
from .shipped import cache_dir

SPLIT_KEYS = ("split.no", "split.count", "split.tensors.count")  # llama-arch.cpp, LLM_KV_SPLIT_*
# What our strict reader says when the file ends too early for its tensor directory or data
# (tokenizer/gguf/reader.py: `_Cursor.need`, `_Parser.check_count`, `_Parser.tensors`, `_Parser.run`).
_TOO_SHORT = ("truncated", "remaining bytes can hold", "outside the file")


@dataclass(frozen=True)
class Cut:
    """A GGUF file whose metadata is whole and whose tensor directory or data is cut off."""

    path: Path
    size: int            # bytes the file has
    n_tensors: int       # tensors its header announces
    header_bytes: int    # magic, counts and metadata: where the tensor directory starts
    header_sha256: str   # of those header_bytes
    reason: str          # what the strict reader said about the whole file

    def as_source(self) -> dict[str, Any]:
        """The report's and the golden's `source` for this file."""
        return {"kind": "header-only", "file": self.path.name, "size": self.size,
                "n_tensors": self.n_tensors, "header_bytes": self.header_bytes,
                "header_sha256": self.header_sha256, "why": self.reason}


def find_cut(path: Path) -> Cut | None:
    """`path` as a `Cut` when its metadata reads whole but the strict reader finds it cut short, else None.

    A file with no tensors, one the strict reader takes, and one cut inside its
    metadata are all None: they are checked (or refused) as before. Cheap for
    a file without tensors (the shipped vocabularies): 24 bytes are read.
    """
    try:
        if _tensor_count(path) == 0:
            return None
        gguf.read(path)
        return None
    except OSError:
        return None  # unreadable: the sides say so, as before
    except GGUFError as exc:
        reason = str(exc)
    if not any(mark in reason for mark in _TOO_SHORT):
        return None  # a broken tensor directory, not a short file: refused as before
    try:
        head = gguf.read(path, metadata_only=True)
    except GGUFError:
        return None  # cut inside the metadata: an input error naming the offset
    with path.open("rb") as fh:
        digest = hashlib.sha256(fh.read(head.data_offset)).hexdigest()
    return Cut(path, head.file_size, _tensor_count(path), head.data_offset, digest, reason)


def _tensor_count(path: Path) -> int:
    """The tensor count of a GGUF header (0 for anything too short or not GGUF: the reader says why)."""
    with path.open("rb") as fh:
        raw = fh.read(24)
    if len(raw) < 16 or raw[:4] != b"GGUF":
        return 0
    (version,) = struct.unpack_from("<I", raw, 4)
    if version == 1:
        return int(struct.unpack_from("<I", raw, 8)[0])
    return int(struct.unpack_from("<Q", raw, 8)[0])


def vocab_only(cut: Cut, *, folder: Path | None = None) -> Path:
    """Write (once) the vocab-only GGUF of `cut` and return its path.

    It goes to `<cache>/header-only/<header sha256[:16]>/<the cut file's name>`,
    so the report names the model as the user's file is named.
    """
    folder = folder or cache_dir() / "header-only" / cut.header_sha256[:16]
    target = folder / cut.path.name
    if not target.is_file():
        write_bytes_atomic(target, vocab_only_bytes(cut.path, cut.header_bytes))
    return target


def vocab_only_bytes(path: Path, header_bytes: int) -> bytes:
    """The first `header_bytes` of `path` with the tensor count set to 0 and the `split.*` keys cut out."""
    with path.open("rb") as fh:
        head = fh.read(header_bytes)
    meta = gguf.parse(head, name=str(path), metadata_only=True)
    width = 4 if meta.version == 1 else 8
    fmt = "<I" if width == 4 else "<Q"
    spans = _kv_spans(meta, width)
    kept = [(start, end) for key, (start, end) in spans.items() if key not in SPLIT_KEYS]
    counts = struct.pack(fmt, 0) + struct.pack(fmt, len(kept))
    return head[:8] + counts + b"".join(head[start:end] for start, end in kept)


def _kv_spans(meta: gguf.GGUFFile, width: int) -> dict[str, tuple[int, int]]:
    """Each metadata key's record, [start, end) in the file: key length, key, type, value.

    The reader gives where each value starts; a record starts at its key's
    length field (`width` bytes), then the key, then a 4-byte type.
    """
    starts = [(key, at - 4 - len(key.encode()) - width) for key, at in meta.offsets.items()]
    ends = [start for _, start in starts[1:]] + [meta.data_offset]
    spans = {key: (start, end) for (key, start), end in zip(starts, ends, strict=True)}
    first = 8 + 2 * width
    if (starts and starts[0][1] != first) or any(start >= end for start, end in spans.values()):
        raise RuntimeError(f"metadata records of {meta.version=} are not contiguous: a reader change?")
    return spans


def note(source: dict[str, Any]) -> str:
    """The report's line saying the model was checked through its header (`harness.models.paths.source_of`)."""
    sha = str(source.get("header_sha256", ""))[:12]
    if source.get("kind") == "url":
        if "fetched_bytes" not in source:
            how = "as the golden recorded it"
        elif source.get("from_cache"):
            how = "from the cache"
        else:
            how = f"{source['fetched_bytes']:,} bytes fetched in {source['requests']} Range request(s)"
        return (f"checked header-only from {source['url']} (ETag {source.get('etag')}, {source['size']:,} bytes): "
                f"header {source['header_bytes']:,} bytes, sha256 {sha}..., {how}; "
                f"read as a {source.get('checked', 'vocab-only copy')} (llama.cpp loads it vocab_only)")
    return (f"checked header-only: {source['file']} is cut after its metadata ({source['header_bytes']:,} "
            f"of {source['size']:,} bytes; {source['n_tensors']:,} tensors absent), header sha256 {sha}...; "
            "read as a vocab-only copy of the metadata (llama.cpp loads it vocab_only)")


def golden_source(source: dict[str, Any]) -> dict[str, Any]:
    """The part of `source` a golden records: what names the bytes, not how this run got them."""
    keep = ("kind", "url", "spec", "etag", "file", "size", "n_tensors", "header_bytes", "header_sha256")
    return {k: source[k] for k in keep if k in source}

