"""The ids of every merge's left part, right part and result, found with numpy (BPE load).

A vocabulary's merges come as one NUL-joined `bytes` (`tokenizer.vocab.Merges.joined`:
each merge exactly one space, not first, and no NUL). Looking each of their
3 x 280,147 parts up in the token dict was most of llama-bpe's load. Here a
text of at most 16 bytes is packed into two 64-bit words (zero-padded, so
exact when no text holds a NUL), the words hashed into one key, and all keys
looked up at once in a `PairTable` of the tokens' keys; a hit is then checked
word for word. A part the table cannot answer (longer than 16 bytes, no token,
or a token whose key another token took) is looked up by its bytes in the
dict, so the ids are the dict's in every case (tests/tokenizer/test_bpe_load.py checks
them against the dict on every shipped BPE vocabulary).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from .pair_table import PairTable

PACKED = 16  # bytes: texts up to this long are looked up in numpy
_NO_NUL_PAD = bytes(PACKED)
_K0, _K1 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)


_MASKS = np.array([(1 << 8 * k) - 1 for k in range(9)], dtype=np.uint64)  # the low k bytes of a word


def _masks(length: np.ndarray, skip: int) -> np.ndarray:
    """The mask of the bytes a text of `length` has in the word starting at byte `skip`."""
    masks: np.ndarray = _MASKS[np.clip(length - skip, 0, 8)]
    return masks


def pack(blob: bytes, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each text `blob[start:start + length]` as two words, and their key (int64, >= 0).

    Only meaningful for lengths up to `PACKED`; the caller leaves longer ones out.
    """
    padded = blob + _NO_NUL_PAD
    words = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    with np.errstate(over="ignore"):
        w0 = words[starts] & _masks(lengths, 0)
        w1 = words[starts + 8] & _masks(lengths, 8)
        key = ((w0 * _K0) ^ (w1 * _K1) ^ (w1 >> np.uint64(29))) >> np.uint64(1)
    return w0, w1, key.astype(np.int64)


class TokenKeys:
    """The tokens of at most `PACKED` bytes, packed, in a `PairTable` from key to row."""

    def __init__(self, token_to_id: Mapping[bytes, int], table: type[PairTable]) -> None:
        joined = b"\x00".join(token_to_id)
        nul = np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) == 0)
        n = len(token_to_id)
        self.usable = n > 0 and len(nul) == n - 1  # no token holds a NUL: packing is exact
        if not self.usable:
            return
        starts = np.zeros(n, dtype=np.int64)
        starts[1:] = nul + 1
        lengths = np.empty(n, dtype=np.int64)
        lengths[:-1] = nul - starts[:-1]
        lengths[-1] = len(joined) - starts[-1]
        short = np.flatnonzero(lengths <= PACKED)
        self.w0, self.w1, keys = pack(joined, starts[short], lengths[short])
        self.ids = np.fromiter(token_to_id.values(), dtype=np.int64, count=n)[short]
        self.table = table(keys, -1)

    def find(self, blob: bytes, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The id of each text, -1 where the dict must answer (see the module docstring)."""
        out = np.full(len(starts), -1, dtype=np.int64)
        short = np.flatnonzero(lengths <= PACKED)
        w0, w1, keys = pack(blob, starts[short], lengths[short])
        row = self.table.get(keys)
        hit = row >= 0
        row = row[hit]
        same = (self.w0[row] == w0[hit]) & (self.w1[row] == w1[hit])
        out[short[hit][same]] = self.ids[row[same]]
        return out


def spans(joined: bytes, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each of the `count` merges in `joined` begins, has its space, and ends."""
    data = np.frombuffer(joined, dtype=np.uint8)
    space = np.flatnonzero(data == 0x20)
    begin = np.zeros(count, dtype=np.int64)
    begin[1:] = np.flatnonzero(data == 0) + 1
    end = np.empty(count, dtype=np.int64)
    end[:-1] = begin[1:] - 1
    end[-1] = len(joined)
    return begin, space, end


def crossing(joined: bytes, count: int, marker: bytes) -> list[tuple[bytes, bytes]]:
    """The merges (a, b) of `joined` with b starting with `marker` and a not ending with it."""
    begin, space, end = spans(joined, count)
    data = np.frombuffer(joined + bytes(len(marker) + 1), dtype=np.uint8)
    starts = end - space - 1 >= len(marker)
    ends = space - begin >= len(marker)
    for k, byte in enumerate(marker):
        starts &= data[space + 1 + k] == byte
        ends &= data[space - len(marker) + k] == byte
    return [(joined[a:m], joined[m + 1:b])
            for a, m, b in zip(*(x[starts & ~ends].tolist() for x in (begin, space, end)))]


def merge_part_ids(joined: bytes, count: int, token_to_id: Mapping[bytes, int], table: type[PairTable],
                   symbol: Callable[[bytes], int]) -> list[np.ndarray]:
    """The ids of the lefts, the rights and the results of the `count` merges in `joined`.

    What the table cannot answer goes to `symbol(text)` (the dict, then the
    texts that are no token), lefts first, then rights, then results, each in
    rank order: the order a lookup of each list in turn would number them.
    """
    begin, space, end = spans(joined, count)
    left_len, right_len = space - begin, end - space - 1
    glued = joined.replace(b" ", b"")  # the results: each merge without its one space
    parts = [(joined, begin, left_len), (joined, space + 1, right_len),
             (glued, begin - np.arange(count), left_len + right_len)]
    keys = TokenKeys(token_to_id, table)
    out = []
    for blob, at, n in parts:
        ids = keys.find(blob, at, n) if keys.usable else np.full(count, -1, dtype=np.int64)
        miss = np.flatnonzero(ids < 0)
        texts = list(map(blob.__getitem__, map(slice, at[miss].tolist(), (at + n)[miss].tolist())))
        found: list[int | None] = list(map(token_to_id.get, texts))
        if None in found:
            found = [symbol(t) if i is None else i for t, i in zip(texts, found)]
        ids[miss] = found  # type: ignore[assignment]  # no None is left
        out.append(ids)
    return out
