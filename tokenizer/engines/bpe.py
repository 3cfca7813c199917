"""llama.cpp's BPE engine (`llm_tokenizer_bpe_session`), for every pre-tokenizer.

Per raw-text fragment: (for SPM-style BPE such as gemma4) spaces become ▁;
the text is decoded the lenient llama.cpp way, split by the pre-tokenizer's
regexes (`tokenizer.pretokenize.splitter`), each piece GPT-2 byte-encoded unless the
behaviour works on raw UTF-8, then merged by rank.  A final symbol that is
not a token falls back to one token per byte (the byte's own one-byte token
for byte-level vocabularies, `<0xXX>` otherwise), and bytes without a token
vanish silently, as in llama.cpp.

Two model names get a session of their own, as in llama.cpp:
`whitespace` (drop whitespace, optionally lower-case, BPE each run) and
`hybriddna` (6-mer DNA tokens between `<dna>` and `</dna>`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from itertools import accumulate, chain, pairwise
from operator import itemgetter, methodcaller
from typing import TYPE_CHECKING

import numpy as np
import regex

from .. import unicode
from ..attrs import Attr
from ..cache import BoundedCache
from ..errors import LlamaCppAbort, UnsupportedVocab
from ..pieces import ESCAPED_SPACE, hex_byte_piece
from ..pretokenize import behaviours as pretokenizers
from ..pretokenize.splitter import Splitter
from ..vocab_rules import DNA_MARKER
from . import bpe_ids
from .base import BosEosEngine
from .pair_table import PairTable, first_ranks

if TYPE_CHECKING:
    from ..vocab import Vocab

_SHOWN_AS_TEXT = int(Attr.UNKNOWN | Attr.CONTROL | Attr.USER_DEFINED)
_NORMAL = int(Attr.NORMAL)
_BYTE = int(Attr.BYTE)


# symbols: below this, merging word by word beats numpy's overhead per round (the crossover
# measured on harness/data/corpora/diverse.txt's words: gemma-4 about 1,900, llama-bpe 3,000, qwen2 5,000)
BATCH_MIN = 2048


class Merger:
    """Rank-ordered merging: the lowest rank first, the leftmost of equals first.

    That is the order llama.cpp's priority queue (rank, then left index)
    produces; stale queue entries it skips never change the outcome.

    Symbols are integers: a token's text is its id, any other text a merge
    names gets an id from `n_tokens` up, and a symbol no merge names is
    negative (the caller numbers those).  A pair (left, right) is looked up
    by `left << shift | right`; its value is the merge's rank, and
    `result[rank]` the merged symbol.
    """

    def __init__(self, merges: Sequence[tuple[bytes, bytes]],
                 token_to_id: Mapping[bytes, int] | None = None, n_tokens: int = 0) -> None:
        self.ids = token_to_id or {}
        self.n_tokens = n_tokens
        self.extra: dict[bytes, int] = {}  # texts a merge names that are no token
        self.extra_texts: list[bytes] = []
        joined = getattr(merges, "joined", None)  # tokenizer.vocab.Merges: its bytes, read with numpy
        if joined is not None:
            left, right, result = bpe_ids.merge_part_ids(joined, len(merges), self.ids, PairTable, self.symbol)
        else:
            lefts, rights = list(map(itemgetter(0), merges)), list(map(itemgetter(1), merges))
            left = np.array(self._symbols(lefts), dtype=np.int64)
            right = np.array(self._symbols(rights), dtype=np.int64)
            result = np.array(self._symbols(list(map(bytes.__add__, lefts, rights))), dtype=np.int64)
        self.none = len(merges)  # the rank of a pair that is no merge: above every real one
        self.shift = (n_tokens + len(self.extra)).bit_length()
        # std::map::emplace keeps the first rank of a repeated pair: PairTable does too
        self.pair_keys = left << self.shift | right  # in rank order
        self.table = PairTable(self.pair_keys, self.none)
        self.result_array = result

    @cached_property
    def result(self) -> tuple[int, ...]:
        """The merged symbol of each rank, for `merge_ids` (built on first use).

        A tuple, not a list: the cyclic collector stops walking a tuple of ints after
        its first pass over it, but walks a list's 280,147 items on every pass.
        """
        return tuple(self.result_array.tolist())

    @cached_property
    def ranks(self) -> dict[int, int]:
        """The pair table as a dict, for `merge_ids` (built on first use: a long text never needs it)."""
        return first_ranks(self.pair_keys)

    def byte_pair_ranks(self, byte_syms: np.ndarray) -> tuple[int, ...]:
        """The rank of the pair of byte symbols (a, b) at `a << 8 | b`, for the first round of
        `merge_ids` on byte-level pieces (one numpy lookup instead of a dict lookup per pair)."""
        return tuple(self.pair_ranks(np.repeat(byte_syms, 256), np.tile(byte_syms, 256)).tolist())

    def _symbols(self, texts: list[bytes]) -> list[int]:
        found: list[int | None] = list(map(self.ids.get, texts))
        if None in found:
            for i, sym in enumerate(found):
                if sym is None:
                    found[i] = self.symbol(texts[i])
        return found  # type: ignore[return-value]  # no None is left

    def symbol(self, text: bytes) -> int:
        """The id of `text`, numbering a new non-token text (only while building)."""
        sym = self.ids.get(text)
        if sym is None:
            sym = self.extra.get(text)
            if sym is None:
                sym = self.extra[text] = self.n_tokens + len(self.extra_texts)
                self.extra_texts.append(text)
        return sym

    def lookup(self, texts: Sequence[bytes]) -> list[int]:
        """The ids of initial symbols; a text no merge names is `~i` (i its position)."""
        ids, extra = self.ids.get, self.extra.get
        found: list[int | None] = list(map(ids, texts))
        if None in found:
            for i, sym in enumerate(found):
                if sym is None:
                    sym = extra(texts[i])
                    found[i] = ~i if sym is None else sym
        return found  # type: ignore[return-value]  # no None is left

    def text(self, sym: int, unknown: Sequence[bytes]) -> bytes:
        """The text of a non-token symbol: an extra one, or `unknown[~sym]`."""
        return unknown[~sym] if sym < 0 else self.extra_texts[sym - self.n_tokens]

    def merge_ids(self, syms: list[int], ranks: list[int] | None = None) -> list[int]:
        """Merge `syms` in place by rank and return it (`ranks`: the rank of each pair, if known)."""
        if len(syms) < 2:
            return syms
        get, shift, none, result = self.ranks.get, self.shift, self.none, self.result
        # one rank per symbol: the pair it starts, and `none` after the last
        if ranks is None:
            ranks = [get(a << shift | b, none) for a, b in pairwise(syms)]
        ranks.append(none)
        while True:
            best = min(ranks)
            if best == none:
                return syms
            at = ranks.index(best)
            new = syms[at] = result[best]
            del syms[at + 1]
            del ranks[at]
            if at:
                ranks[at - 1] = get(syms[at - 1] << shift | new, none)
            if at + 1 < len(syms):
                ranks[at] = get(new << shift | syms[at + 1], none)

    def pair_ranks(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """The rank of each pair (left[i], right[i]), `none` where no merge joins them."""
        return self.table.get(left << self.shift | right)

    def merge_batch(self, syms: np.ndarray,
                    lengths: np.ndarray) -> tuple[list[tuple[int, ...]], list[int]]:
        """`merge_ids` on many runs at once (`syms` concatenated, each run's length).

        Each round merges the best pair of every run that still has one, the
        pair `merge_ids` would merge next, so every run ends the same.  Also
        says which runs end with a symbol that is no token.
        """
        n_runs, none = len(lengths), self.none
        if not n_runs:
            return [], []
        wid = np.arange(n_runs)
        ends = np.cumsum(lengths)
        rank = np.full(len(syms), none, dtype=np.int64)
        if len(syms) > 1:
            rank[:-1] = self.pair_ranks(syms[:-1], syms[1:])
        rank[ends - 1] = none  # the last symbol of a run starts no pair
        bits = len(syms).bit_length()
        index = np.arange(len(syms), dtype=np.int64)
        done: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        while True:
            starts = ends - lengths
            # rank, then position: the lowest rank, the leftmost of equals
            best = np.minimum.reduceat(rank << bits | index[:len(rank)], starts)
            over = best >> bits == none
            if 2 * int(lengths[over].sum()) >= len(syms):  # set the finished runs aside
                gone = np.repeat(over, lengths)
                done.append((syms[gone], wid[over], lengths[over]))
                keep, stay = ~gone, ~over
                syms, rank = syms[keep], rank[keep]
                lengths, wid, best, starts = lengths[stay], wid[stay], best[stay], starts[stay]
                if not len(lengths):
                    break
                ends = np.cumsum(lengths)
                best -= starts - (ends - lengths)  # the runs before moved down
                starts = ends - lengths
                over = over[stay]
            live = ~over
            best, first, last = best[live], starts[live], ends[live]
            at = best & ((1 << bits) - 1)
            new = syms[at] = self.result_array[best >> bits]
            inner = at > first
            rank[at[inner] - 1] = self.pair_ranks(syms[at[inner] - 1], new[inner])
            more = at + 2 < last
            rank[at] = none
            rank[at[more]] = self.pair_ranks(new[more], syms[at[more] + 2])
            keep = np.ones(len(syms), dtype=bool)
            keep[at + 1] = False
            syms, rank = syms[keep], rank[keep]
            lengths = lengths - live
            ends = np.cumsum(lengths)
        return self._runs(done, n_runs)

    def _runs(self, done: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
              n_runs: int) -> tuple[list[tuple[int, ...]], list[int]]:
        """Each run's symbols, and which runs hold a symbol that is no token."""
        out: list[tuple[int, ...]] = [()] * n_runs
        dirty: list[int] = []
        for syms, wids, lengths in done:
            if not len(syms):
                continue
            sizes = lengths.tolist()
            ends = list(accumulate(sizes))
            bad = (syms < 0) | (syms >= self.n_tokens)
            if bad.any():
                dirty.extend(wids[np.add.reduceat(bad, [0, *ends[:-1]]) > 0].tolist())
            flat = syms.tolist()
            for w, a, b in zip(wids.tolist(), [0, *ends[:-1]], ends):
                out[w] = tuple(flat[a:b])
        return out, dirty

    def merge(self, symbols: list[bytes]) -> list[bytes]:
        """`merge_ids` over texts (for tests and tools)."""
        texts = {v: k for k, v in self.ids.items()}
        merged = self.merge_ids(self.lookup(symbols))
        return [texts[s] if 0 <= s < self.n_tokens else self.text(s, symbols) for s in merged]


class WordCutter:
    """Cut points in a raw-UTF-8 word that no merge can ever cross.

    SPM-style BPE (gemma4, sarvam-moe) merges whole lines, which rarely
    repeat, so caching per word would not help.  But a merge joins a symbol
    ending at position i with one starting there; before a ▁ that follows a
    non-▁ character, only merges (a, b) with b starting with ▁ and a not
    ending with it can do so.  We cut there unless the text around the point
    literally spells such a pair, then merge and cache each part on its own:
    merges in different parts never interact, so the result is the same.
    With too many crossing merges the cutter stays off.
    """

    MAX_CROSSING = 64

    def __init__(self, merges: Sequence[tuple[bytes, bytes]], marker: bytes = ESCAPED_SPACE) -> None:
        joined = getattr(merges, "joined", None)  # tokenizer.vocab.Merges: read with numpy
        if joined is not None:
            crossing = bpe_ids.crossing(joined, len(merges), marker)
        else:
            crossing = [(a, b) for a, b in merges if b.startswith(marker) and not a.endswith(marker)]
        self.pattern = None
        if len(crossing) <= self.MAX_CROSSING:
            m = regex.escape(marker)
            guards = b"".join(b"(?!(?<=%s)%s)" % (regex.escape(a), regex.escape(b)) for a, b in crossing)
            self.pattern = regex.compile(b"(?<!%s)(?<=.)(?=%s)%s" % (m, m, guards), regex.DOTALL)

    def cut(self, word: bytes) -> list[bytes]:
        if self.pattern is None:
            return [word]
        points = [m.start() for m in self.pattern.finditer(word)]
        if not points:
            return [word]
        return [word[a:b] for a, b in zip([0, *points], [*points, len(word)])]


class BPEEngine(BosEosEngine):
    """Byte-pair encoding as llama.cpp does it; see the module docstring."""

    vocab_type = "bpe"

    def __init__(self, vocab: Vocab) -> None:
        super().__init__(vocab)
        self.pre = pretokenizers.get(vocab.pre_type)
        self.splitter = Splitter.for_pretokenizer(self.pre)
        self.ids = vocab.token_to_id
        self.n_tokens = len(vocab.texts)
        self.merger = Merger(vocab.merges, self.ids, self.n_tokens)
        self.byte_ids = self._byte_fallback_ids()
        # byte-level symbols: byte -> its stand-in character's text, and that text's symbol
        self.byte_texts = tuple(unicode.encode(c) for c in unicode.byte_to_char())
        self.byte_syms = tuple(self.merger.lookup(list(self.byte_texts)))
        self.byte_sym_array = np.array(self.byte_syms, dtype=np.int64)
        self._whole_first = vocab.ignore_merges or vocab.pre_type == "gemma4"  # see _keep_whole
        self._cache: BoundedCache[str, tuple[int, ...]] = BoundedCache()
        self._part_cache: BoundedCache[bytes, tuple[int, ...]] = BoundedCache()
        raw_spm = not self.pre.byte_encode and vocab.escape_whitespaces
        self.cutter = WordCutter(vocab.merges) if raw_spm else None
        self._session = _SESSIONS.get(vocab.model, _plain_session)
        if not vocab.escape_whitespaces:
            _refuse_undecodable_pieces(vocab)

    def _byte_fallback_ids(self) -> tuple[int | None, ...]:
        if self.pre.byte_encode:
            return tuple(self.ids.get(bytes((b,))) for b in range(256))
        return tuple(self.ids.get(b"<0x%02X>" % b) for b in range(256))

    # -- tokenize -------------------------------------------------------------------
    def encode_into(self, fragment: bytes, out: list[int]) -> None:
        if self.vocab.escape_whitespaces:
            fragment = fragment.replace(b" ", ESCAPED_SPACE)
        self._session(self, fragment, out)

    def tokenize_batch(self, inputs: Sequence[Sequence[bytes | int]], *, add_special: bool) -> list[list[int]]:
        """`tokenize` of each input, the words new to the cache merged once for all of them."""
        if self._session is not _plain_session:
            return super().tokenize_batch(inputs, add_special=add_special)
        words: dict[bytes, list[str]] = {}
        for fragments in inputs:  # the raw texts `encode_into` would be given
            self.assemble(fragments, add_special=False, encode_into=lambda text, _: words.setdefault(text, []))
        escape = self.vocab.escape_whitespaces
        for text in words:
            words[text] = self.splitter.split(
                unicode.decode_lenient(text.replace(b" ", ESCAPED_SPACE) if escape else text))
        known = self._known(chain.from_iterable(words.values()))

        def emit(text: bytes, out: list[int]) -> None:
            out.extend(chain.from_iterable(map(known.__getitem__, words[text])))

        return [self.assemble(fragments, add_special=add_special, encode_into=emit) for fragments in inputs]

    def _known(self, words: Iterable[str]) -> dict[str, tuple[int, ...]]:
        """The ids of each distinct word: from the cache, the missing ones merged at once (and cached)."""
        cache = self._cache
        distinct = dict.fromkeys(words)
        found = dict(zip(distinct, map(cache.get, distinct)))
        missing = [w for w, ids in found.items() if ids is None]
        fresh = dict(zip(missing, self._encode_words(missing))) if missing else {}
        if len(fresh) <= cache.limit:
            cache.make_room(len(fresh))
            cache.update(fresh)
        found.update(fresh)
        return found  # type: ignore[return-value]  # no None is left

    def encode_text(self, text: bytes, out: list[int]) -> None:
        """`llm_tokenizer_bpe_session::tokenize` for one raw text."""
        self.encode_cps(unicode.decode_lenient(text), out)

    def encode_cps(self, cps: str, out: list[int]) -> None:
        """Split, then BPE each word (cached per word; the new words of a text all at once)."""
        cache = self._cache
        words = self.splitter.split(cps)
        start = len(out)
        try:  # every word cached (most calls once the cache is warm): no list of lookups to scan
            out.extend(chain.from_iterable(map(cache.__getitem__, words)))
            return
        except KeyError:
            del out[start:]
        found = list(map(cache.get, words))
        if None in found:
            missing = list(dict.fromkeys([w for w, ids in zip(words, found) if ids is None]))
            fresh = dict(zip(missing, self._encode_words(missing)))
            if len(fresh) <= cache.limit:
                cache.make_room(len(fresh))
                cache.update(fresh)
            found = [fresh[w] if ids is None else ids for w, ids in zip(words, found)]
        out.extend(chain.from_iterable(found))  # type: ignore[arg-type]  # no None is left

    def _encode_words(self, words: list[str]) -> list[tuple[int, ...]]:
        """The ids of each word: whole when llama.cpp keeps it whole, else its pieces merged."""
        if self.pre.byte_encode:  # every word is one piece
            return self._byte_level_words(words)
        plans = list(map(self._plan, words))
        if self.cutter is None:  # one piece per word, and no word repeats here
            todo = [plan[0] for plan in plans if isinstance(plan, list)]
            each = iter(self._merge_pieces(todo))
            return [plan if isinstance(plan, tuple) else next(each) for plan in plans]
        known = self._part_cache
        todo = list(dict.fromkeys(p for plan in plans if isinstance(plan, list) for p in plan
                                  if p not in known))
        merged = dict(zip(todo, self._merge_pieces(todo)))

        def part(piece: bytes) -> tuple[int, ...]:
            ids = merged.get(piece)
            return known[piece] if ids is None else ids  # () when every byte vanished

        out = [plan if isinstance(plan, tuple) else tuple(chain.from_iterable(map(part, plan)))
               for plan in plans]
        if self.cutter is not None and len(merged) <= known.limit:  # words rarely repeat; parts do
            known.make_room(len(merged))
            known.update(merged)
        return out

    def _byte_level_words(self, words: list[str]) -> list[tuple[int, ...]]:
        """`_encode_words` on byte-level words: `_plan` for all of them at once, in C calls."""
        raws = list(map(_UTF8, words))
        if not self._whole_first:
            return self._merge_pieces(raws)
        keys = list(map(_UTF8, map(methodcaller("translate", unicode.byte_translation()), map(_LATIN1, raws))))
        wholes: list[int | None] = list(map(self.ids.get, keys))
        if not self.vocab.ignore_merges:  # gemma4's rule: see _keep_whole
            wholes = [None if w is None or not self._keep_whole(k) else w for w, k in zip(wholes, keys)]
        each = iter(self._merge_pieces([raw for raw, whole in zip(raws, wholes) if whole is None]))
        return [next(each) if whole is None else (whole,) for whole in wholes]

    def _plan(self, word: str) -> tuple[int, ...] | list[bytes]:
        """A word's single token, or the raw pieces BPE merges on their own."""
        raw = unicode.encode(word)
        if self._whole_first:
            key = unicode.byte_encode(raw).encode() if self.pre.byte_encode else raw
            whole = self.ids.get(key)
            if whole is not None and self._keep_whole(key):
                return (whole,)
        if self.pre.byte_encode:  # a symbol per byte: its stand-in character, never a space
            return [raw]
        if len(raw) > 1 and b" " in raw:  # a space is a character of its own: two or more
            raise LlamaCppAbort(
                f"piece {raw!r} holds a space: llama.cpp's find_bpe_rank asserts that no BPE "
                f"symbol contains one and aborts (pre-tokenizer {self.vocab.pre!r} on raw UTF-8)"
            )
        return [raw] if self.cutter is None else self.cutter.cut(raw)

    def _merge_pieces(self, pieces: list[bytes]) -> list[tuple[int, ...]]:
        """BPE on each piece: one batch when there are many symbols, else piece by piece."""
        merger = self.merger
        if self.pre.byte_encode:
            unknown: list[Sequence[bytes]] = [self.byte_texts] * len(pieces)
            lengths = list(map(len, pieces))
            joined = b"".join(pieces)
            if len(joined) >= BATCH_MIN:
                flat = self.byte_sym_array[np.frombuffer(joined, dtype=np.uint8)]
                return self._emit_all(merger.merge_batch(flat, np.array(lengths, dtype=np.int64)), unknown)
            byte_sym, first = self.byte_syms.__getitem__, self._byte_pair_ranks
            runs = [merger.merge_ids(list(map(byte_sym, p)), [first[a << 8 | b] for a, b in pairwise(p)])
                    for p in pieces]
        else:
            texts = _decoded(pieces)
            if texts is not None and sum(map(len, texts)) >= BATCH_MIN:
                flat = self._char_symbols("".join(texts))
                batch = merger.merge_batch(flat, np.array(list(map(len, texts)), dtype=np.int64))
                return self._emit_all(batch, [CHAR_TEXTS] * len(pieces))
            unknown = list(map(unicode.utf8_chars, pieces))
            initial = list(map(merger.lookup, unknown))
            lengths = list(map(len, initial))
            if sum(lengths) >= BATCH_MIN:
                flat = np.fromiter(chain.from_iterable(initial), dtype=np.int64, count=sum(lengths))
                return self._emit_all(merger.merge_batch(flat, np.array(lengths, dtype=np.int64)), unknown)
            runs = list(map(merger.merge_ids, initial))
        return [tuple(self._emit(run, texts)) for run, texts in zip(runs, unknown)]

    @cached_property
    def _byte_pair_ranks(self) -> tuple[int, ...]:
        """`Merger.byte_pair_ranks` of this vocabulary's byte symbols (built on first use)."""
        return self.merger.byte_pair_ranks(self.byte_sym_array)

    def _emit_all(self, batch: tuple[list[tuple[int, ...]], list[int]],
                  unknown: Sequence[Sequence[bytes]]) -> list[tuple[int, ...]]:
        runs, dirty = batch
        for i in dirty:
            runs[i] = tuple(self._emit(list(runs[i]), unknown[i]))
        return runs

    def _char_symbols(self, text: str) -> np.ndarray:
        """The initial symbol of each character; one no merge names is `~code point`."""
        chars, where = np.unique(unicode.codepoints(text), return_inverse=True)
        ids, extra = self.ids.get, self.merger.extra.get
        found = []
        for cpt in chars.tolist():
            raw = chr(cpt).encode()
            sym = ids(raw)
            found.append((~cpt if extra(raw) is None else extra(raw)) if sym is None else sym)
        return np.array(found, dtype=np.int64)[where]

    def _emit(self, syms: list[int], unknown: Sequence[bytes]) -> list[int]:
        """Merged symbols as ids: a symbol that is no token falls back to its bytes' tokens."""
        if not syms or (min(syms) >= 0 and max(syms) < self.n_tokens):
            return syms
        out: list[int] = []
        for sym in syms:
            if 0 <= sym < self.n_tokens:
                out.append(sym)
            else:
                text = self.merger.text(sym, unknown)
                out.extend(t for t in map(self.byte_ids.__getitem__, text) if t is not None)
        return out

    def _keep_whole(self, key: bytes) -> bool:
        """ignore_merges, or gemma4's rule for a run of newlines that is a token."""
        if self.vocab.ignore_merges:
            return True
        return self.vocab.pre_type == "gemma4" and not key.strip(b"\n")

    # -- pieces ---------------------------------------------------------------------
    def piece(self, token: int) -> bytes:
        attr, text = self.vocab.attrs[token], self.vocab.texts[token]
        if attr & _SHOWN_AS_TEXT:
            return text
        if attr & _NORMAL:
            if self.vocab.escape_whitespaces:
                return text.replace(ESCAPED_SPACE, b" ")
            return decode_byte_level(text)
        if attr & _BYTE:
            return hex_byte_piece(text)
        return b""


def decode_byte_level(text: bytes) -> bytes:
    """`llama_decode_text`: undo the GPT-2 byte mapping.

    A character outside the mapping is spelled `[UNK_BYTE_0x<its utf-8 hex>`
    followed by the *whole* token text and `]`, as llama.cpp does.
    """
    table = unicode.char_to_byte()
    out = bytearray()
    for ch in unicode.decode_lenient(text):
        b = table.get(ch)
        if b is not None:
            out.append(b)
        else:
            out += b"[UNK_BYTE_0x" + unicode.encode(ch).hex().encode() + text + b"]"
    return bytes(out)


_UTF8 = methodcaller("encode", "utf-8", "surrogatepass")  # unicode.encode, without a Python call
_LATIN1 = methodcaller("decode", "latin-1")  # unicode.byte_encode's first step


class _CodePointTexts(Sequence[bytes]):
    """`texts[cpt]`: the UTF-8 of code point `cpt` (the unknown symbols of `_char_symbols`)."""

    def __len__(self) -> int:
        return unicode.MAX_CODEPOINTS

    def __getitem__(self, cpt: int) -> bytes:  # type: ignore[override]  # ints only
        return chr(cpt).encode()


CHAR_TEXTS = _CodePointTexts()


def _decoded(pieces: list[bytes]) -> list[str] | None:
    """The pieces as text, or None when one is not valid UTF-8 (cut by lead byte instead)."""
    try:
        return list(map(bytes.decode, pieces))
    except UnicodeDecodeError:
        return None


# UTF-8-shaped sequences that llama.cpp's lenient decoder reads as code points
# above U+10FFFF, which it cannot re-encode (std::invalid_argument).
_ABOVE_10FFFF = regex.compile(rb"[\xf5-\xf7][\x80-\xbf]{3}|\xf4[\x90-\xbf][\x80-\xbf]{2}")
_BELOW_F4 = bytes(range(0xF4)) + bytes(range(0xF8, 0x100))  # deleted, only 0xf4 to 0xf7 remain


def _refuse_undecodable_pieces(vocab: Vocab) -> None:
    """llama.cpp builds every piece while loading; a NORMAL byte-level token whose
    text decodes above U+10FFFF throws there, and the load fails ("invalid codepoint")."""
    joined = b"\x00".join(vocab.texts)
    if not joined.translate(None, _BELOW_F4) or not _ABOVE_10FFFF.search(joined):
        return  # (no lead byte 0xf4 to 0xf7 at all: nothing for the regex to look at)
    starts = list(accumulate((len(t) + 1 for t in vocab.texts), initial=0))
    for m in _ABOVE_10FFFF.finditer(joined):
        token = bisect_right(starts, m.start()) - 1
        if vocab.attrs[token] & _NORMAL and not vocab.attrs[token] & _SHOWN_AS_TEXT:
            raise UnsupportedVocab(
                f"token {token} ({vocab.texts[token]!r}) holds bytes {m.group().hex(' ')} that "
                "decode above U+10FFFF: llama.cpp fails to load it (\"invalid codepoint\")"
            )


# -- sessions by model name -------------------------------------------------------------

def _plain_session(engine: BPEEngine, text: bytes, out: list[int]) -> None:
    engine.encode_text(text, out)


def _whitespace_session(engine: BPEEngine, text: bytes, out: list[int]) -> None:
    """llama.cpp's whitespace session: whitespace separates runs and is dropped."""
    flags = unicode.flags_array()
    lower = engine.vocab.normalizer_lowercase
    segment: list[str] = []
    for ch in unicode.decode_lenient(text):
        if flags[ord(ch)] & unicode.WHITESPACE:
            if segment:
                engine.encode_cps("".join(segment), out)
                segment.clear()
        else:
            segment.append(chr(unicode.tolower(ord(ch))) if lower else ch)
    if segment:
        engine.encode_cps("".join(segment), out)


_DNA_OPEN, _DNA_CLOSE, _DNA_OOV, _KMER = b"<dna>", b"</dna>", b"<oov>", 6


def _hybriddna_session(engine: BPEEngine, text: bytes, out: list[int]) -> None:
    """DNA between `<dna>` and `</dna>` as 6-mers (padded with A), the rest as BPE."""
    ids = engine.ids
    open_id, close_id, oov = ids.get(_DNA_OPEN), ids.get(_DNA_CLOSE), ids.get(_DNA_OOV)
    if open_id is None or close_id is None or oov is None:
        engine.encode_text(text, out)
        return
    pos = 0
    while pos < len(text):
        start = text.find(_DNA_OPEN, pos)
        if start < 0:
            engine.encode_text(text[pos:], out)
            return
        if start > pos:
            engine.encode_text(text[pos:start], out)
        out.append(open_id)
        body = start + len(_DNA_OPEN)
        end = text.find(_DNA_CLOSE, body)
        _dna_kmers(ids, text[body:len(text) if end < 0 else end], oov, out)
        if end < 0:
            return
        out.append(close_id)
        pos = end + len(_DNA_CLOSE)


def _dna_kmers(ids: Mapping[bytes, int], raw: bytes, oov: int, out: list[int]) -> None:
    seq = bytes(c - 32 if 0x61 <= c <= 0x7A else c for c in raw)
    for i in range(0, len(seq), _KMER):
        kmer = seq[i:i + _KMER].ljust(_KMER, b"A")
        out.append(ids.get(kmer + DNA_MARKER, oov))


_SESSIONS = {"whitespace": _whitespace_session, "hybriddna": _hybriddna_session}
