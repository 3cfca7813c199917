"""Unigram (UGM, `tokenizer.ggml.model = "t5"`): llama.cpp's SentencePiece-style Viterbi.

Each raw fragment is normalised on its own (`tokenizer.normalize.ugm` for
user-defined prefixes, the precompiled charsmap and bad UTF-8; then the space
rules of `UgmEngine.place_spaces`) and segmented by a Viterbi pass over its
*bytes*:

- from every code point start (the length comes from the lead byte alone), each
  token of the matcher (normal, user-defined and unused tokens, as typed when
  llama.cpp built its tokenizer) that the bytes spell is a candidate; a
  user-defined token scores 0.0, others their score, summed in doubles;
- when no token spells exactly the current code point, the unknown token
  covers it with score `min(normal scores) - 10`, computed in float32;
- ties keep the first candidate found; consecutive unknowns collapse into one.

There is no byte fallback: llama.cpp never emits `<0xXX>` tokens for UGM.

Speed without changing the answer: where no matcher token can span a space
symbol (checked at load), the Viterbi pass splits at each space symbol and
caches words, which is exact while all score sums are exact in doubles (checked
per call from the scores' binary exponents; otherwise the whole fragment goes
through one pass, as in llama.cpp). A call with many uncached words segments
them all at once in numpy (`engines.ugm_batch`, built once the tokenizer has met
`BUILD_AFTER` missing words); short calls keep the per-word pass.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from itertools import chain, compress, repeat
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np

from ..attrs import Attr
from ..cache import BoundedCache
from ..errors import UnsupportedVocab
from ..gguf.constants import Keys
from ..normalize.charsmap import lead_table, parse
from ..normalize.ugm import PrefixNormalizer
from ..pieces import ESCAPED_SPACE, spm_piece
from .base import BosEosEngine, collector_paused
from .ugm_batch import BUILD_AFTER, MIN_WORDS, BatchViterbi

if TYPE_CHECKING:
    from ..vocab import Vocab

_MATCHED = int(Attr.NORMAL | Attr.USER_DEFINED | Attr.UNUSED)
_USER_DEFINED = int(Attr.USER_DEFINED)
_NORMAL = int(Attr.NORMAL)
_UNK_PENALTY = np.float32(10.0)
_LOWEST = -sys.float_info.max  # llama.cpp starts every lattice cell at -DBL_MAX


class UgmEngine(BosEosEngine):
    """SentencePiece unigram as llama.cpp's `llm_tokenizer_ugm_session` runs it."""

    vocab_type = "ugm"

    def __init__(self, vocab: Vocab) -> None:
        super().__init__(vocab)
        blob = vocab.precompiled_charsmap
        cm = parse(blob, where=vocab.where(Keys.PRECOMPILED_CHARSMAP)) if blob else None
        base = np.asarray(vocab.base_attrs, dtype=np.int64)
        user_defined = [vocab.texts[i] for i in np.flatnonzero(base & _USER_DEFINED).tolist()]
        self.prefix_normalizer = PrefixNormalizer(cm, user_defined)
        self.space = ESCAPED_SPACE if vocab.escape_whitespaces else b" "
        self.lattice = Lattice(vocab, space=self.space)

    # -- the Engine interface ------------------------------------------------------

    def piece(self, token: int) -> bytes:
        return spm_piece(self.vocab, token)

    def linefeed(self) -> int:
        """llama.cpp tokenizes "\\n" while loading, before it reads the special ids.

        So an unknown newline gets t5's *default* unknown id (2), unchecked; when
        that is beyond the vocabulary, llama.cpp's load fails (`print_info`
        reads the token with `.at()`), and so do we.
        """
        normalized, _ = self.normalize(b"\n")
        if not normalized:
            return self.vocab.default_pad
        first = self.lattice.viterbi(normalized, unk=self.vocab.default_unk)[0]
        if first >= self.vocab.n_tokens:
            raise UnsupportedVocab(
                f"llama.cpp fails to load this vocabulary: \"\\n\" tokenizes to t5's default "
                f"unknown id {first}, beyond its {self.vocab.n_tokens} tokens")
        return first

    # -- one raw fragment ----------------------------------------------------------

    def encode_into(self, fragment: bytes, out: list[int]) -> None:
        """Append the ids of one raw fragment to `out` (the cyclic collector paused)."""
        with collector_paused():
            self.encode_text(fragment, out)

    def encode_text(self, fragment: bytes, out: list[int]) -> None:
        data, trusted = self.prefix_normalizer(fragment)
        vocab, lattice = self.vocab, self.lattice
        if (trusted and lattice.can_split and vocab.remove_extra_whitespaces
                and not vocab.treat_whitespace_as_suffix):
            # merged spaces: the normalized text is the space symbol before each word
            words = list(filter(None, data.split(b" ")))
            if len(data) + len(self.space) * len(words) < lattice.exact_below:
                out += lattice.by_words(words)
                return
        normalized = self.place_spaces(data)
        if normalized:
            lattice.segment(normalized, out, split=trusted)

    def normalize(self, text: bytes) -> tuple[bytes, bool]:
        """llama.cpp's `normalize()`: (normalized bytes, whether space symbols are code point starts)."""
        data, trusted = self.prefix_normalizer(text)
        return self.place_spaces(data), trusted

    def place_spaces(self, data: bytes) -> bytes:
        """Spaces become the space symbol; merged, prefixed or suffixed per the flags.

        Only the byte 0x20 counts as a space here (tabs and newlines are
        spaces only if the charsmap made them so).
        """
        vocab, space = self.vocab, self.space
        suffix = vocab.treat_whitespace_as_suffix
        if vocab.remove_extra_whitespaces:
            words = list(filter(None, data.split(b" ")))
            out = space + space.join(words) if words else b""
        else:
            if vocab.add_space_prefix and not suffix:
                lead = len(data) - len(data.lstrip(b" "))
                if lead < len(data):
                    data = data[:lead] + b" " + data[lead:]
            out = data.replace(b" ", space)
        if vocab.add_space_prefix and suffix:
            out += space
        return out


