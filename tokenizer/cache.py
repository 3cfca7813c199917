"""The one bounded cache every engine memoises with.

Tokenizing is a pure function of a word (or a pre-token, a normaliser run), so
the engines keep the answers they computed; llama.cpp does not, so caching is
where much of our speed comes from (docs/benchmarks.md). A cache that only
grows would hold every distinct word of a long fuzzing run; this one empties
itself when it reaches `CACHE_LIMIT` entries. That costs nothing per hit, unlike
an LRU's bookkeeping, and a cleared cache only means recomputing: answers never
change.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

CACHE_LIMIT = 1 << 17  # entries; words are short, so this stays in the tens of megabytes


class BoundedCache(dict[K, V]):
    """A dict that clears itself instead of growing past `limit` entries.

    Reads are plain dict reads (`get`, `[]`, `map(cache.get, keys)`); writes go
    through `put`, or `make_room` before a batch of plain assignments.
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int = CACHE_LIMIT) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: K, value: V) -> V:
        """Store `value` under `key` (clearing first when full) and return it."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value

    def make_room(self, n: int) -> bool:
        """Clear when `n` more entries would not fit; True when it cleared."""
        if len(self) + n > self.limit:
            self.clear()
            return True
        return False
