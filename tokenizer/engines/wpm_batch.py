"""WPM's greedy longest-first match for many words at once, in numpy: the same ids.

`wpm.WpmEngine.encode_words` hands the `▁word`s of one call that are not tokens
themselves to `BatchGreedy.run` when there are many. All words advance in
lockstep, one token per step:

- at each active word's offset, the lengths of the tokens sharing the next two
  bytes (at the word start, the two after the space symbol, and every length
  below `wpm.FIRST`), as in `wpm.candidate_lengths` but held as bits, are tried
  longest first, never the whole word at its start (not a token): every window
  of that length looked up among the token texts by `ugm_batch`'s keys (the bytes
  below 8, else a chunk hash, each hit verified byte by byte), the first hit kept;
- a word with no hit at some step becomes the single UNK id, as in llama.cpp;
- once fewer than `FEW` words are left, they go back to the caller, to be matched
  one by one (the greedy match is the same from the start).

Not used (`usable`) when two tokens share a key or a token is over 62 bytes.
Built from the token texts on first use (`wpm.WpmEngine.batch_for`): about 7 ms
for bert-bge's 30,522 tokens.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..pieces import ESCAPED_SPACE
from .ugm_batch import _MASKS, _U8, BatchViterbi, _keys, _same_bytes, _u64_view

MIN_WORDS = 2000  # fewer words than this: the per-word Python match is faster (measured: 1,500)
BUILD_AFTER = 3000  # missing words matched one by one before the batch is built
FEW = 128  # fewer active words than this: the rest go back to the caller
_PAD = bytes(8)
_SPACE = len(ESCAPED_SPACE)
_FIRST = _SPACE + 2  # as wpm.FIRST
_MOST = 63  # the bits of a length set: lengths up to 62
_ONE = np.uint64(1)


class BatchGreedy:
    """The token texts keyed for numpy lookups, the length bounds, and the batched match."""

    def __init__(self, to_id: Mapping[bytes, int], *, unk: int) -> None:
        texts = list(to_id)
        ids = np.fromiter(to_id.values(), dtype=np.int64, count=len(texts))
        sizes = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        # the key table and lookup of the UGM batch (scores unused), at most a quarter full
        bits = max(10, (4 * len(texts)).bit_length())
        self.table = BatchViterbi(texts, ids, np.zeros(len(texts)), sizes, unk=unk, unk_score=0.0,
                                  space=ESCAPED_SPACE, bits=bits)
        self.unk = unk
        buf = np.frombuffer(self.table.raw, dtype=np.uint8)
        offsets = self.table.tok_offset
        self.longest = int(sizes.max(initial=0))
        # the lengths of the tokens by their first two bytes, as bits (1: a single byte)
        two = sizes >= 2
        self.pair_bits = _length_bits(_pair(buf, offsets[two]), sizes[two], 2)
        # the lengths of the tokens from the space symbol by its next two bytes (and all below _FIRST)
        spaced = sizes >= _FIRST
        for k, byte in enumerate(ESCAPED_SPACE):
            spaced &= buf[offsets + k] == byte
        self.start_bits = _length_bits(_pair(buf, offsets[spaced] + _SPACE), sizes[spaced], (1 << _FIRST) - 2)

    @property
    def usable(self) -> bool:
        """Whether every lookup is exact: no two tokens share a key, none longer than _MOST - 1."""
        return self.table.unique and self.longest < _MOST

    def run(self, words: list[bytes]) -> tuple[list[list[int]], list[int]]:
        """(the ids of each of `words`, the indices of those left to the caller: theirs are
        empty).

        Each word starts with the space symbol and is not a token itself.
        """
        n = len(words)
        sizes = np.fromiter(map(len, words), dtype=np.int64, count=n)
        raw = b"".join(words) + _PAD
        view = _u64_view(raw)
        buf = np.frombuffer(raw, dtype=np.uint8)
        pos = np.zeros(n, dtype=np.int64)
        np.cumsum(sizes[:-1], out=pos[1:])
        rem = sizes.copy()
        act = np.arange(n)
        failed = np.zeros(n, dtype=bool)
        out_word, out_id, out_nth = [], [], []
        count = np.zeros(n, dtype=np.int64)  # each word's tokens so far
        table, tok_id, tok_size, tok_offset = self.table, self.table.tok_id, self.table.tok_size, \
            self.table.tok_offset
        at_start = True
        while len(act) >= FEW:
            if at_start:  # never the whole word (not a token)
                bits = self.start_bits[_pair(buf, pos + _SPACE)] & _below(rem)
                at_start = False
            else:
                bits = self.pair_bits[_pair(buf, pos)] & _below(rem + 1)
            got_len = np.zeros(len(act), dtype=np.int64)
            got_id = np.zeros(len(act), dtype=np.int64)
            todo = np.arange(len(act))
            tried = int(np.bitwise_or.reduce(bits))
            for length in range(min(tried.bit_length() - 1, self.longest), 0, -1):
                if not tried >> length & 1:
                    continue
                sel = todo[(bits[todo] >> np.uint64(length)) & _ONE != 0]
                if not len(sel):
                    continue
                at = pos[sel]
                if length < 8:  # `_keys` for one size below 8: the bytes, then the size
                    hit, row = table.lookup(((view[at] & _MASKS[length]) << _U8) | np.uint64(length))
                else:
                    size = np.full(len(sel), length, dtype=np.int64)
                    hit, row = table.lookup(_keys(view, at, size))
                    ok = tok_size[row] == length
                    ok[ok] = _same_bytes(view, at[hit[ok]], table.view, tok_offset[row[ok]], size[hit[ok]])
                    hit, row = hit[ok], row[ok]
                if len(hit):
                    got_len[sel[hit]] = length
                    got_id[sel[hit]] = tok_id[row]
                    todo = todo[got_len[todo] == 0]
            matched = got_len > 0
            failed[act[~matched]] = True
            act, pos, rem = act[matched], pos[matched], rem[matched]
            got_len = got_len[matched]
            out_word.append(act)
            out_id.append(got_id[matched])
            out_nth.append(count[act])
            count[act] += 1
            pos += got_len
            rem -= got_len
            going = rem > 0
            act, pos, rem = act[going], pos[going], rem[going]
        unknown = np.flatnonzero(failed).tolist()
        drop = failed
        drop[act] = True  # the unknown words and those left to the caller
        word = np.concatenate(out_word) if out_word else np.zeros(0, dtype=np.int64)
        ids = np.concatenate(out_id) if out_id else np.zeros(0, dtype=np.int64)
        nth = np.concatenate(out_nth) if out_nth else np.zeros(0, dtype=np.int64)
        keep = ~drop[word]
        word, ids, nth = word[keep], ids[keep], nth[keep]
        count[drop] = 0
        cuts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(count, out=cuts[1:])
        flat = np.empty(len(ids), dtype=np.int64)
        flat[cuts[word] + nth] = ids  # each word's tokens in step order
        cut = cuts.tolist()
        found = list(map(flat.tolist().__getitem__, map(slice, cut, cut[1:])))
        for i in unknown:
            found[i] = [self.unk]
        return found, act.tolist()


def _below(n: np.ndarray) -> np.ndarray:
    """The bits of the lengths 1..n - 1 (n at most _MOST)."""
    out: np.ndarray = (_ONE << np.minimum(n, _MOST).astype(np.uint64)) - _ONE
    return out


def _length_bits(key: np.ndarray, sizes: np.ndarray, base: int) -> np.ndarray:
    """{two-byte key: `base` and the bit of each of its tokens' sizes (up to _MOST - 1)}."""
    out = np.full(1 << 16, base, dtype=np.uint64)
    if not len(key):
        return out
    order = np.argsort(key.astype(np.uint16), kind="stable")  # radix
    key = key[order]
    bit = np.left_shift(_ONE, np.minimum(sizes[order], _MOST - 1).astype(np.uint64))
    firsts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    out[key[firsts]] |= np.bitwise_or.reduceat(bit, firsts)
    return out


def _pair(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The two bytes from each of `at` as one integer (the first high)."""
    out: np.ndarray = (buf[at].astype(np.int64) << 8) | buf[at + 1]
    return out
