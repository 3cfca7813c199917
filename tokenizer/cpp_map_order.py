"""Orders that llama.cpp inherits from its C++ standard library (libstdc++, GCC 12).

Two results of llama.cpp's vocabulary loader depend on library internals rather
than on anything in the GGUF file:

- `map_order`: the iteration order of `std::unordered_map<std::string, int>`
  after inserting every token text in id order. llama.cpp walks that map to
  detect EOT/EOM/FIM tokens by text and keeps the *first* match, so a vocabulary
  holding both ``<|end|>`` and ``<|endoftext|>`` gets whichever comes first.
- `std_sort`: `std::sort` (introsort, not stable) of the special-token cache by
  text length, whose order among equal lengths decides which of two overlapping
  special tokens the partitioner splits out first.

Both are reproduced exactly: the string hash is libstdc++'s `_Hash_bytes`
(MurmurHash64A-style, seed 0xc70f6907), buckets follow `_Prime_rehash_policy`
(max load factor 1, its prime table), nodes are threaded the way
`_M_insert_bucket_begin` and `_M_rehash_aux` do it. tests/tokenizer/test_vocab.py pins
the results against llama.cpp's reported EOT/FIM ids.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_MUL = 0xC6A4A7935BD1E995
_SEED = 0xC70F6907
_MASK = (1 << 64) - 1

# libstdc++'s __prime_list from index 6 (17) up to 2**34; larger tables are refused
# long before (a GGUF token array cannot hold that many entries here).
_PRIMES = (
    17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109, 113,
    127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359,
    383, 409, 439, 467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109, 1193,
    1289, 1381, 1493, 1613, 1741, 1879, 2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739,
    4027, 4349, 4703, 5087, 5503, 5953, 6427, 6949, 7517, 8123, 8783, 9497, 10273, 11113,
    12011, 12983, 14033, 15173, 16411, 17749, 19183, 20753, 22447, 24281, 26267, 28411, 30727,
    33223, 35933, 38873, 42043, 45481, 49201, 53201, 57557, 62233, 67307, 72817, 78779, 85229,
    92203, 99733, 107897, 116731, 126271, 136607, 147793, 159871, 172933, 187091, 202409,
    218971, 236897, 256279, 277261, 299951, 324503, 351061, 379787, 410857, 444487, 480881,
    520241, 562841, 608903, 658753, 712697, 771049, 834181, 902483, 976369, 1056323, 1142821,
    1236397, 1337629, 1447153, 1565659, 1693859, 1832561, 1982627, 2144977, 2320627, 2510653,
    2716249, 2938679, 3179303, 3439651, 3721303, 4026031, 4355707, 4712381, 5098259, 5515729,
    5967347, 6456007, 6984629, 7556579, 8175383, 8844859, 9569143, 10352717, 11200489,
    12117689, 13109983, 14183539, 15345007, 16601593, 17961079, 19431899, 21023161, 22744717,
    24607243, 26622317, 28802401, 31160981, 33712729, 36473443, 39460231, 42691603, 46187573,
    49969847, 54061849, 58488943, 63278561, 68460391, 74066549, 80131819, 86693767, 93793069,
    101473717, 109783337, 118773397, 128499677, 139022417, 150406843, 162723577, 176048909,
    190465427, 206062531, 222936881, 241193053, 260944219, 282312799, 305431229, 330442829,
    357502601, 386778277, 418451333, 452718089, 489790921, 529899637, 573292817, 620239453,
    671030513, 725980837, 785430967, 849749479, 919334987, 994618837, 1076067617, 1164186217,
    1259520799, 1362662261, 1474249943, 1594975441, 1725587117, 1866894511, 2019773507,
    2185171673, 2364114217, 2557710269, 2767159799, 2993761039, 3238918481, 3504151727,
    3791104843, 4101556399, 4294967291, 6442450933, 8589934583, 12884901857, 17179869143,
)
_FAST_BUCKETS = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)


def hash_bytes(data: bytes) -> int:
    """libstdc++'s `std::hash<std::string>` of `data` on a 64-bit target (one string)."""
    n = len(data)
    h = (_SEED ^ (n * _MUL)) & _MASK
    aligned = n & ~7
    for pos in range(0, aligned, 8):
        k = (int.from_bytes(data[pos:pos + 8], "little") * _MUL) & _MASK
        k = ((k ^ (k >> 47)) * _MUL) & _MASK
        h = ((h ^ k) * _MUL) & _MASK
    if n & 7:
        h = ((h ^ int.from_bytes(data[aligned:], "little")) * _MUL) & _MASK
    h = ((h ^ (h >> 47)) * _MUL) & _MASK
    return h ^ (h >> 47)


