"""WordPiece (WPM, `tokenizer.ggml.model = "bert"`): llama.cpp's `llm_tokenizer_wpm_session`.

Each raw fragment is decoded with llama.cpp's lenient UTF-8 decoder and cut
into words. Per code point `c`, with `n` its one-to-one "NFD" base when
`normalizer.strip_accents` is on (llama.cpp's table keeps only the first code
point of a decomposition), and the classes taken from llama.cpp's flags of `n`:

1. whitespace ends the current word;
2. NUL, U+FFFD, control characters, and (with strip_accents) marks are dropped
   without ending the word;
3. punctuation, ASCII symbols and CJK ideographs (llama.cpp's ranges, which
   follow HF's typo 0x2B920 for 0x2B820) become one-character words;
4. anything else joins the current word, lower-cased with llama.cpp's table
   when `normalizer.lowercase` is on.

Each word, prefixed with U+2581, is matched greedily, longest token first from
each byte offset, against every token text (the converter already turned `##x`
into `x` and word starts into `▁x`). A word with any unmatched position becomes
the single UNK id. With `add_special`, BOS goes first and SEP last, whatever
`add_bos`/`add_sep` say (llama.cpp's rule for WPM).

A code point above U+10FFFF (lead bytes F4 90..F7) aborts llama.cpp when it is
re-encoded; `tokenizer.unicode.decode_lenient` raises `UnencodableCodepoint`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from .. import unicode as uni
from ..cache import BoundedCache
from ..pieces import ESCAPED_SPACE, spm_piece
from .base import Engine

if TYPE_CHECKING:
    from ..vocab import Vocab

# is_chinese_char() in llama.cpp's WPM session (inclusive ranges)
CJK_RANGES = (
    (0x04E00, 0x09FFF), (0x03400, 0x04DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0x0F900, 0x0FAFF), (0x2F800, 0x2FA1F),
)


class WpmEngine(Engine):
    """Greedy longest-match WordPiece over llama.cpp's BERT pre-processing."""

    vocab_type = "wpm"

    def __init__(self, vocab: Vocab) -> None:
        super().__init__(vocab)
        # the class tables depend only on the two normaliser flags: built once per process
        self.words = word_splitter(lowercase=vocab.normalizer_lowercase,
                                   strip_accents=vocab.normalizer_strip_accents)
        self.to_id = vocab.token_to_id
        self.lengths = lengths_by_prefix(vocab.token_to_id)
        self.unk = vocab.special["unk"]
        self.cache: BoundedCache[str, list[int]] = BoundedCache()

    def before(self, out: list[int]) -> None:
        out.append(self.required("bos"))  # WPM: whatever add_bos says

    def after(self, out: list[int]) -> None:
        out.append(self.required("sep"))  # WPM: whatever add_sep says

    def piece(self, token: int) -> bytes:
        return spm_piece(self.vocab, token)

    def encode_into(self, fragment: bytes, out: list[int]) -> None:
        """Append the ids of one raw fragment to `out` (cached per whitespace-free chunk)."""
        chunks = self.words.chunks(fragment)
        cached = self.cache
        # not set.difference(cached): with a dict subclass it walks the whole cache
        missing = {c for c in chunks if c not in cached}
        if missing:
            if cached.make_room(len(missing)):
                missing = set(chunks)
            words, normalize, match = self.words.words, self.words.normalize, self.match
            for chunk in missing:
                cached[chunk] = [t for w in words(chunk) for t in match(normalize(w))]
        out.extend(chain.from_iterable(map(cached.__getitem__, chunks)))

    def match(self, word: str) -> list[int]:
        """Greedy longest-first match of `▁word`; [UNK] if any position has no token.

        llama.cpp tries every length from the longest token's down; only the
        lengths of tokens that share the next `PREFIX` bytes can match, so only
        those are tried (then the lengths below `PREFIX`).
        """
        if not word:
            return []
        data = ESCAPED_SPACE + uni.encode(word)
        to_id, lengths, n = self.to_id, self.lengths, len(data)
        ids = []
        i = 0
        while i < n:
            left = n - i
            for length in lengths.get(data[i:i + PREFIX], SHORT):
                if length > left:
                    continue
                tid = to_id.get(data[i:i + length])
                if tid is not None:
                    ids.append(tid)
                    i += length
                    break
            else:
                return [self.unk]
        return ids


