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
from collections.abc import Mapping, Sequence
from itertools import accumulate, chain, pairwise
from typing import TYPE_CHECKING

import regex

from .. import unicode
from ..attrs import Attr
from ..cache import BoundedCache
from ..errors import LlamaCppAbort, UnsupportedVocab
from ..pieces import ESCAPED_SPACE, hex_byte_piece
from ..pretokenize import behaviours as pretokenizers
from ..pretokenize.splitter import Splitter
from ..vocab_rules import DNA_MARKER
from .base import BosEosEngine

if TYPE_CHECKING:
    from ..vocab import Vocab

_SHOWN_AS_TEXT = int(Attr.UNKNOWN | Attr.CONTROL | Attr.USER_DEFINED)
_NORMAL = int(Attr.NORMAL)
_BYTE = int(Attr.BYTE)


class Merger:
    """Rank-ordered merging: the lowest rank first, the leftmost of equals first.

    That is the order llama.cpp's priority queue (rank, then left index)
    produces; stale queue entries it skips never change the outcome.
    """

    def __init__(self, merges: Sequence[tuple[bytes, bytes]]) -> None:
        # std::map::emplace keeps the first rank of a repeated pair: filling the
        # dict from the end lets the first occurrence overwrite the later ones
        self.ranks = dict(zip(reversed(merges), range(len(merges) - 1, -1, -1)))

    def merge(self, symbols: list[bytes]) -> list[bytes]:
        get = self.ranks.get
        ranks = [get(p) for p in pairwise(symbols)]
        while True:
            best, at = None, -1
            for i, r in enumerate(ranks):
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                return symbols
            symbols[at:at + 2] = [symbols[at] + symbols[at + 1]]
            del ranks[at]
            if at > 0:
                ranks[at - 1] = get((symbols[at - 1], symbols[at]))
            if at < len(ranks):
                ranks[at] = get((symbols[at], symbols[at + 1]))


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
        self.merger = Merger(vocab.merges)
        self.ids = vocab.token_to_id
        self.byte_ids = self._byte_fallback_ids()
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

    def encode_text(self, text: bytes, out: list[int]) -> None:
        """`llm_tokenizer_bpe_session::tokenize` for one raw text."""
        self.encode_cps(unicode.decode_lenient(text), out)

    def encode_cps(self, cps: str, out: list[int]) -> None:
        """Split, then BPE each word (cached per word)."""
        cache = self._cache
        words = self.splitter.split(cps)
        found = list(map(cache.get, words))
        for i, ids in enumerate(found):
            if ids is None:  # a miss; the word may have been cached earlier in this loop
                word = words[i]
                ids = cache.get(word)
                if ids is None:
                    ids = cache.put(word, tuple(self._encode_word(word)))
                found[i] = ids
        out.extend(chain.from_iterable(found))  # type: ignore[arg-type]  # no None is left

    def _encode_word(self, word: str) -> list[int]:
        raw = unicode.encode(word)
        key = unicode.byte_encode(raw).encode() if self.pre.byte_encode else raw
        whole = self.ids.get(key)
        if whole is not None and self._keep_whole(key):
            return [whole]
        symbols = unicode.utf8_chars(key)
        if len(symbols) > 1 and b" " in key:
            raise LlamaCppAbort(
                f"piece {key!r} holds a space: llama.cpp's find_bpe_rank asserts that no BPE "
                f"symbol contains one and aborts (pre-tokenizer {self.vocab.pre!r} on raw UTF-8)"
            )
        if self.cutter is None:
            return self._merge_part(symbols)
        out: list[int] = []
        cache = self._part_cache
        for part in self.cutter.cut(key):
            ids = cache.get(part)
            if ids is None:
                ids = cache.put(part, tuple(self._merge_part(unicode.utf8_chars(part))))
            out.extend(ids)
        return out

    def _merge_part(self, symbols: list[bytes]) -> list[int]:
        out: list[int] = []
        for symbol in self.merger.merge(symbols):
            token = self.ids.get(symbol)
            if token is not None:
                out.append(token)
            else:
                out.extend(t for t in map(self.byte_ids.__getitem__, symbol) if t is not None)
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


# UTF-8-shaped sequences that llama.cpp's lenient decoder reads as code points
# above U+10FFFF, which it cannot re-encode (std::invalid_argument).
_ABOVE_10FFFF = regex.compile(rb"[\xf5-\xf7][\x80-\xbf]{3}|\xf4[\x90-\xbf][\x80-\xbf]{2}")


def _refuse_undecodable_pieces(vocab: Vocab) -> None:
    """llama.cpp builds every piece while loading; a NORMAL byte-level token whose
    text decodes above U+10FFFF throws there, and the load fails ("invalid codepoint")."""
    joined = b"\x00".join(vocab.texts)
    if not _ABOVE_10FFFF.search(joined):
        return
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
