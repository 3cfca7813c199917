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

from collections.abc import Callable
from typing import TYPE_CHECKING

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
            self._plans[parse_special] = (tokens, leads if len(leads) <= self.GATE_MAX else None)

    def partition(self, data: bytes, *, parse_special: bool) -> list[Fragment]:
        if not data:
            return []
        tokens, leads = self._plans[parse_special]
        if leads is not None and not any(lead in data for lead in leads):
            return [data]
        spans: list[Span] = [(0, len(data))]
        may_occur = _pair_filter(data, len(tokens))
        for tid, text, attr in tokens:
            if not may_occur(text) or text not in data:
                continue
            spans = _split_all(data, spans, text, tid, attr)
        return [data[s[0]:s[1]] if isinstance(s, tuple) else s for s in spans]


_FILTER_MIN_WORK = 1 << 20  # bytes x special tokens below which plain `in` is cheaper


def _pair_filter(data: bytes, n_tokens: int) -> Callable[[bytes], bool]:
    """A cheap "may `text` occur in `data`?" test, exact in its "no".

    On long inputs with many special tokens (command-r has about 1,000) scanning
    the input once per token dominates; a bitmap of the byte pairs present rules
    most tokens out with one lookup of their first two bytes.
    """
    if len(data) * n_tokens < _FILTER_MIN_WORK:
        return lambda text: True
    a = np.frombuffer(data, dtype=np.uint8).astype(np.uint16)
    present = np.zeros(1 << 16, dtype=bool)
    present[(a[:-1] << 8) | a[1:]] = True
    return lambda text: len(text) < 2 or bool(present[(text[0] << 8) | text[1]])


def _split_all(data: bytes, spans: list[Span], text: bytes, tid: int, attr: int) -> list[Span]:
    out: list[Span] = []
    for span in spans:
        if isinstance(span, int):
            out.append(span)
        else:
            _split(data, span[0], span[1], text, tid, attr, out)
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
