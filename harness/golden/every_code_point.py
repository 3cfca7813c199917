"""The every-code-point probes and llama.cpp's recorded answers to them (`golden/code-points/`).

A probe string per code point (0..0x10FFFF), `BATCH` probes to a call joined by the vocabulary's
longest CONTROL token, on five vocabularies whose pre-tokenizers see the Unicode classes
(`PROBE_VOCABS`). llama.cpp's ids per call are recorded once per pinned release as a count and a
64-bit sha256 prefix (`digest`), in `golden/code-points/<vocabulary>.json` with the llama-cpp-python
version, the GGUF's sha256 and the separator. The nightly test compares our engine's ids with the
records (tests/tokenizer/test_unicode.py); `python -m harness builds` compares another llama.cpp
build's; `python -m tests.tokenizer.code_points` records them.

Since the separator is a CONTROL token and the flags parse specials (`FLAGS`), every build cuts a
call's ids at the separator's id into the probes' ids (`split_probes`): a call that differs is
narrowed to its code points.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..files.input_limits import read_side_json
from .files import GOLDEN_DIR, GoldenError

BATCH = 2048
MAX_CODEPOINTS = 0x110000
CALLS = -(-MAX_CODEPOINTS // BATCH)
RECORDS = GOLDEN_DIR / "code-points"
FLAGS = {"add_special": False, "parse_special": True}
MAX_RECORD_BYTES = 1 << 20  # 544 digests of some 30 bytes each, and the header
PROBE_VOCABS = {  # name -> what its pre-tokenizer separates
    "gpt-2": "letters-digits-space",
    "qwen35": "marks",
    "aquila": "punctuation",
    "synthetic:pre-deepseek-v3": "symbols",
    "synthetic:pre-kimi-k2": "han",
}


def probe(cpt: int) -> bytes:
    """One code point in the positions a pre-tokenizer tells apart: after a letter, before a digit,
    doubled, before a full stop and a letter, next to a Han character and a contraction. A surrogate
    is its own three bytes (not UTF-8): only an engine that takes bytes is asked it."""
    c = chr(cpt)
    return ("x" + c + "1 " + c + c + ". " + c + "a\u4e00" + c + "'s").encode("utf-8", "surrogatepass")


def batch(start: int, sep: bytes) -> bytes:
    """The probes of code points `start` .. `start + BATCH - 1`, joined by `sep`."""
    return sep.join(probe(c) for c in range(start, min(start + BATCH, MAX_CODEPOINTS)))


def batches(sep: bytes) -> Iterator[tuple[int, bytes]]:
    """(first code point, the joined probes) for every BATCH code points."""
    for start in range(0, MAX_CODEPOINTS, BATCH):
        yield start, batch(start, sep)


def digest(ids: list[int]) -> str:
    """`count:` and the first 64 bits of a sha256 over the ids (int32 little-endian)."""
    return f"{len(ids)}:{hashlib.sha256(np.asarray(ids, dtype='<i4').tobytes()).hexdigest()[:16]}"


def short(name: str) -> str:
    """`pre-kimi-k2` for `synthetic:pre-kimi-k2`."""
    return name.split(":", 1)[-1]


def record_path(name: str, root: Path = RECORDS) -> Path:
    return Path(root) / f"{short(name)}.json"


def read_record(name: str, root: Path = RECORDS) -> dict[str, Any]:
    """The record of `name`, read within bounds and its fields checked; `GoldenError` naming the file."""
    where = record_path(name, root)
    try:
        data = read_side_json(where, "a code-point record", limit=MAX_RECORD_BYTES)
    except (OSError, ValueError) as exc:
        raise GoldenError(f"{where}: {exc}") from None
    digests = data.get("digests") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("batch") != BATCH or not isinstance(digests, list) \
            or len(digests) != CALLS or not all(isinstance(d, str) and ":" in d for d in digests) \
            or not isinstance(data.get("separator"), str) or not isinstance(data.get("llama_cpp_python"), str):
        raise GoldenError(f"{where}: not a code-point record of {CALLS} calls of {BATCH} code points "
                         "(re-record it: python -m tests.tokenizer.code_points)")
    return data


def split_probes(ids: list[int], sep_id: int, count: int) -> list[list[int]] | None:
    """A call's ids cut at the separator's id into `count` probes' ids; None when they do not cut so
    (the separator did not come out as one token `count - 1` times)."""
    out: list[list[int]] = [[]]
    for token in ids:
        if token == sep_id:
            out.append([])
        else:
            out[-1].append(token)
    return out if len(out) == count else None


def differing_code_points(start: int, expected: list[int], got: list[int], sep_id: int) -> list[int] | None:
    """The code points of the call at `start` whose probes' ids differ; None when either side's ids
    do not cut into probes at the separator."""
    count = min(BATCH, MAX_CODEPOINTS - start)
    left, right = split_probes(expected, sep_id, count), split_probes(got, sep_id, count)
    if left is None or right is None:
        return None
    return [start + i for i, (a, b) in enumerate(zip(left, right, strict=True)) if a != b]