class Lattice:
    """The matcher tokens and the Viterbi pass over normalized bytes.

    From each code point start the candidates are the matcher tokens the bytes
    spell (`entries`: text -> (id, score)). Where the next `HEAD` bytes are the
    start of some token at least that long (a key of `heads`, which gives the
    lengths above `HEAD` to look up), the tokens those bytes start with are
    known without a lookup (`sures`, filled per key on first use). Elsewhere no
    token that long starts there, and `firsts` gives the shorter tokens that
    start with the code point there; every length below `HEAD` is looked up
    when some token is shorter than its lead byte claims (`firsts` is None).
    """

    def __init__(self, vocab: Vocab, *, space: bytes) -> None:
        self.unk = vocab.special["unk"]
        self.space = space
        # tuples, which the cyclic collector stops walking after one pass (lists it walks on every one)
        self.cache: BoundedCache[bytes, tuple[int, ...]] = BoundedCache()
        base = np.asarray(vocab.base_attrs, dtype=np.int64)
        scores = np.asarray(vocab.scores, dtype=np.float32)
        self.unk_score = float(_unk_score(scores[(base & _NORMAL) != 0]))
        matched = (base & _MATCHED) != 0
        # user-defined tokens score 0.0 by their final type, as llama.cpp asks at tokenize time
        user = (np.asarray(vocab.attrs, dtype=np.int64) & _USER_DEFINED) != 0
        used = np.where(user, 0.0, scores.astype(np.float64))
        # {text: (id, score)} for the texts whose id (by token_to_id) is a matcher token
        to_id = vocab.token_to_id
        ids = np.fromiter(to_id.values(), dtype=np.int64, count=len(to_id))
        keep = matched[ids]
        ids = ids[keep]
        # Python floats: faster sums than numpy's
        self.entries = dict(zip(compress(to_id, keep.tolist()), zip(ids.tolist(), used[ids].tolist())))
        keys = list(self.entries)
        sizes = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
        # for the batched Viterbi, built on first use (`batch`): ids, scores, sizes by `entries`
        self._matcher = (ids.astype(np.int32), used[ids], sizes.astype(np.int32))
        self._batch: BatchViterbi | None = None
        self._slow_words = 0  # words segmented one by one while there was no batch
        self.heads = _heads(keys, sizes)
        self.sures: dict[bytes, _Sure] = {}
        self.firsts = _firsts(self.entries, compress(keys, (sizes < HEAD).tolist()))
        texts = vocab.texts
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        self.can_split = _splittable(texts, space)
        self.exact_below = _exact_limit(self.unk_score, used[matched], lengths[matched])

    def segment(self, data: bytes, out: list[int], *, split: bool) -> None:
        """Append the best segmentation of `data`, unknowns collapsed, to `out`."""
        if split and self.can_split and len(data) < self.exact_below:
            words = data.split(self.space)
            head = self.viterbi(words[0]) if words[0] else []
            ids = self.by_words(words[1:])
            out += _collapse(head + ids, self.unk) if head and ids else head or ids
        else:
            out += self.viterbi(data)

    def by_words(self, words: list[bytes]) -> list[int]:
        """The lattice of the space symbol before each of `words`, cut at each space
        symbol, with each word's best path cached (keyed by the word alone)."""
        cache = self.cache
        # not set.difference(cache): with a dict subclass it walks the whole cache
        missing = {w for w in words if w not in cache} if cache else set(words)
        if missing:
            if cache.make_room(len(missing)):
                missing = set(words)
            space, viterbi = self.space, self.viterbi
            batch = self.batch_for(len(missing))
            if batch is not None:
                found, batched, rest = batch.run(list(missing))
                cache.update(zip(batched, map(tuple, found)))
                missing = set(rest)
            for word in missing:
                cache[word] = tuple(viterbi(space + word))
        ids = list(chain.from_iterable(map(cache.__getitem__, words)))
        return _collapse(ids, self.unk) if self.unk in ids else ids

    def batch_for(self, n: int) -> BatchViterbi | None:
        """The batch for `n` missing words, or None where the per-word pass is faster: fewer
        than MIN_WORDS, or no batch yet and fewer than BUILD_AFTER missing words so far
        (counting these: the build costs about that much, so it is paid once it would
        have paid for itself)."""
        if self._batch is None:
            self._slow_words += n
            if self._slow_words < BUILD_AFTER:
                return None
        return self.batch() if n >= MIN_WORDS else None

    def batch(self) -> BatchViterbi | None:
        """The batched Viterbi (`engines.ugm_batch`), or None where it would not be exact."""
        if self._batch is None:
            ids, values, sizes = self._matcher
            self._batch = BatchViterbi(list(self.entries), ids, values, sizes.astype(np.int64),
                                       unk=self.unk, unk_score=self.unk_score, space=self.space)
        return self._batch if self._batch.unique else None

    def viterbi(self, data: bytes, *, unk: int | None = None) -> list[int]:
        """Best path through the lattice of `data`, as llama.cpp builds and breaks ties."""
        if unk is None:
            unk = self.unk
        n = len(data)
        score = [_LOWEST] * (n + 1)
        token = [unk] * (n + 1)
        start = [0] * (n + 1)
        score[0] = 0.0
        entries, heads, sures, firsts = self.entries, self.heads, self.sures, self.firsts
        unk_score, lead = self.unk_score, _LEAD_LEN
        i = 0
        while i < n:
            step = lead[data[i]]
            if i + step > n:
                step = n - i
            here = score[i]
            single = False
            key = data[i:i + HEAD]
            maybe = heads.get(key)
            if maybe is None:
                sure, maybe = _ANY if firsts is None else firsts.get(data[i:i + step], _NONE)
            else:
                known = sures.get(key)
                if known is None:
                    known = sures[key] = _prefix_tokens(entries, key)
                sure = known
            for length, tid, value in sure:  # tokens the key spells: inside `data`
                if length == step:
                    single = True
                end = i + length
                total = here + value
                if total > score[end]:
                    score[end], token[end], start[end] = total, tid, i
            for length in maybe:
                end = i + length
                if end > n:
                    break
                entry = entries.get(data[i:end])
                if entry is None:
                    continue
                if length == step:
                    single = True
                total = here + entry[1]
                if total > score[end]:
                    score[end], token[end], start[end] = total, entry[0], i
            if not single:
                end = i + step
                total = here + unk_score
                if total > score[end]:
                    score[end], token[end], start[end] = total, unk, i
            i += step
        return _backtrack(token, start, n, unk)