PREFIX = 4  # bytes: a token this long or longer is looked up through its first PREFIX bytes
SHORT = tuple(range(PREFIX - 1, 0, -1))  # the lengths tried at every position, longest first


def lengths_by_prefix(texts: Iterable[bytes]) -> dict[bytes, tuple[int, ...]]:
    """{first PREFIX bytes: the lengths of the tokens that start with them, longest
    first, then SHORT}: the lengths worth trying where the text goes on with those bytes."""
    found: dict[bytes, set[int]] = {}
    for text in texts:
        if len(text) >= PREFIX:
            found.setdefault(text[:PREFIX], set()).add(len(text))
    return {head: tuple(sorted(lens, reverse=True)) + SHORT for head, lens in found.items()}


class WordSplitter:
    """The class tables of one (lowercase, strip_accents) setting, as regexes and a translation."""

    def __init__(self, *, lowercase: bool, strip_accents: bool) -> None:
        table, ws, skip, single = _classes(lowercase=lowercase, strip_accents=strip_accents)
        self.skip = re.compile(_in_class(skip)) if skip.any() else None
        if (ws[_BMP:].any() or not skip[ord(_STAND_IN_SINGLE)] or not skip[ord(_STAND_IN_OTHER)]
                or not (skip[0x1C:0x20].all() and skip[0]) or not ws[list(_PY_SPACE)].all()
                or not all(chr(c).isspace() for c in np.flatnonzero(ws).tolist())):
            raise AssertionError("tables break the chunking assumptions (see chunks/words)")
        # the stand-ins (private use, so never left in the text) play astral characters
        single_bmp = single[:_BMP].copy()
        single_bmp[ord(_STAND_IN_SINGLE)] = True
        self.word = re.compile(f"[{_ranges(single_bmp)}]|[^{_ranges(ws[:_BMP] | single_bmp)}]+")
        self.single, self.ws = single, ws
        self.table = table

    def chunks(self, text: bytes) -> list[str]:
        """`text` decoded, dropped characters removed, cut at whitespace.

        Python's `str.split()` whitespace is llama.cpp's plus U+001C..U+001F,
        which are controls and so already gone.
        """
        decoded = uni.decode_lenient(text)
        if self.skip is not None:
            decoded = self.skip.sub("", decoded)
        return decoded.split()

    def words(self, chunk: str) -> list[str]:
        """The raw words of a whitespace-free chunk: one-character words split out.

        The word regex knows only the BMP (fast in `re`); an astral code point
        is matched through a private-use stand-in of its class (private use
        characters are dropped before, so a stand-in is never ambiguous), then
        put back in order.
        """
        astral = _ASTRAL_RE.findall(chunk)
        if not astral:
            return self.word.findall(chunk)
        found = iter(astral)
        words = self.word.findall(_ASTRAL_RE.sub(self.stand_in, chunk))
        # NUL was dropped with the other controls, so it can join and re-split the words
        return _STAND_IN_RE.sub(lambda m: next(found), "\0".join(words)).split("\0")

    def stand_in(self, m: re.Match[str]) -> str:
        return _STAND_IN_SINGLE if self.single[ord(m.group())] else _STAND_IN_OTHER

    def normalize(self, word: str) -> str:
        return word.translate(self.table)


@cache
def word_splitter(*, lowercase: bool, strip_accents: bool) -> WordSplitter:
    return WordSplitter(lowercase=lowercase, strip_accents=strip_accents)


