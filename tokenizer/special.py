"""Special-token partitioning: llama.cpp's `tokenizer_st_partition`, on bytes.

Before an engine sees any text, llama.cpp splits the input at every occurrence
of a special token, walking its special-token cache (CONTROL, USER_DEFINED and
UNKNOWN tokens, longest text first, `Vocab.special_tokens`). For each token in
that order it splits every remaining raw fragment at each occurrence, left to
right. A token with the LSTRIP attribute eats the whitespace before it (within
the fragment), one with RSTRIP the whitespace after it ("whitespace" is C's
`isspace`: space, \\t, \\n, \\v, \\f, \\r).

With `parse_special=False` CONTROL and UNKNOWN tokens are left in the text, but
USER_DEFINED tokens are still split out (as HF tokenizers does).

Example:
    >>> partition(b"a<s>b", vocab, parse_special=True)   # llama-spm
    [b'a', 1, b'b']
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from itertools import repeat
from typing import TYPE_CHECKING, cast

import numpy as np

from .attrs import Attr

if TYPE_CHECKING:
    from .vocab import Vocab

Fragment = bytes | int
Span = tuple[int, int] | int  # a raw (start, end) byte range, or a special token id

_SPACE = frozenset(b" \t\n\v\f\r")
_HIDDEN_UNLESS_SPECIAL = int(Attr.CONTROL | Attr.UNKNOWN)
_LSTRIP = int(Attr.LSTRIP)
_RSTRIP = int(Attr.RSTRIP)


def partition(data: bytes, vocab: Vocab, *, parse_special: bool) -> list[Fragment]:
    """`data` as raw byte fragments and special token ids, in order. Empty input gives []."""
    return Partitioner(vocab).partition(data, parse_special=parse_special)


class Partitioner:
    """`partition` for one vocabulary, with the per-call work done once.

    Which special tokens can split the input (all, or without CONTROL and UNKNOWN
    under parse_special=False) is fixed by the vocabulary, and so are the few byte
    pairs they start with: an input holding none of those pairs has no special token
    in it (exact in its "no"), which most inputs show with a few `in` tests.
    """

    GATE_MAX = 16  # distinct leading pairs above which the gate costs more than it saves

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        texts, attrs = vocab.texts, vocab.attrs
        self._plans = {}
        for parse_special in (False, True):
            tokens = tuple((tid, texts[tid], attrs[tid]) for tid in vocab.special_tokens
                           if parse_special or not attrs[tid] & _HIDDEN_UNLESS_SPECIAL)
            leads = tuple(dict.fromkeys(text[:2] for _, text, _ in tokens))
            self._plans[parse_special] = (tokens, leads if len(leads) <= self.GATE_MAX else None,
                                          _PrefixFilter([text for _, text, _ in tokens]))

    def partition(self, data: bytes, *, parse_special: bool) -> list[Fragment]:
        if not data:
            return []
        tokens, leads, prefixes = self._plans[parse_special]
        if leads is not None and not any(lead in data for lead in leads):
            return [data]
        spans = _Spans(len(data))
        for (tid, text, attr), maybe in zip(tokens, prefixes.may_occur(data), strict=True):
            if maybe:
                spans.split_at(data, text, tid, attr)  # its first `find` is the test of whether it occurs
        return spans.fragments(data)


_FILTER_MIN_WORK = 1 << 20  # bytes x special tokens below which plain `in` is cheaper


class _PrefixFilter:
    """A cheap "may this token occur in `data`?" for every token at once, exact in its "no".

    On long inputs with many special tokens (command-r has about 1,000, ai21-j2's
    GGUF 26,089) scanning the input once per token dominates. A token whose first
    four bytes (two, if it is shorter) are nowhere in the input cannot occur in it:
    the input's 4-byte windows and byte pairs are gathered once, and every token's
    prefix is looked up in one vectorised step.
    """

    def __init__(self, texts: list[bytes]) -> None:
        self.count = len(texts)
        self.key4 = np.array([_key(text[:4]) if len(text) >= 4 else -1 for text in texts], dtype=np.int64)
        self.key2 = np.array([_key(text[:2]) if len(text) >= 2 else -1 for text in texts], dtype=np.int64)

    def may_occur(self, data: bytes) -> Iterable[bool]:
        if len(data) * self.count < _FILTER_MIN_WORK:
            return repeat(True, self.count)
        a = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
        pairs = np.zeros(1 << 16, dtype=bool)
        pairs[(a[:-1] << 8) | a[1:]] = True
        maybe = np.where(self.key2 >= 0, pairs[np.maximum(self.key2, 0)], True)
        long = self.key4 >= 0
        if len(data) >= 4:
            windows = (a[:-3] << 24) | (a[1:-2] << 16) | (a[2:-1] << 8) | a[3:]
            maybe[long] = np.isin(self.key4[long], windows)
        else:
            maybe[long] = False
        return cast(list[bool], maybe.tolist())


def _key(prefix: bytes) -> int:
    return int.from_bytes(prefix, "big")


class _Spans:
    """The partition so far: raw byte ranges and special token ids, in input order.

    A token splits only the raw ranges it occurs in. Those are found from its
    occurrences in the whole input (a bisect over the ranges' starts each), so a
    token touches the few ranges it is in, not all of them: an input holding
    thousands of special tokens (ai21-j2 has 26,089 CONTROL ones) would otherwise
    walk thousands of ranges once per token.
    """

    def __init__(self, size: int) -> None:
        self.items: list[Span] = [(0, size)]
        self.starts: list[int] = [0]  # where each item begins; a token id's item at its match

    def split_at(self, data: bytes, text: bytes, tid: int, attr: int) -> None:
        at = data.find(text)
        while at >= 0:
            i = bisect_right(self.starts, at) - 1
            item = self.items[i]
            if isinstance(item, int) or at + len(text) > item[1]:
                at = data.find(text, at + 1)  # inside a token already split out, or across a range's end
                continue
            pieces: list[Span] = []
            _split(data, item[0], item[1], text, tid, attr, pieces)
            self.items[i:i + 1] = pieces
            self.starts[i:i + 1] = _starts(pieces, item[0])
            at = data.find(text, item[1])

    def fragments(self, data: bytes) -> list[Fragment]:
        return [data[s[0]:s[1]] if isinstance(s, tuple) else s for s in self.items]


def _starts(pieces: list[Span], start: int) -> list[int]:
    """Where each of `pieces` begins: a range at its own start, a token id where the
    range before it ended (its LSTRIP whitespace included), so that bisect finds the
    item holding any byte."""
    out: list[int] = []
    at = start
    for piece in pieces:
        if isinstance(piece, int):
            out.append(at)
        else:
            out.append(piece[0])
            at = piece[1]
    return out


def _split(data: bytes, start: int, end: int, text: bytes, tid: int, attr: int, out: list[Span]) -> None:
    while True:
        at = data.find(text, start, end)
        if at < 0:
            out.append((start, end))
            return
        left = at
        if attr & _LSTRIP:
            while left > start and data[left - 1] in _SPACE:
                left -= 1
        if left > start:
            out.append((start, left))
        out.append(tid)
        start = at + len(text)
        if attr & _RSTRIP:
            while start < end and data[start] in _SPACE:
                start += 1
        if start >= end:
            return
