"""Which GGUF file a golden was recorded from, checked without reading the tensor data.

A golden's header names its file: `{"file", "size", "sha256", "hashed", "hashed_bytes"}`.
With `"hashed": "metadata"` the sha256 covers the first `hashed_bytes` bytes
of the file: everything before the tensor data (magic, version, counts, every
metadata key and value, so the whole tokenizer, the tensor infos and the
alignment padding), and `size` is the whole file's size. Checking a
multi-gigabyte model then reads a few megabytes. What the hash does not cover
is tensor data of the same total size, which no tokenizer reads.

Goldens recorded before this have no `hashed` key: their sha256 is of the
whole file, and is checked that way (after the cheap size check). The file's
mtime is deliberately not recorded: it differs on every machine that fetches
the same bytes, and goldens must be byte-identical wherever they are recorded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 1 << 20


def _sha256(path: Path, limit: int | None = None) -> str:
    digest = hashlib.sha256()
    left = limit
    with path.open("rb") as f:
        while left is None or left > 0:
            block = f.read(CHUNK if left is None else min(CHUNK, left))
            if not block:
                break
            digest.update(block)
            if left is not None:
                left -= len(block)
    return digest.hexdigest()


def identity(path: str | Path) -> dict:
    """The header a golden records for `path`: metadata hash when the file parses, else whole-file hash."""
    path = Path(path)
    size = path.stat().st_size
    try:
        from tokenizer.gguf import reader as gguf
        offset = min(gguf.read(path).data_offset, size)
    except Exception:  # noqa: BLE001 - a file our reader refuses (hostile goldens) is hashed whole
        return {"file": path.name, "size": size, "sha256": _sha256(path)}
    return {"file": path.name, "size": size, "sha256": _sha256(path, offset), "hashed": "metadata",
            "hashed_bytes": offset}


def mismatch(header: dict, path: str | Path) -> str | None:
    """Why `path` is not the file `header` names (size, then hash), or None when it is."""
    path = Path(path)
    size = path.stat().st_size
    if header.get("size") is not None and header["size"] != size:
        return f"its size is {size:,} bytes, the golden's file had {header['size']:,}"
    if not header.get("sha256"):
        return None
    if header.get("hashed") == "metadata":
        got, what = _sha256(path, int(header["hashed_bytes"])), f"its first {header['hashed_bytes']:,} bytes"
    else:
        got, what = _sha256(path), "its content"
    if got == header["sha256"]:
        return None
    return f"{what} differ (sha256 {got[:12]}..., recorded {header['sha256'][:12]}...)"
