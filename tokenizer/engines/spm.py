"""SPM (`tokenizer.ggml.model = "llama"`): SentencePiece BPE as llama.cpp runs it.

Per raw fragment, llama.cpp prefixes a space when the vocabulary adds a space
prefix and the fragment starts the input or follows a special token, replaces
every space with U+2581 (always, whatever `escape_whitespaces` says), cuts the
bytes into UTF-8 characters by their lead byte (a stray continuation byte is a
character of its own; a truncated sequence at the end is cut short), and then
repeatedly merges the adjacent pair whose concatenation is a token with the
highest score, the leftmost pair on a tie. A final symbol that is not a token
falls back to one byte token per byte (`<0xXX>`, else the raw one-byte token).
BOS goes first when `add_special` and `add_bos`, EOS last when `add_special`
and `add_eos`.

The merge result of a stretch of text cannot depend on text beyond a point that
no token spans. When no token contains U+2581 right after another character,
every U+2581 that follows a non-U+2581 character is such a point, so valid
UTF-8 text is cut there and each piece is cached (tests/tokenizer/test_spm.py checks the
cut against uncut runs).

Three loops give the same merges: llama.cpp's heap for long segments; for
short ones (most words), when a call has many, `merge_batch`, which merges all
the distinct segments of the call at once in numpy, a row per segment: each
round takes in every row the first maximum of its score ranks, the pair the
heap would pop next, so each row goes through exactly the heap's merges (a
pair of symbols, token ids or a character that is no token, is looked up by
its text); and for a few short segments, a scan of a list of score ranks per
segment (`merge`), whose first maximum is again the heap's next pair. Text
that is not valid UTF-8 takes the scan or the heap. tests/tokenizer/test_spm.py runs
each loop alone against the SPM goldens, and checks the rows and the scan
against the heap on every token's text and the boundary slice.
"""

from __future__ import annotations

import gc
import heapq
import re
from collections.abc import Sequence
from itertools import compress, filterfalse, islice, pairwise, repeat
from operator import add
from typing import TYPE_CHECKING

import numpy as np

from ..cache import CACHE_LIMIT, BoundedCache
from ..errors import UnsupportedVocab
from ..pieces import ESCAPED_SPACE, spm_piece
from ..unicode import MAX_CODEPOINTS, utf8_chars
from .base import BosEosEngine

if TYPE_CHECKING:
    from ..vocab import Vocab

SCAN_LIMIT = 48  # characters: segments up to this long merge in rows at once, longer ones by a heap
ROWS_FROM = 640  # distinct short segments in a call from which they merge in rows (fewer: a scan each)
WIDTHS = (4, 8, 16, 32, SCAN_LIMIT)  # row widths the short segments are grouped by
BLOCK = 1 << 16  # segments a call caches at once, each distinct one merged once
CHUNK = 1 << 18  # characters merged in rows at once, so that the arrays stay bounded
_SEGMENT = re.compile("\u2581*[^\u2581]+|\u2581+")
_Pair = tuple[float, int, int, int]  # (-score, left, right, merged length): heapq pops the best