HEAD = 6  # bytes: the key of `Lattice.heads` (the space symbol and three ASCII letters)
_Sure = tuple[tuple[int, int, float], ...]  # (length, id, score) of tokens known to match
_Candidates = tuple[_Sure, tuple[int, ...]]  # and the lengths still to look up, ascending
_NONE: _Candidates = ((), ())
_ANY: _Candidates = ((), tuple(range(1, HEAD)))  # every length below HEAD, looked up
_LEAD_LEN = lead_table()


def _firsts(entries: dict[bytes, tuple[int, float]], short: Iterable[bytes]) -> dict[bytes, _Candidates] | None:
    """{first code point of a token: candidates for the `short` tokens (those shorter
    than HEAD) that start with it}; None when some token is shorter than its lead byte
    claims (then every length below HEAD is looked up)."""
    found: dict[bytes, set[int]] = {}
    lead = _LEAD_LEN
    for text in short:
        size = len(text)
        step = lead[text[0]]
        if size < step:
            return None
        found.setdefault(text[:step], set()).add(size)
    out: dict[bytes, _Candidates] = {}
    for first, lens in found.items():
        entry = entries.get(first)
        sure: _Sure = ((len(first), *entry),) if entry is not None else ()
        out[first] = (sure, tuple(sorted(lens - {len(first)})))
    return out