def _classes(*, lowercase: bool,
             strip_accents: bool) -> tuple[dict[int, int], np.ndarray, np.ndarray, np.ndarray]:
    """Translation {code point: output code point} and masks whitespace / dropped / one-char word.

    The masks are over the input code point `c` but computed from the flags of
    its NFD base `n`; only the ~13k code points with a base differ from `c`.
    """
    flags = uni.flags_array()
    src, dst = _nfd_pairs() if strip_accents else (np.zeros(0, np.int64),) * 2
    f = flags.copy()
    f[src] = flags[dst]
    ws = (f & uni.WHITESPACE) != 0
    skip = (f & uni.CONTROL) != 0
    if strip_accents:
        skip |= (f & uni.ACCENT_MARK) != 0
    for special in (0, 0xFFFD):
        skip[special] = True
        skip[src[dst == special]] = True
    skip &= ~ws
    ascii_base = np.zeros(len(f), dtype=bool)
    ascii_base[:0x7F] = True
    ascii_base[src] = dst < 0x7F
    cjk = _cjk_mask()
    cjk[src] = _cjk_mask()[dst]
    single = ((f & uni.PUNCTUATION) != 0) | (ascii_base & ((f & uni.SYMBOL) != 0)) | cjk
    single &= ~ws & ~skip
    return _translation(src, dst, lowercase=lowercase), ws, skip, single


def _nfd_pairs() -> tuple[np.ndarray, np.ndarray]:
    """(code points, their one-to-one NFD base) for every code point the table changes."""
    firsts, lasts, bases = uni._nfd_ranges()
    counts = lasts - firsts + 1
    starts = np.cumsum(counts) - counts  # where each range begins in the flat list
    src = np.repeat(firsts, counts) + np.arange(int(counts.sum())) - np.repeat(starts, counts)
    dst = np.repeat(bases, counts)
    keep = src != dst
    return src[keep], dst[keep]


def _cjk_mask() -> np.ndarray:
    mask = np.zeros(uni.MAX_CODEPOINTS, dtype=bool)
    for lo, hi in CJK_RANGES:
        mask[lo:hi + 1] = True
    return mask


def _translation(src: np.ndarray, dst: np.ndarray, *, lowercase: bool) -> dict[int, int]:
    """{c: lower(nfd(c))} for every c that changes (NFD pairs given, lowercasing optional)."""
    out = dict(zip(src.tolist(), dst.tolist()))
    if lowercase:
        pairs = uni.tables()["lowercase"]
        lower = dict(zip(pairs[0::2], pairs[1::2]))
        out = {c: lower.get(n, n) for c, n in out.items()}
        for c, low in lower.items():
            out.setdefault(c, low)
    return {c: n for c, n in out.items() if c != n}


_BMP = 0x10000
_ASTRAL = "[\\U00010000-\\U0010ffff]"
_ASTRAL_RE = re.compile(_ASTRAL)
_STAND_IN_SINGLE, _STAND_IN_OTHER = "\ue001", "\ue000"
_STAND_IN_RE = re.compile("[\ue000\ue001]")
# what str.split() cuts at, besides U+001C..U+001F
_PY_SPACE = [c for c in range(_BMP) if chr(c).isspace() and not 0x1C <= c <= 0x1F]


def _in_class(mask: np.ndarray) -> str:
    """A regex matching one code point where `mask` is set.

    `re` looks a BMP code point up in a bitmap but walks astral ranges one by
    one, so the astral part sits behind a single-range guard.
    """
    bmp, astral = _ranges(mask[:_BMP]), _ranges(mask[_BMP:], offset=_BMP)
    if not astral:
        return f"[{bmp}]" if bmp else "(?!)"
    return f"(?:[{bmp}]|(?={_ASTRAL})[{astral}])" if bmp else f"(?={_ASTRAL})[{astral}]"


def _ranges(mask: np.ndarray, *, offset: int = 0) -> str:
    """The inside of a character class for the set positions of `mask`, shifted by `offset`."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    parts = []
    for lo, hi in zip((edges[0::2] + offset).tolist(), (edges[1::2] - 1 + offset).tolist()):
        parts.append(_esc(lo) if lo == hi else f"{_esc(lo)}-{_esc(hi)}")
    return "".join(parts)


def _esc(cp: int) -> str:
    return f"\\U{cp:08x}"