class SpmEngine(BosEosEngine):
    """llama.cpp's `llm_tokenizer_spm_session` and the SPM branch of `tokenize`."""

    vocab_type = "spm"

    def __init__(self, vocab: Vocab) -> None:
        super().__init__(vocab)
        _refuse_nan_scores(vocab)
        self._ids = vocab.token_to_id
        self._scores = vocab.scores
        self._byte_ids = [vocab.byte_token(b) for b in range(256)]
        self._cuttable = _no_token_spans_a_word_start(vocab.texts)
        # the score rank of each token id, and -1 at index -1: a pair that is no token (id -1) ranks -1
        self._rank_of = np.append(_score_ranks(vocab.scores), -1)
        self._rank_list: list[int] = self._rank_of.tolist()
        self._sym_texts = list(vocab.texts)  # by symbol: token ids, then the characters met that are no token
        self._char_symbols: dict[int, int] = {}  # code point: its symbol
        # a pair of symbols is left * base + right; symbols stay below base (see _symbol_table)
        self._base = len(vocab.texts) + CACHE_LIMIT + MAX_CODEPOINTS
        self._cache: BoundedCache[str, list[int]] = BoundedCache()

    def first_text(self, fragment: bytes) -> bytes:
        """llama.cpp's space prefix, for a fragment that starts the input or follows a special."""
        return b" " + fragment if self.vocab.add_space_prefix else fragment

    def encode_into(self, fragment: bytes, out: list[int]) -> None:
        self._encode(fragment.replace(b" ", ESCAPED_SPACE), out)

    def piece(self, token: int) -> bytes:
        return spm_piece(self.vocab, token)

    def _encode(self, data: bytes, out: list[int]) -> None:
        if self._cuttable:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                segs = _SEGMENT.findall(text)
                paused = gc.isenabled()  # the batch builds many small lists, all alive: the
                gc.disable()  # collector's passes over them would find nothing to free
                try:
                    for at in range(0, len(segs), BLOCK):
                        self._encode_segments(segs[at:at + BLOCK], out)
                finally:
                    if paused:
                        gc.enable()
                return
        syms = utf8_chars(data)
        out.extend(self.merge(syms) if len(syms) <= SCAN_LIMIT else self.merge_heap(syms))

    def _encode_segments(self, segs: list[str], out: list[int]) -> None:
        """Append the ids of `segs` (at most BLOCK), each distinct segment merged once."""
        cache = self._cache
        todo = list(filterfalse(cache.__contains__, dict.fromkeys(segs)))
        if cache.make_room(len(todo)):
            todo = list(dict.fromkeys(segs))
        lens = list(map(len, todo))
        short = list(compress(todo, map(SCAN_LIMIT.__ge__, lens)))
        if len(short) < ROWS_FROM:  # too few for the rows' fixed cost per round
            for seg in short:
                cache[seg] = self.merge(list(map(str.encode, seg)))
        else:
            cache.update(zip(short, self.merge_batch(short)))
        for seg in compress(todo, map(SCAN_LIMIT.__lt__, lens)):
            cache[seg] = self.merge_heap(list(map(str.encode, seg)))
        for ids in map(cache.__getitem__, segs):
            out += ids

    def merge_batch(self, segs: list[str]) -> list[list[int]]:
        """The ids of each of `segs` (valid text), merged by `_merge_rows` in rows of like length,
        at most CHUNK characters at once."""
        lens = np.fromiter(map(len, segs), dtype=np.int64, count=len(segs))
        cuts = np.searchsorted(np.cumsum(lens), np.arange(CHUNK, int(lens.sum()), CHUNK), side="right").tolist()
        out: list[list[int]] = []
        for lo, hi in pairwise([0, *cuts, len(segs)]):
            if lo < hi:
                out += self._merge_chunk(segs[lo:hi], lens[lo:hi])
        return out

    def _merge_chunk(self, segs: list[str], lens: np.ndarray) -> list[list[int]]:
        dense = self._symbol_table("".join(segs))
        group = np.searchsorted(WIDTHS, lens)  # the first width that holds it, len(WIDTHS) for none
        order = np.argsort(group, kind="stable")
        bounds = np.searchsorted(group[order], np.arange(len(WIDTHS) + 2)).tolist()
        out: list[list[int]] = [[]] * len(segs)
        for g, (lo, hi) in enumerate(pairwise(bounds)):
            if lo == hi:
                continue
            rows = order[lo:hi].tolist()
            width = WIDTHS[g] if g < len(WIDTHS) else int(lens[rows].max())
            wide = width + 1  # at least one padding cell (-1) ends each row
            text = "".join([segs[i] for i in rows]).encode("utf-32-le")
            sizes = lens[rows]
            cell = np.arange(len(text) // 4) + np.repeat(np.arange(len(rows)) * wide - (np.cumsum(sizes) - sizes),
                                                         sizes)
            sym = np.full(len(rows) * wide, -1, dtype=np.int64)
            sym[cell] = dense[np.frombuffer(text, dtype=np.uint32)]
            for i, ids in zip(rows, self._merge_rows(sym, wide)):
                out[i] = ids
        return out

    def _symbol_table(self, text: str) -> np.ndarray:
        """{code point: symbol} as an array indexed by the code points of `text`:
        a character's symbol is its token id, else its index in `_sym_texts` (n_tokens or more)."""
        if len(self._sym_texts) > len(self._scores) + CACHE_LIMIT:  # start again: forget the symbols
            self._char_symbols.clear()
            del self._sym_texts[len(self._scores):]
        cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        seen = np.zeros(int(cps.max()) + 1, dtype=bool)
        seen[cps] = True
        chars = np.flatnonzero(seen).tolist()
        known = self._char_symbols
        for c in [c for c in chars if c not in known]:
            known[c] = self._char_symbol(chr(c).encode())
        dense = np.empty(seen.size, dtype=np.int64)
        dense[chars] = list(map(known.__getitem__, chars))
        return dense

    def _char_symbol(self, char: bytes) -> int:
        tid = self._ids.get(char)
        if tid is not None:
            return tid
        self._sym_texts.append(char)
        return len(self._sym_texts) - 1

    def _merge_rows(self, sym: np.ndarray, wide: int) -> list[list[int]]:
        """Merge every row of `sym` (flat, `wide` cells a row, -1 after the text) at once.

        A merged-away cell gets symbol -1 and leaves the linked list `nxt`/`prv`
        (a row's first cell points back at its last, padding cell). Each round
        merges, in every row that still can, the pair with the highest score rank,
        the leftmost on a tie (`argmax`): the pair llama.cpp's heap pops next.
        """
        cells = np.arange(sym.size, dtype=np.int64)
        nxt, prv = cells + 1, cells - 1
        prv[::wide] += wide
        ok = (sym[:-1] >= 0) & (sym[1:] >= 0)  # the pairs of characters, most of them met more than once
        pairs, where = np.unique(sym[:-1][ok] * self._base + sym[1:][ok], return_inverse=True)
        made = np.full(sym.size, -1, dtype=np.int64)  # the token each cell's pair makes, -1 for none
        made[:-1][ok] = self._pair_ids(*np.divmod(pairs, self._base))[where]
        rank = self._rank_of[made]
        live = cells[::wide]  # the first cell of each row that may merge again
        while live.size:
            k = rank.reshape(-1, wide)[live // wide].argmax(axis=1) + live
            go = rank[k] >= 0
            if not go.all():
                live, k = live[go], k[go]
                if not live.size:
                    break
            merged, right = made[k], nxt[k]
            after, before = nxt[right], prv[k]
            sym[k], sym[right], rank[right] = merged, -1, -1
            nxt[k], prv[after] = after, k
            # the pair left of the merged symbol (at `before`) and the one right of it (at k)
            at = np.concatenate((before, k))
            lefts = sym[before]
            made[at] = ids = self._pair_ids(np.concatenate((lefts, merged)), np.concatenate((merged, sym[after])))
            rank[at] = self._rank_of[ids]
        return self._row_ids(sym.reshape(-1, wide))

    def _pair_ids(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """The id of the token each pair of symbols spells, -1 where it is none (looked up by
        text every time: remembering pairs cost more than it saved where most words occur once)."""
        ok = (left >= 0) & (right >= 0)
        texts = self._sym_texts.__getitem__
        joined = map(add, map(texts, left[ok].tolist()), map(texts, right[ok].tolist()))
        out = np.full(left.shape, -1, dtype=np.int64)
        out[ok] = np.fromiter(map(self._ids.get, joined, repeat(-1)), dtype=np.int64, count=int(ok.sum()))
        return out

    def _row_ids(self, sym: np.ndarray) -> list[list[int]]:
        """Each row's ids: its live symbols, a character that is no token as its byte tokens."""
        keep = sym >= 0
        flat = sym[keep]
        counts = keep.sum(axis=1)
        if flat.size and flat.max() >= len(self._scores):
            flat, counts = self._spell_bytes(flat, counts)
        ids = flat.tolist()
        ends = np.cumsum(counts).tolist()
        return [ids[a:b] for a, b in zip([0, *ends], ends)]

    def _spell_bytes(self, flat: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`flat` (rows of `counts` symbols) with each character that is no token as its byte tokens."""
        n = len(self._scores)
        odd = flat >= n
        chars = np.unique(flat[odd])
        spelled = [self._byte_fallback(self._sym_texts[c]) for c in chars.tolist()]
        table = np.zeros((chars.size, 4), dtype=np.int64)
        for row, ids in zip(table, spelled):
            row[:len(ids)] = ids
        lengths = np.ones(flat.size, dtype=np.int64)
        which = np.searchsorted(chars, flat[odd])
        lengths[odd] = np.fromiter(map(len, spelled), dtype=np.int64, count=len(spelled))[which]
        out = np.repeat(flat, lengths)
        step = np.arange(out.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # byte of the char
        out[np.repeat(odd, lengths)] = table[np.repeat(which, lengths[odd]), step[np.repeat(odd, lengths)]]
        return out, np.add.reduceat(lengths, np.cumsum(counts) - counts)

    def merge(self, syms: list[bytes]) -> list[int]:
        """Ids of `syms` merged best score first (leftmost on a tie), byte fallback for the rest:
        a scan of the pair ranks per merge, for a few short segments."""
        get, rank = self._ids.get, self._rank_list
        # ranks[k]: the score rank of syms[k] + syms[k + 1] as a token, -1 when it is none
        ranks = list(map(rank.__getitem__, map(get, map(add, syms, islice(syms, 1, None)), repeat(-1))))
        while ranks:
            best = max(ranks)
            if best < 0:
                break
            k = ranks.index(best)  # the leftmost of the best
            merged = syms[k] = syms[k] + syms[k + 1]
            del syms[k + 1], ranks[k]
            if k:
                ranks[k - 1] = rank[get(syms[k - 1] + merged, -1)]
            if k < len(ranks):
                ranks[k] = rank[get(merged + syms[k + 1], -1)]
        return self._ids_of(syms)

    def _ids_of(self, syms: list[bytes]) -> list[int]:
        out = list(map(self._ids.get, syms))
        return self._emit(syms, out) if None in out else out  # type: ignore[return-value]

    def merge_heap(self, syms: list[bytes]) -> list[int]:
        """Best-score-first merging of adjacent symbols, then ids (byte fallback for the rest).

        A merged-away symbol becomes b"" (symbols are never empty otherwise), so
        a queued pair is stale when either side is empty or their lengths no
        longer add up to the merged length it was queued with.
        """
        n = len(syms)
        get, scores = self._ids.get, self._scores
        heap: list[_Pair] = [
            (-scores[tid], i, i + 1, len(syms[i]) + len(syms[i + 1]))
            for i, tid in enumerate(map(get, map(add, syms, islice(syms, 1, None))))
            if tid is not None]
        if heap:
            heapq.heapify(heap)
            nxt = list(range(1, n + 1))
            nxt[-1] = -1
            prev = list(range(-1, n - 1))
            pop, push = heapq.heappop, heapq.heappush
            while heap:
                _, left, right, size = pop(heap)
                a, b = syms[left], syms[right]
                if not a or not b or len(a) + len(b) != size:
                    continue  # one side was merged away since this pair was queued
                merged = syms[left] = a + b
                syms[right] = b""
                after = nxt[left] = nxt[right]
                if after >= 0:
                    prev[after] = left
                before = prev[left]
                if before >= 0:
                    text = syms[before] + merged
                    tid = get(text)
                    if tid is not None:
                        push(heap, (-scores[tid], before, left, len(text)))
                if after >= 0:
                    text = merged + syms[after]
                    tid = get(text)
                    if tid is not None:
                        push(heap, (-scores[tid], left, after, len(text)))
            syms = list(filter(None, syms))
        return self._ids_of(syms)

    def _emit(self, syms: list[bytes], found: list[int | None]) -> list[int]:
        """`found` with each symbol that is no token replaced by its byte tokens."""
        out: list[int] = []
        for sym, tid in zip(syms, found):
            if tid is not None:
                out.append(tid)
            else:
                out.extend(self._byte_fallback(sym))
        return out

    def _byte_fallback(self, text: bytes) -> list[int]:
        """The byte tokens of a symbol that is no token."""
        out = []
        for byte in text:
            tid = self._byte_ids[byte]
            if tid is None:
                raise UnsupportedVocab(
                    f"no token for byte 0x{byte:02X} (neither <0x{byte:02X}> nor the raw byte): "
                    "llama.cpp throws std::out_of_range here")
            out.append(tid)
        return out


def _score_ranks(scores: Sequence[float]) -> np.ndarray:
    """The rank of each score among all scores, by id, 0 for the lowest: equal scores
    share a rank, so ranks order (and tie) exactly as the scores do."""
    _, rank = np.unique(np.asarray(scores, dtype=np.float64), return_inverse=True)
    return rank.reshape(-1)


def _no_token_spans_a_word_start(texts: Sequence[bytes]) -> bool:
    """True when no token holds U+2581 right after some other character."""
    data = np.frombuffer(b"".join(texts), dtype=np.uint8)
    sizes = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    ends = np.cumsum(sizes)
    e2, x96, x81 = ESCAPED_SPACE
    at = np.flatnonzero((data[:-2] == e2) & (data[1:-1] == x96) & (data[2:] == x81))  # each U+2581
    token = np.searchsorted(ends, at, side="right")  # the token each starts in
    start = ends[token] - sizes[token]
    inside = at + 3 <= ends[token]
    after_esc = (at - start >= 3) & (data[at - 3] == e2) & (data[at - 2] == x96) & (data[at - 1] == x81)
    return not np.any(inside & (at > start) & ~after_esc)


def _refuse_nan_scores(vocab: Vocab) -> None:
    nan = np.flatnonzero(np.isnan(np.asarray(vocab.scores, dtype=np.float64)))
    if nan.size:
        raise UnsupportedVocab(
            f"token {int(nan[0])} has a NaN score: llama.cpp's merge queue has no defined order then")
