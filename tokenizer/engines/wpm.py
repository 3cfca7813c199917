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
from collections.abc import Sequence
from functools import cache
from itertools import chain

import numpy as np

from .. import unicode as uni
from ..errors import UnsupportedVocab
from ..pieces import spm_piece
from .base import Engine, register

ESCAPED_SPACE = "\u2581".encode()
_CACHE_LIMIT = 1 << 17

# is_chinese_char() in llama.cpp's WPM session (inclusive ranges)
CJK_RANGES = (
    (0x04E00, 0x09FFF), (0x03400, 0x04DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0x0F900, 0x0FAFF), (0x2F800, 0x2FA1F),
)


@register
class WpmEngine(Engine):
    """Greedy longest-match WordPiece over llama.cpp's BERT pre-processing."""

    vocab_type = "wpm"

    def __init__(self, vocab) -> None:
        super().__init__(vocab)
        self._words: WordSplitter | None = None
        self.to_id = vocab.token_to_id
        self.max_len = vocab.max_token_len
        self.unk = vocab.special["unk"]
        self.cache: dict[str, list[int]] = {}

    def tokenize(self, fragments: Sequence[bytes | int], *, add_special: bool) -> list[int]:
        special = self.vocab.special
        out: list[int] = []
        if add_special:
            out.append(_required(special["bos"], "BOS"))
        for fragment in fragments:
            if isinstance(fragment, int):
                out.append(fragment)
            else:
                self.tokenize_text(fragment, out)
        if add_special:
            out.append(_required(special["sep"], "SEP"))
        return out

    def piece(self, token: int) -> bytes:
        return spm_piece(self.vocab, token)

    @property
    def words(self) -> WordSplitter:
        """The class tables, built on first use (llama.cpp also builds its tables lazily)."""
        if self._words is None:
            self._words = word_splitter(lowercase=self.vocab.normalizer_lowercase,
                                        strip_accents=self.vocab.normalizer_strip_accents)
        return self._words

    def tokenize_text(self, text: bytes, out: list[int]) -> None:
        """Append the ids of one raw fragment to `out`."""
        words = self.words.split(text)
        cached = self.cache
        mark = len(out)
        try:
            out.extend(chain.from_iterable(map(cached.__getitem__, words)))
            return
        except KeyError:
            del out[mark:]  # a word not seen before: fill the cache below
        if len(cached) >= _CACHE_LIMIT:
            cached.clear()
        for word in words:
            ids = cached.get(word)
            if ids is None:
                ids = cached[word] = self.match(self.words.normalize(word))
            out += ids

    def match(self, word: str) -> list[int]:
        """Greedy longest-first match of `▁word`; [UNK] if any position has no token."""
        if not word:
            return []
        data = ESCAPED_SPACE + uni.encode(word)
        to_id, n, longest = self.to_id, len(data), self.max_len
        ids = []
        i = 0
        while i < n:
            for j in range(min(n, i + longest + 1), i, -1):
                tid = to_id.get(data[i:j])
                if tid is not None:
                    ids.append(tid)
                    i = j
                    break
            else:
                return [self.unk]
        return ids


def _required(token: int, name: str) -> int:
    if token < 0:
        raise UnsupportedVocab(
            f"WPM tokenize with add_special needs a {name} id and the vocabulary has none: "
            "llama.cpp aborts here (GGML_ASSERT)")
    return token


class WordSplitter:
    """The class tables of one (lowercase, strip_accents) setting, as regexes and a translation."""

    def __init__(self, *, lowercase: bool, strip_accents: bool) -> None:
        out, ws, skip, single = _classes(lowercase=lowercase, strip_accents=strip_accents)
        self.skip = re.compile(_in_class(skip)) if skip.any() else None
        bmp_single, bmp_other = _ranges(single[:_BMP]), _ranges((ws | single)[:_BMP])
        self.word = re.compile(f"[{bmp_single}]|[^{bmp_other}]+")
        self.single, self.ws = single, ws
        changed = np.flatnonzero((out != np.arange(len(out))) & ~skip & ~ws)
        self.table = dict(zip(changed.tolist(), out[changed].tolist()))

    def split(self, text: bytes) -> list[str]:
        """The raw words of `text` (before lower-casing and NFD), dropped characters removed.

        The word regex knows only the BMP (fast in `re`); an astral code point
        is matched through a BMP stand-in of its class, and the words are cut
        from the real text at the same offsets.
        """
        decoded = uni.decode_lenient(text)
        if self.skip is not None and self.skip.search(decoded):
            decoded = self.skip.sub("", decoded)
        if _ASTRAL_RE.search(decoded) is None:
            return self.word.findall(decoded)
        proxy = _ASTRAL_RE.sub(self.stand_in, decoded)
        return [decoded[m.start():m.end()] for m in self.word.finditer(proxy)]

    def stand_in(self, m: re.Match) -> str:
        cp = ord(m.group())
        return "!" if self.single[cp] else " " if self.ws[cp] else "a"

    def normalize(self, word: str) -> str:
        return word.translate(self.table)


@cache
def word_splitter(*, lowercase: bool, strip_accents: bool) -> WordSplitter:
    return WordSplitter(lowercase=lowercase, strip_accents=strip_accents)


def _classes(*, lowercase: bool, strip_accents: bool):
    """Per code point: output code point, and masks whitespace / dropped / one-character word."""
    cps = np.arange(uni.MAX_CODEPOINTS, dtype=np.int64)
    base = _nfd_all() if strip_accents else cps
    flags = uni.flags_array().astype(np.int64)[base]
    ws = (flags & uni.WHITESPACE) != 0
    skip = (base == 0) | (base == 0xFFFD) | ((flags & uni.CONTROL) != 0)
    if strip_accents:
        skip |= (flags & uni.ACCENT_MARK) != 0
    skip &= ~ws
    cjk = np.zeros(len(cps), dtype=bool)
    for lo, hi in CJK_RANGES:
        cjk[lo:hi + 1] = True
    single = ((flags & uni.PUNCTUATION) != 0) | ((base < 0x7F) & ((flags & uni.SYMBOL) != 0))
    single = (single | cjk[base]) & ~ws & ~skip
    out = _lower_all()[base] if lowercase else base
    return out, ws, skip, single


def _nfd_all() -> np.ndarray:
    firsts, lasts, bases = uni._nfd_ranges()
    out = np.arange(uni.MAX_CODEPOINTS, dtype=np.int64)
    for lo, hi, b in zip(firsts.tolist(), lasts.tolist(), bases.tolist()):
        out[lo:hi + 1] = b
    return out


def _lower_all() -> np.ndarray:
    out = np.arange(uni.MAX_CODEPOINTS, dtype=np.int64)
    pairs = np.array(uni.tables()["lowercase"], dtype=np.int64).reshape(-1, 2)
    out[pairs[:, 0]] = pairs[:, 1]
    return out


_BMP = 0x10000
_ASTRAL = "[\\U00010000-\\U0010ffff]"
_ASTRAL_RE = re.compile(_ASTRAL)


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
