"""The load path's one-call shortcuts give what one call per element gives.

The reader decodes a string array in one `decode` (`gguf._decode_all`), the
vocabulary encodes its token texts in one `encode` (`vocab._encode_all`) and
splits the merges with one `split` (`vocab._split_merges`). Each is checked
here against the per-element rule it replaces, on seeded random records built
to hit the edges: invalid UTF-8 at either end, NULs, spaces first, last, twice
or missing, empty records.
"""

from __future__ import annotations

import random

import pytest

from tokenizer.gguf.reader import _decode_all
from tokenizer.vocab import _encode_all, _split_merges

PIECES = [b"a", b"\xc3\xa9", b"\xe2\x82", b"\xac", b"\xff", b"\x00", b" ", b"\xf0\x9f\xa6\x99", b"\xed\xa0\x80",
          b"\xc4\xa0", b"z"]


def records(seed: int, n: int, pieces: list[bytes]) -> list[bytes]:
    rng = random.Random(seed)
    return [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))) for _ in range(n)]


def llama_split(merge: str) -> tuple[bytes, bytes]:
    """llama.cpp's rule, one merge at a time: cut at the first space after position 0."""
    pos = merge.find(" ", 1)
    if pos < 0:
        return b"", b""
    return merge[:pos].encode("utf-8", "surrogateescape"), merge[pos + 1:].encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("seed", range(20))
def test_decode_all_is_one_decode_per_element(seed):
    raw = records(seed, 200, PIECES)
    assert _decode_all(raw) == [r.decode("utf-8", "surrogateescape") for r in raw]


@pytest.mark.parametrize("seed", range(20))
def test_decode_all_without_nuls_takes_the_shortcut_and_agrees(seed):
    raw = records(seed, 200, [p for p in PIECES if p != b"\x00"])
    assert _decode_all(raw) == [r.decode("utf-8", "surrogateescape") for r in raw]


@pytest.mark.parametrize("seed", range(20))
def test_encode_all_is_one_encode_per_token(seed):
    tokens = [r.decode("utf-8", "surrogateescape") for r in records(seed, 200, PIECES)]
    assert _encode_all(tokens) == [t.encode("utf-8", "surrogateescape") for t in tokens]


ODD = (" a b", " x", " ", "a b c", "ab", "a\x00 b", "", "a ", "\x00")


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("odd", [None, *ODD], ids=["one-space", *map(repr, ODD)])
def test_split_merges_is_llamas_rule(seed, odd):
    """Each odd record alone among ordinary ones, so the one-split shortcut is tried on it."""
    rng = random.Random(seed)
    kept = [p for p in PIECES if p not in (b" ", b"\x00")]
    words = [r.decode("utf-8", "surrogateescape") for r in records(seed, 400, kept)]
    merges = [f"{a or 'x'} {b}" for a, b in zip(words[::2], words[1::2])]
    if odd is not None:
        merges.insert(rng.randrange(len(merges) + 1), odd)
    assert _split_merges(merges) == tuple(map(llama_split, merges))