def _heads(texts: list[bytes], sizes: np.ndarray) -> dict[bytes, tuple[int, ...]]:
    """{first HEAD bytes of a token at least that long: the lengths above HEAD of the
    tokens that start with them, ascending}, grouped in numpy (there are many)."""
    rows = np.flatnonzero(sizes >= HEAD)
    if not len(rows):
        return {}
    long = [texts[r] for r in rows.tolist()]
    prefix = np.frombuffer(b"".join(map(itemgetter(slice(0, HEAD)), long)), dtype=np.uint8)
    # a HEAD-byte prefix as one integer, ordered as the bytes are
    key = (prefix.reshape(-1, HEAD).astype(np.int64) << _SHIFTS).sum(axis=1)
    size = sizes[rows]
    order = np.lexsort((size, key))
    key, size = key[order], size[order]
    new_pair = np.ones(len(key), dtype=bool)
    new_pair[1:] = (key[1:] != key[:-1]) | (size[1:] != size[:-1])
    key, size = key[new_pair], size[new_pair]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    bounds = starts.tolist() + [len(key)]
    lengths = size.tolist()
    out = {}
    for head, lo, hi in zip(key[starts].tolist(), bounds, bounds[1:]):
        if lengths[lo] == HEAD:
            lo += 1
        out[head.to_bytes(HEAD, "big")] = tuple(lengths[lo:hi])
    return out


_SHIFTS = np.arange(HEAD - 1, -1, -1, dtype=np.int64) * 8


def _prefix_tokens(entries: dict[bytes, tuple[int, float]], head: bytes) -> _Sure:
    """(length, id, score) of the tokens that `head` starts with, shortest first."""
    found = []
    for k in range(1, HEAD + 1):
        entry = entries.get(head[:k])
        if entry is not None:
            found.append((k, *entry))
    return tuple(found)


def _collapse(ids: list[int], unk: int) -> list[int]:
    """Runs of the unknown id collapsed to one (runs only occur across words here)."""
    arr = np.asarray(ids, dtype=np.int64)
    again = np.flatnonzero((arr[1:] == unk) & (arr[:-1] == unk)) + 1
    return np.delete(arr, again).tolist() if len(again) else ids


def _backtrack(token: list[int], start: list[int], n: int, unk: int) -> list[int]:
    ids = []
    pos = n
    prev_unknown = False
    while True:
        tid = token[pos]
        unknown = tid == unk
        if not (prev_unknown and unknown):
            ids.append(tid)
        pos = start[pos]
        if pos == 0:
            break
        prev_unknown = unknown
    ids.reverse()
    return ids


def _splittable(texts: Sequence[bytes], space: bytes) -> bool:
    """Whether no token can cover part of a space symbol after its own start.

    Then every space symbol at a code point start is a point that every path
    through the lattice passes. (Checked over all tokens: a superset of the
    matcher, so at worst the shortcut is off.)
    """
    joined = b"\0".join(texts) + b"\0"
    if joined.count(space) != sum(map(bytes.startswith, texts, repeat(space))):
        return False
    return not any(space[:k] + b"\0" in joined for k in range(1, len(space)))


def _unk_score(normal_scores: np.ndarray) -> np.float32:
    """min(normal scores) - 10 in float32; FLT_MAX - 10 when there is no normal token."""
    low = normal_scores.min() if len(normal_scores) else np.finfo(np.float32).max
    with np.errstate(over="ignore", invalid="ignore"):
        return np.float32(np.float32(low) - _UNK_PENALTY)


def _exact_limit(unk_score: float, scores: np.ndarray, lengths: np.ndarray) -> float:
    """Inputs shorter than this many bytes have every lattice sum exact in doubles.

    Every score is a multiple of 2**e (e the lowest set bit over all scores),
    and a path over b bytes sums to at most b * (largest |score| per byte). A
    sum below 2**(53 + e) in magnitude is then exact, so splitting the lattice
    at a space symbol (which shifts later sums by a constant) changes no
    comparison. Non-finite scores disable the shortcut.
    """
    values = np.append(scores, unk_score)
    if not np.isfinite(values).all():
        return 0.0
    per_byte = max(abs(unk_score), float((np.abs(scores) / lengths).max(initial=0.0)))
    if per_byte == 0:
        return math.inf
    nonzero = values[values != 0]
    if not len(nonzero):
        return math.inf
    mantissa, exponent = np.frexp(np.abs(nonzero))
    m = (mantissa * float(1 << 53)).astype(np.int64)
    low = exponent.astype(np.int64) - 53 + np.log2((m & -m).astype(np.float64)).astype(np.int64)
    return 2.0 ** (53 + int(low.min())) / per_byte