def hash_all(texts: Sequence[bytes]) -> np.ndarray:
    """`hash_bytes` of every text, vectorised over 8-byte blocks (uint64 array)."""
    with np.errstate(over="ignore"):
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        joined = b"".join(texts) + bytes(8)
        # the little-endian 8-byte word starting at every byte
        words = np.ndarray(shape=(len(joined) - 7,), dtype="<u8", buffer=joined, strides=(1,))
        starts = np.zeros(len(texts), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        mul = np.uint64(_MUL)
        h = np.uint64(_SEED) ^ (lengths.astype(np.uint64) * mul)
        blocks = lengths // 8
        sel = np.nonzero(blocks)[0]
        for k in range(int(blocks.max(initial=0))):
            sel = sel[blocks[sel] > k]  # the texts with a block k (fewer each round)
            word = words[starts[sel] + 8 * k] * mul
            word = (word ^ (word >> np.uint64(47))) * mul
            h[sel] = (h[sel] ^ word) * mul
        rem = lengths & 7
        sel = np.nonzero(rem)[0]
        tail = words[starts[sel] + 8 * blocks[sel]] & _LOW_BYTES[rem[sel]]
        h[sel] = (h[sel] ^ tail) * mul
        h = (h ^ (h >> np.uint64(47))) * mul
        return h ^ (h >> np.uint64(47))


_LOW_BYTES = np.array([(1 << 8 * k) - 1 for k in range(8)], dtype=np.uint64)  # a word's low k bytes


def _rehash_points(n: int) -> list[tuple[int, int]]:
    """(element count before the insert, new bucket count) for each rehash while inserting n keys."""
    points: list[tuple[int, int]] = []
    n_bkt, next_resize = 1, 0
    elt = 0
    while elt < n:
        if elt + 1 > next_resize:
            min_bkts = max(elt + 1, 0 if next_resize else 11)
            if min_bkts >= n_bkt:
                want = max(min_bkts + 1, n_bkt * 2)
                n_bkt, next_resize = _next_bucket(want)
                points.append((elt, n_bkt))
                elt = min(n, max(elt + 1, next_resize))
                continue
            next_resize = n_bkt
        elt = min(n, max(elt + 1, next_resize))
    return points


def _next_bucket(want: int) -> tuple[int, int]:
    if want < len(_FAST_BUCKETS):
        b = _FAST_BUCKETS[want]
        return b, b
    i = bisect.bisect_left(_PRIMES, want)
    if i >= len(_PRIMES):
        raise ValueError(f"hash table of {want} buckets is beyond the reproduced prime table")
    return _PRIMES[i], _PRIMES[i]


def map_order(hashes: np.ndarray) -> np.ndarray:
    """Token ids in the iteration order of an unordered_map filled with ids 0..n-1 in order."""
    n = len(hashes)
    order = np.zeros(0, dtype=np.int64)
    points = _rehash_points(n) + [(n, 0)]
    for (start, buckets), (stop, _) in itertools.pairwise(points):
        order = _rehash(order, hashes, buckets)
        order = _insert_batch(order, np.arange(start, stop, dtype=np.int64), hashes, buckets)
    return order


def _rehash(order: np.ndarray, hashes: np.ndarray, buckets: int) -> np.ndarray:
    # Each node moves to the front of its new bucket; a bucket seen for the first
    # time moves its group to the front of the list. So: groups by their first
    # node's old position, last first; inside a group, old positions last first.
    m = len(order)
    if m == 0:
        return order
    group_first = _first_in_bucket(hashes[order] % np.uint64(buckets), buckets)
    key = group_first * m + np.arange(m)  # unique, so any sort orders it the same
    return order[np.argsort(key)[::-1]]


def _insert_batch(order: np.ndarray, new: np.ndarray, hashes: np.ndarray, buckets: int) -> np.ndarray:
    # A node joins the front of its bucket's group; a node opening a bucket puts the
    # new group at the front of the list. So: new groups (latest first), then the old
    # groups in order; inside a group, new nodes (latest first), then the old ones.
    if len(new) == 0:
        return order
    m, k = len(order), len(new)
    nodes = np.concatenate([order, new])
    group_first = _first_in_bucket(hashes[nodes] % np.uint64(buckets), buckets)
    idx = np.arange(m + k)
    fresh_group = group_first >= m
    is_new = idx >= m
    # The four sort keys of the rule, most significant first, packed into one int64
    # (each shifted to be non-negative; at most (2 (m+k+1))^2, far inside int64).
    span = m + k + 1
    group_key = np.where(fresh_group, m - group_first, group_first) + k
    within_key = np.where(is_new, m - idx, idx) + k
    key = ((~fresh_group * span + group_key) * 2 + ~is_new) * span + within_key
    return nodes[np.argsort(key)]


def _first_in_bucket(bucket: np.ndarray, buckets: int) -> np.ndarray:
    """For each position, the first position holding the same bucket."""
    first = np.full(buckets, len(bucket), dtype=np.int64)
    where = bucket.astype(np.intp)
    np.minimum.at(first, where, np.arange(len(bucket)))
    return first[where]


_Less = Callable[[Any, Any], bool]


def std_sort(items: list[Any], less: _Less) -> list[Any]:
    """libstdc++'s `std::sort(items, less)`: introsort, threshold 16, then insertion sort."""
    a = list(items)
    if len(a) > 1:
        _introsort(a, 0, len(a), 2 * (len(a).bit_length() - 1), less)
        _final_insertion_sort(a, 0, len(a), less)
    return a


def _introsort(a: list[Any], first: int, last: int, depth: int, less: _Less) -> None:
    while last - first > 16:
        if depth == 0:
            _heap_sort(a, first, last, less)
            return
        depth -= 1
        cut = _partition_pivot(a, first, last, less)
        _introsort(a, cut, last, depth, less)
        last = cut


def _partition_pivot(a: list[Any], first: int, last: int, less: _Less) -> int:
    mid = first + (last - first) // 2
    x, y, z = first + 1, mid, last - 1
    if less(a[x], a[y]):
        pick = y if less(a[y], a[z]) else (z if less(a[x], a[z]) else x)
    elif less(a[x], a[z]):
        pick = x
    else:
        pick = z if less(a[y], a[z]) else y
    a[first], a[pick] = a[pick], a[first]
    lo, hi = first + 1, last
    while True:
        while less(a[lo], a[first]):
            lo += 1
        hi -= 1
        while less(a[first], a[hi]):
            hi -= 1
        if not lo < hi:
            return lo
        a[lo], a[hi] = a[hi], a[lo]
        lo += 1


def _final_insertion_sort(a: list[Any], first: int, last: int, less: _Less) -> None:
    if last - first > 16:
        _insertion_sort(a, first, first + 16, less)
        for i in range(first + 16, last):
            _linear_insert(a, i, less)
    else:
        _insertion_sort(a, first, last, less)


def _insertion_sort(a: list[Any], first: int, last: int, less: _Less) -> None:
    for i in range(first + 1, last):
        if less(a[i], a[first]):
            val = a[i]
            a[first + 1:i + 1] = a[first:i]
            a[first] = val
        else:
            _linear_insert(a, i, less)


def _linear_insert(a: list[Any], last: int, less: _Less) -> None:
    val = a[last]
    while less(val, a[last - 1]):
        a[last] = a[last - 1]
        last -= 1
    a[last] = val


def _heap_sort(a: list[Any], first: int, last: int, less: _Less) -> None:
    n = last - first
    if n >= 2:
        parent = (n - 2) // 2
        while True:
            _adjust_heap(a, first, parent, n, a[first + parent], less)
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:
        last -= 1
        val = a[last]
        a[last] = a[first]
        _adjust_heap(a, first, 0, last - first, val, less)


def _adjust_heap(a: list[Any], base: int, hole: int, n: int, val: Any, less: _Less) -> None:
    top = hole
    child = hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if less(a[base + child], a[base + child - 1]):
            child -= 1
        a[base + hole] = a[base + child]
        hole = child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        a[base + hole] = a[base + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and less(a[base + parent], val):
        a[base + hole] = a[base + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[base + hole] = val
