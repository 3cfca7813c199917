"""`PairTable`: an integer key -> the first rank it was given, open addressing over numpy arrays.

The BPE engine looks up merge pairs in it (packed symbol pairs), and the loader
finds merge parts' ids with it (`bpe_ids`, packed token bytes); one module so
that neither imports the other for it. `first_ranks` is the same map as a dict,
for BPE's word-by-word merging.
"""

from __future__ import annotations

import numpy as np


def first_ranks(keys: np.ndarray) -> dict[int, int]:
    """{key: the first rank it was given} for `keys` in rank order, as a dict (what `PairTable`
    answers, for lookups one at a time): filled from the highest rank down, so that a repeated key
    ends with its first rank."""
    reverse = keys[::-1].tolist()
    return dict(zip(reverse, range(len(reverse) - 1, -1, -1)))


class PairTable:
    """Open addressing over numpy arrays: pair key -> the rank of its first merge.

    Keys are non-negative; a lookup of a negative key (a pair with a symbol
    no merge names) misses.  Linear probing from a multiplicative hash.
    """

    _EMPTY = -1
    _MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)

    def __init__(self, keys: np.ndarray, none: int) -> None:
        self.none = none
        self.bits = max(4, (4 * len(keys)).bit_length())  # at most a quarter full
        self.mask = (1 << self.bits) - 1
        self.keys = np.full(1 << self.bits, self._EMPTY, dtype=np.int64)
        self.ranks = np.full(1 << self.bits, len(keys), dtype=np.int64)  # above every rank: free
        slot = self._slot(keys)
        pending = np.arange(len(keys))  # in rank order: the first of equal keys settles first
        while len(pending):
            at = slot[pending]
            free = self.keys[at] == self._EMPTY
            np.minimum.at(self.ranks, at[free], pending[free])  # of the keys wanting a free slot,
            won = free & (self.ranks[at] == pending)  # the lowest rank takes it
            self.keys[at[won]] = keys[pending[won]]
            pending = pending[self.keys[at] != keys[pending]]  # placed, or its first rank is in
            slot[pending] = (slot[pending] + 1) & self.mask

    def _slot(self, keys: np.ndarray) -> np.ndarray:
        hashed = keys.astype(np.uint64) * self._MULTIPLIER >> np.uint64(64 - self.bits)
        return hashed.astype(np.int64)

    def get(self, query: np.ndarray) -> np.ndarray:
        """The rank of each key, `none` for a miss."""
        out = np.full(len(query), self.none, dtype=np.int64)
        where = np.flatnonzero(query >= 0)
        query = query[where]
        slot = self._slot(query)
        while len(where):
            held = self.keys[slot]
            hit = held == query
            out[where[hit]] = self.ranks[slot[hit]]
            more = ~hit & (held != self._EMPTY)
            where, query, slot = where[more], query[more], (slot[more] + 1) & self.mask
        return out
