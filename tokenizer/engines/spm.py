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
UTF-8 text is cut there and each piece is cached (tests/test_spm.py checks the
cut against uncut runs).

Two loops give the same merges: llama.cpp's heap for long runs of symbols, and
for short ones (most words) a scan of a list of score ranks, whose first
maximum is the pair the heap would pop next (tests/test_spm.py runs each loop
alone against the SPM goldens).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from itertools import islice, repeat
from operator import add
from typing import TYPE_CHECKING

import numpy as np
import regex

from ..cache import BoundedCache
from ..errors import UnsupportedVocab
from ..pieces import ESCAPED_SPACE, spm_piece
from ..unicode import utf8_chars
from .base import BosEosEngine

if TYPE_CHECKING:
    from ..vocab import Vocab

SCAN_LIMIT = 48  # symbols: up to this many, a scan of the pair ranks per merge beats a heap
_SEGMENT = regex.compile("\u2581*[^\u2581]+|\u2581+")
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
        self._rank = _score_ranks(vocab.token_to_id, vocab.scores)
        self._cache: BoundedCache[str, tuple[int, ...]] = BoundedCache()

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
                for seg in _SEGMENT.findall(text):
                    out.extend(self._segment(seg))
                return
        out.extend(self.merge(utf8_chars(data)))

    def _segment(self, seg: str) -> tuple[int, ...]:
        ids = self._cache.get(seg)
        if ids is None:
            ids = self._cache.put(seg, tuple(self.merge(list(map(str.encode, seg)))))
        return ids

    def merge(self, syms: list[bytes]) -> list[int]:
        """Ids of `syms` merged best score first (leftmost on a tie), byte fallback for the rest."""
        if len(syms) > SCAN_LIMIT:
            return self.merge_heap(syms)
        rank = self._rank.get
        # ranks[k]: the score rank of syms[k] + syms[k + 1] as a token, -1 when it is none
        ranks = list(map(rank, map(add, syms, islice(syms, 1, None)), repeat(-1)))
        while ranks:
            best = max(ranks)
            if best < 0:
                break
            k = ranks.index(best)  # the leftmost of the best
            merged = syms[k] = syms[k] + syms[k + 1]
            del syms[k + 1], ranks[k]
            if k:
                ranks[k - 1] = rank(syms[k - 1] + merged, -1)
            if k < len(ranks):
                ranks[k] = rank(merged + syms[k + 1], -1)
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
        out = []
        for byte in text:
            tid = self._byte_ids[byte]
            if tid is None:
                raise UnsupportedVocab(
                    f"no token for byte 0x{byte:02X} (neither <0x{byte:02X}> nor the raw byte): "
                    "llama.cpp throws std::out_of_range here")
            out.append(tid)
        return out


def _score_ranks(token_to_id: Mapping[bytes, int], scores: Sequence[float]) -> dict[bytes, int]:
    """{token text: the rank of its score among all scores}, 0 for the lowest: equal
    scores share a rank, so ranks order (and tie) exactly as the scores do."""
    ids = np.fromiter(token_to_id.values(), dtype=np.int64, count=len(token_to_id))
    _, rank = np.unique(np.asarray(scores, dtype=np.float64), return_inverse=True)
    return dict(zip(token_to_id, rank.reshape(-1)[ids].tolist()))


def _no_token_spans_a_word_start(texts: Sequence[bytes]) -> bool:
    """True when no token holds U+2581 right after some other character."""
    esc = ESCAPED_SPACE
    for t in texts:
        at = t.find(esc, 1)
        while at > 0:
            if t[max(0, at - 3):at] != esc:
                return False
            at = t.find(esc, at + 1)
    return True


def _refuse_nan_scores(vocab: Vocab) -> None:
    for i, s in enumerate(vocab.scores):
        if math.isnan(s):
            raise UnsupportedVocab(
                f"token {i} has a NaN score: llama.cpp's merge queue has no defined order then")
