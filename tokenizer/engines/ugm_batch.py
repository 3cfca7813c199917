"""UGM's Viterbi for many words at once, in numpy: the same lattice, the same ties.

`ugm.Lattice.by_words` hands the words it has not cached to `BatchViterbi.run`,
each to be segmented as the space symbol before it (`ugm.Lattice.viterbi`):

- cells: each word's code point starts and its end, by the lead-byte walk. A
  word whose bytes are not whole code points by that walk (a stray continuation
  byte, a code point cut short) is left to the caller, as are the few longest
  words when they are much longer than the rest;
- candidates: every window of 1..K whole code points (K: the most lead bytes in
  a token) no longer than the longest token, looked up among the matcher tokens
  by a key: its bytes themselves below 8 bytes, else a hash of its 8-byte chunks
  (a hit verified chunk by chunk). A token that ends inside a code point is
  never a candidate: llama.cpp stores its score in a cell that no path leaves
  and that ends no word. The unknown token covers one code point where no token
  spells exactly it;
- relaxation one local position at a time across all words: a cell's
  candidates all start there, so their ends are distinct, and every cell's
  score is final before it is read. A cell keeps the first (lowest) start on a
  tie, as in llama.cpp, because earlier positions relax first and only a
  strictly higher sum replaces a cell's best; the sums are the same doubles;
- backtrack along each word's start pointers; runs of unknowns collapse.

Keys: a table of 2**21 slots (the key and the token's row; `bits` sets another
size, as `wpm_batch` does), a slot two tokens share resolved by a sorted search;
duplicate keys among the tokens (a hash collision) turn the batch off (`unique`).
Built from the lattice's own entries on first use: about 40 ms and 30 MB for nomic-bert-moe's 250,000 tokens.
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

import numpy as np

_M = np.uint64(0x9E3779B97F4A7C15)  # odd multipliers: the chunk hash, the bucket mix
_MIX = np.uint64(0xD6E8FEB86659FD93)
_LOW = np.uint64(0xFF)
_TOP = np.uint64(1 << 63)
_LAST = np.uint64((1 << 64) - 1)
_BITS = 21  # table slots: 2**21
_MULTI = np.uint64(0xFF)  # the key of a slot that two or more tokens hash to (no run's key)
_SHIFT = np.uint64(64 - _BITS)
_LEAD = np.array([1] * 0xC0 + [2] * 0x20 + [3] * 0x10 + [4] * 0x10, dtype=np.int64)
_PAD = bytes(8)
_U8 = np.uint64(8)
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [0], dtype=np.uint64)
MIN_WORDS = 256  # fewer missing words than this: the per-word Python pass is faster
BUILD_AFTER = 3000  # the build costs about as much as this many words one by one


def _u64_view(raw: bytes) -> np.ndarray:
    """The 8 bytes from every offset of `raw` (padded by 8) as (native-order) integers."""
    return np.ndarray(shape=(len(raw) - 7,), dtype=np.uint64, buffer=raw, strides=(1,))


def _keys(view: np.ndarray, start: np.ndarray, size: np.ndarray, first: np.ndarray | None = None) -> np.ndarray:
    """The lookup key of each run of `size` bytes from `start` (int64 sizes, >= 1).

    Below 8 bytes: the bytes, then the size in the low byte (exact). From 8
    bytes: a hash of the 8-byte chunks at 0, 8, ... and of the last 8 bytes,
    with the low byte 0 (so never a short key's) and the top bit set (never 0).
    `first`: the 8 bytes at `start`.
    """
    if first is None:
        first = view[start]
    keys: np.ndarray = ((first & _MASKS[np.minimum(size, 8)]) << _U8) | size.view(np.uint64)
    long = np.flatnonzero(size >= 8)
    if len(long):
        keys[long] = (_chunk_hash(view, start[long], size[long], first[long]) & ~_LOW) | _TOP
    return keys


def _chunk_hash(view: np.ndarray, start: np.ndarray, size: np.ndarray, first: np.ndarray) -> np.ndarray:
    h = (size.view(np.uint64) + first) * _M
    c = 8
    rows = np.flatnonzero(size > 16)
    while len(rows):
        h[rows] = (h[rows] + view[start[rows] + c]) * _M
        c += 8
        rows = rows[size[rows] > c + 8]
    out: np.ndarray = (h + view[start + size - 8]) * _M
    return out


def _same_bytes(view_a: np.ndarray, start_a: np.ndarray, view_b: np.ndarray, start_b: np.ndarray,
                size: np.ndarray) -> np.ndarray:
    """Whether the runs of `size` bytes (at least 8) at `start_a` and `start_b` are equal."""
    same: np.ndarray = view_a[start_a + size - 8] == view_b[start_b + size - 8]
    c = 0
    rows = np.flatnonzero(same)
    while len(rows):
        same[rows] = view_a[start_a[rows] + c] == view_b[start_b[rows] + c]
        c += 8
        rows = rows[same[rows] & (size[rows] > c + 8)]
    return same


class BatchViterbi:
    """The matcher tokens keyed for numpy lookups, and the batched Viterbi."""

    def __init__(self, keys: list[bytes], ids: np.ndarray, values: np.ndarray, sizes: np.ndarray,
                 *, unk: int, unk_score: float, space: bytes, bits: int | None = None) -> None:
        self.unk = unk
        self.unk_score = unk_score
        self.space = space
        self.raw = b"".join(keys) + _PAD
        self.view = _u64_view(self.raw)
        offsets = np.zeros(len(keys), dtype=np.int64)
        np.cumsum(sizes[:-1], out=offsets[1:])
        self.max_cps = _most_lead_bytes(np.frombuffer(self.raw, dtype=np.uint8), offsets, sizes)
        self.max_size = int(sizes.max(initial=0))
        rows = np.flatnonzero(sizes > 0)
        key = _keys(self.view, offsets[rows], sizes[rows])
        bits = _BITS if bits is None else bits  # slots: 2**bits
        self.shift = _SHIFT if bits == _BITS else np.uint64(64 - bits)
        slot = ((key * _MIX) >> self.shift).view(np.int64)
        table = np.zeros(1 << bits, dtype=np.uint64)  # 0: no run's key (an empty slot)
        table_row = np.empty(1 << bits, dtype=np.int32)  # read only where a key matched
        table[slot] = key
        table_row[slot] = rows
        # a slot two tokens hash to keeps only the last one written
        shared = np.zeros(1 << bits, dtype=bool)
        shared[slot[table_row[slot] != rows]] = True
        in_shared = np.flatnonzero(shared[slot])
        table[np.flatnonzero(shared)] = _MULTI
        by_key = np.argsort(key[in_shared])
        self.shared_key = np.append(key[in_shared][by_key], _LAST)  # sorted, and no run's key
        self.shared_row = rows[in_shared][by_key]
        self.unique = bool((self.shared_key[1:-1] != self.shared_key[:-2]).all())
        self.table, self.table_row = table, table_row
        self.tok_offset, self.tok_size, self.tok_id, self.tok_value = offsets, sizes, ids, values

    def lookup(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the indices into `key` of the keys that are tokens', those tokens' rows)."""
        slot = ((key * _MIX) >> self.shift).view(np.int64)
        found = self.table[slot]
        hit = np.flatnonzero(found == key)
        shared = np.flatnonzero(found == _MULTI)
        if not len(shared):
            return hit, self.table_row[slot[hit]]
        at = np.searchsorted(self.shared_key, key[shared])
        also = np.flatnonzero(self.shared_key[at] == key[shared])
        hit = np.concatenate((hit, shared[also]))
        rows = np.concatenate((self.table_row[slot[hit[:len(hit) - len(also)]]], self.shared_row[at[also]]))
        return hit, rows

    def run(self, words: list[bytes]) -> tuple[list[list[int]], list[bytes], list[bytes]]:
        """(ids of each batched word, the batched words, the words left to the caller)."""
        sizes = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        cut = _long_words(sizes)
        if cut is None:
            return self._run(words, sizes)
        long = sizes > cut
        leftover = [words[i] for i in np.flatnonzero(long).tolist()]
        rows = np.flatnonzero(~long)
        ids, batched, more = self._run([words[i] for i in rows.tolist()], sizes[rows])
        return ids, batched, leftover + more

    def _run(self, words: list[bytes], sizes: np.ndarray) -> tuple[list[list[int]], list[bytes], list[bytes]]:
        if len(words) < MIN_WORDS:
            return [], [], words
        space = self.space
        raw = space + space.join(words) + _PAD
        total = len(raw) - len(_PAD)
        buf = np.frombuffer(raw, dtype=np.uint8)
        n_words = len(words)
        word_start = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(sizes + len(space), out=word_start[1:])
        body = buf[:total]
        lead = np.flatnonzero((body & 0xC0) != 0x80)
        lengths = np.diff(lead, append=total)
        # words start with the space symbol, whose first byte is a lead byte
        cp_first = np.searchsorted(lead, word_start)
        n_cps = np.diff(cp_first)
        bad = lengths != _LEAD[body[lead]]
        if bad.any():
            word_of_cp = np.repeat(np.arange(n_words), n_cps)
            broken = np.zeros(n_words, dtype=bool)
            broken[word_of_cp[bad]] = True
            leftover = [words[i] for i in np.flatnonzero(broken).tolist()]
            rows = np.flatnonzero(~broken)
            ids, batched, _ = self._run([words[i] for i in rows.tolist()], sizes[rows])  # none broken
            return ids, batched, leftover
        return self._viterbi(words, raw, lead, cp_first, n_cps, word_start[1:]), words, []

    def _viterbi(self, words: list[bytes], raw: bytes, lead: np.ndarray, cp_first: np.ndarray,
                 n_cps: np.ndarray, word_end: np.ndarray) -> list[list[int]]:
        """The ids of each word: its lattice's edges, the forward pass over them, the backtrack."""
        cells = _cells(lead, cp_first, n_cps, word_end)
        edges = self._edges(cells, _u64_view(raw), n_cps)
        best, back = _forward(edges, cells)
        return self._backtrack(best, back, cells, len(words))

    def _edges(self, cells: _Cells, view: np.ndarray, n_cps: np.ndarray) -> _Edges:
        """The lattice's edges, tokens' and the unknown's, ordered by their start's local position."""
        src_parts, dst_parts, row_parts, loc_parts = [], [], [], []
        single = np.zeros(len(cells.loc), dtype=bool)
        # code points by how many follow them in their word, most first: the starts of
        # windows of k code points are then the first n_at[k - 1]
        order = np.argsort(-cells.remaining.astype(_narrow(n_cps)), kind="stable")
        n_at = np.searchsorted(-cells.remaining[order], -np.arange(1, self.max_cps + 1), side="right").tolist()
        begin_all = cells.cell[order]
        p_all = cells.pos[begin_all]
        first_all = view[p_all]
        loc_all = cells.loc[order]
        for k, n in enumerate(n_at, 1):
            if not n:
                break
            hit, row = self._window_tokens(view, cells.pos, begin_all[:n], p_all, first_all, k)
            if k == 1:
                single[order[hit]] = True
            src = begin_all[hit]
            src_parts.append(src)
            dst_parts.append(src + k)
            row_parts.append(row)
            loc_parts.append(loc_all[hit])
        unknown = np.flatnonzero(~single)
        src_parts.append(cells.cell[unknown])
        dst_parts.append(cells.cell[unknown] + 1)
        row_parts.append(np.full(len(unknown), -1, dtype=np.int64))
        loc_parts.append(cells.loc[unknown])
        return self._by_position(src_parts, dst_parts, row_parts, loc_parts, n_cps)

    def _window_tokens(self, view: np.ndarray, pos: np.ndarray, begin: np.ndarray, start: np.ndarray,
                       first: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(the indices into `begin` of the windows of `k` code points that spell a token, those tokens' rows).

        `start`, `first`: the byte offset of each start cell and its first 8 bytes, `begin`'s first.
        """
        n = len(begin)
        size = pos[begin + k] - start[:n]
        fits = size <= self.max_size
        if fits.all():
            hit, row = self.lookup(_keys(view, start[:n], size, first[:n]))
        else:
            sub = np.flatnonzero(fits)
            hit, row = self.lookup(_keys(view, start[sub], size[sub], first[sub]))
            hit = sub[hit]
        return self._verified(view, start, size, hit, row)

    def _verified(self, view: np.ndarray, start: np.ndarray, size: np.ndarray, hit: np.ndarray,
                  row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(`hit`, `row`) without the hits by a hashed key (8 bytes or more) whose bytes are not the token's."""
        long = np.flatnonzero(size[hit] >= 8)
        if len(long):
            h = hit[long]
            r = row[long]
            ok = self.tok_size[r] == size[h]
            ok[ok] = _same_bytes(view, start[h[ok]], self.view, self.tok_offset[r[ok]], size[h[ok]])
            if not ok.all():
                good = np.ones(len(hit), dtype=bool)
                good[long[~ok]] = False
                hit, row = hit[good], row[good]
        return hit, row

    def _by_position(self, src_parts: list[np.ndarray], dst_parts: list[np.ndarray], row_parts: list[np.ndarray],
                     loc_parts: list[np.ndarray], n_cps: np.ndarray) -> _Edges:
        """The edges in one array each, stably sorted by their start's local position, with their scores."""
        locs = np.concatenate(loc_parts)
        by_loc = np.argsort(locs.astype(_narrow(n_cps)), kind="stable")
        src = np.concatenate(src_parts)[by_loc]
        dst = np.concatenate(dst_parts)[by_loc]
        row = np.concatenate(row_parts)[by_loc]
        val = np.append(self.tok_value, self.unk_score)[row]
        steps = np.zeros(int(n_cps.max()) + 1, dtype=np.int64)
        np.cumsum(np.bincount(locs, minlength=len(steps) - 1), out=steps[1:])
        return _Edges(src, dst, row, val, steps.tolist())

    def _backtrack(self, best: np.ndarray, back: np.ndarray, cells: _Cells, n_words: int) -> list[list[int]]:
        """The ids of each word along its best path, a run of unknowns as one."""
        path = _best_path(back, cells)
        ids = np.append(self.tok_id, self.unk)[best[path]]
        owner = np.searchsorted(cells.end_cell, path)
        unk = self.unk
        again = np.flatnonzero((ids[1:] == unk) & (ids[:-1] == unk) & (owner[1:] == owner[:-1])) + 1
        if len(again):
            ids, owner = np.delete(ids, again), np.delete(owner, again)
        cuts = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=n_words), out=cuts[1:])
        flat = ids.tolist()
        cut = cuts.tolist()
        return [flat[a:b] for a, b in pairwise(cut)]


class _Cells(NamedTuple):
    """The lattice's cells: each word's code point cells, then its end cell."""

    cell: np.ndarray  # each code point's cell
    start_cell: np.ndarray  # each word's first cell
    end_cell: np.ndarray  # each word's end cell
    n_cells: int
    pos: np.ndarray  # each cell's byte offset
    remaining: np.ndarray  # each code point: how many code points from it to its word's end
    loc: np.ndarray  # each code point's local position in its word


class _Edges(NamedTuple):
    """The lattice's edges by local position of their start: those of position i are [bounds[i], bounds[i + 1])."""

    src: np.ndarray  # the cell an edge starts from
    dst: np.ndarray  # the cell it ends at
    row: np.ndarray  # its token's row, -1 for the unknown token
    val: np.ndarray  # its token's score
    bounds: list[int]


def _cells(lead: np.ndarray, cp_first: np.ndarray, n_cps: np.ndarray, word_end: np.ndarray) -> _Cells:
    """The cells of the words' lattices, from their code points' lead bytes (`lead`)."""
    n_words = len(n_cps)
    n_cp = len(lead)
    word_of_cp = np.repeat(np.arange(n_words), n_cps)
    cp_index = np.arange(n_cp)
    cell = cp_index + word_of_cp  # each word: its code point cells, then its end cell
    end_cell = cp_first[1:] + np.arange(n_words)
    start_cell = cell[cp_first[:-1]]
    n_cells = n_cp + n_words
    pos = np.empty(n_cells, dtype=np.int64)
    pos[cell] = lead
    pos[end_cell] = word_end
    remaining = cp_first[1:][word_of_cp] - cp_index
    loc = cp_index - cp_first[:-1][word_of_cp]
    return _Cells(cell, start_cell, end_cell, n_cells, pos, remaining, loc)


def _forward(edges: _Edges, cells: _Cells) -> tuple[np.ndarray, np.ndarray]:
    """(each cell's best token row, -1 for the unknown; the cell its best edge starts from)."""
    src, dst, row, val = edges.src, edges.dst, edges.row, edges.val
    score = np.full(cells.n_cells, -np.finfo(np.float64).max)
    score[cells.start_cell] = 0.0
    best = np.full(cells.n_cells, -1, dtype=np.int64)
    back = np.zeros(cells.n_cells, dtype=np.int64)
    for lo, hi in pairwise(edges.bounds):
        s = src[lo:hi]
        d = dst[lo:hi]
        total = score[s] + val[lo:hi]
        better = total > score[d]
        if better.all():
            r = row[lo:hi]
        else:
            s, d, total, r = s[better], d[better], total[better], row[lo:hi][better]
        score[d] = total
        best[d] = r
        back[d] = s
    return best, back


def _best_path(back: np.ndarray, cells: _Cells) -> np.ndarray:
    """The cells on the words' best paths, in order (start cells excluded, end cells included)."""
    on = np.zeros(cells.n_cells, dtype=bool)
    is_start = np.zeros(cells.n_cells, dtype=bool)
    is_start[cells.start_cell] = True
    cur = cells.end_cell
    while len(cur):
        on[cur] = True
        cur = back[cur]
        cur = cur[~is_start[cur]]
    return np.flatnonzero(on)


def _narrow(n_cps: np.ndarray) -> type[np.signedinteger]:
    """int16 (sorted by radix) when every word has fewer than 2**15 code points."""
    return np.int16 if len(n_cps) and int(n_cps.max()) < 1 << 15 else np.int64


def _most_lead_bytes(buf: np.ndarray, offsets: np.ndarray, sizes: np.ndarray) -> int:
    """The most lead bytes (code points, for whole ones) in a token: counted for the
    tokens over 16 bytes; the others have at most 16."""
    long = np.flatnonzero(sizes > 16)
    most = min(16, int(sizes.max(initial=0)))
    if not len(long):
        return most
    lens = sizes[long]
    firsts = np.zeros(len(long), dtype=np.int64)
    np.cumsum(lens[:-1], out=firsts[1:])
    at = np.repeat(offsets[long] - firsts, lens) + np.arange(int(lens.sum()))
    leads = np.add.reduceat(((buf[at] & 0xC0) != 0x80).astype(np.int32), firsts)
    return max(most, int(leads.max()))


def _long_words(sizes: np.ndarray) -> int | None:
    """A size in bytes above which words are left to the caller, or None.

    The batch takes one numpy step per local position (code point); for words
    over 32 bytes longer than the fourth-longest, each step would serve three
    words or fewer.
    """
    if len(sizes) < 4:
        return None
    fourth = int(np.partition(sizes, len(sizes) - 4)[len(sizes) - 4])
    return fourth + 32 if int(sizes.max()) > fourth + 32 else None
