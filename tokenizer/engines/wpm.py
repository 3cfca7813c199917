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

Speed without changing the answer: the whole fragment is cut into words by one
regex pass, each distinct word is normalised and matched once (cached per raw
word), a `▁word` that is itself a token is found by one lookup (it is the
longest match from the start), and the longest-first match tries only the
lengths of tokens sharing the next bytes (`candidate_lengths`). A call with
MIN_WORDS words or more to match hands them to `engines.wpm_batch` (all at once,
in numpy), built once BUILD_AFTER words were matched one by one.
tests/tokenizer/test_wpm.py checks all of it against llama.cpp's literal loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from itertools import chain, compress
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np

from .. import unicode as uni
from ..cache import BoundedCache
from ..pieces import ESCAPED_SPACE, spm_piece
from .base import Engine, collector_paused
from .wpm_batch import BUILD_AFTER, MIN_WORDS, BatchGreedy

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
        self.unk = vocab.special["unk"]
        self.cache: BoundedCache[str, list[int]] = BoundedCache()
        self.starts, self.pairs = candidate_lengths(vocab.token_to_id)
        self._batch: BatchGreedy | None = None  # built on first use (`batch_for`)
        self._slow_words = 0  # words matched one by one while there was no batch

    def before(self, out: list[int]) -> None:
        out.append(self.required("bos"))  # WPM: whatever add_bos says

    def after(self, out: list[int]) -> None:
        out.append(self.required("sep"))  # WPM: whatever add_sep says

    def piece(self, token: int) -> bytes:
        return spm_piece(self.vocab, token)

    def encode_into(self, fragment: bytes, out: list[int]) -> None:
        """Append the ids of one raw fragment to `out` (cached per raw word).

        The whole fragment is cut into words by one regex pass; the distinct
        words not cached yet are normalised and encoded together (one
        `str.translate`, one `encode`), and each distinct `▁word` is looked up
        whole (the longest match from its start, when it is a token), else matched.
        """
        with collector_paused():
            self.encode_words(fragment, out)

    def encode_words(self, fragment: bytes, out: list[int]) -> None:
        splitter = self.words
        words = splitter.split(fragment)
        cached = self.cache
        distinct = set(words)
        # not set.difference(cached): with a dict subclass it walks the whole cache
        missing = [w for w in distinct if w not in cached] if cached else list(distinct)
        if missing:
            if cached.make_room(len(missing)):
                missing = list(distinct)
            normalized = splitter.normalize_all(missing)
            distinct_words = dict.fromkeys(normalized)
            distinct_words.pop("", None)  # dropped characters only
            unique = list(distinct_words)
            spelled = _encode_all(unique)
            match = self.match
            tids = list(map(self.to_id.get, spelled))
            batch = self.batch_for(tids) if len(tids) >= MIN_WORDS else None
            if batch is None:
                found = [match(data) if tid is None else [tid] for data, tid in zip(spelled, tids)]
                ids_of = dict(zip(unique, found))
            else:
                ids_of = self.batched(batch, unique, spelled, tids)
            ids_of[""] = []
            cached.update(zip(missing, _values(ids_of, normalized)))
        out.extend(chain.from_iterable(_values(cached, words)))

    def batch_for(self, tids: list[int | None]) -> BatchGreedy | None:
        """The batch for a call whose `▁word`s look up as `tids`, or None where the
        per-word match is faster (fewer than MIN_WORDS to match, or no batch yet and
        fewer than BUILD_AFTER matched so far) or the batch would not be exact."""
        n = tids.count(None)
        if self._batch is None:
            self._slow_words += n
            if self._slow_words < BUILD_AFTER:
                return None
            self._batch = BatchGreedy(self.to_id, unk=self.unk)
        if n < MIN_WORDS or not self._batch.usable:
            return None
        return self._batch

    def batched(self, batch: BatchGreedy, unique: list[str], spelled: list[bytes],
                tids: list[int | None]) -> dict[str, list[int]]:
        """{word: ids} for each of `unique` (spelled `spelled`, looked up as `tids`): its
        token, else the batch's match, else (the words the batch leaves) `match`'s."""
        ids_of = {word: [tid] for word, tid in zip(unique, tids) if tid is not None}
        todo = [tid is None for tid in tids]
        words, data = list(compress(unique, todo)), list(compress(spelled, todo))
        done, left = batch.run(data)
        ids_of.update(zip(words, done))
        match = self.match
        for i in left:
            ids_of[words[i]] = match(data[i])
        return ids_of

    def match(self, data: bytes) -> list[int]:
        """Greedy longest-first match of `data` (`▁word` as bytes, not itself a
        token: `encode_into` looks that up first); [UNK] if any position has no token.

        llama.cpp tries every length from the longest token's down. Only the
        lengths of tokens that share the next bytes can match: at the start
        (the space symbol) those sharing the next `FIRST` bytes, then the
        shorter lengths; elsewhere those sharing the next two bytes, then one
        byte. A slice cut short by the word's end is the rest of the word,
        the longest candidate left, so lengths past the end need no check.
        """
        to_id, n = self.to_id, len(data)
        get, pairs = to_id.get, self.pairs
        ids = []
        for length in self.starts.get(data[:FIRST], _FIRST_SHORT):
            if length >= n:
                continue  # the whole word, looked up before `match` (see encode_into)
            tid = get(data[:length])
            if tid is not None:
                ids.append(tid)
                i = length
                break
        else:
            return [self.unk]
        while i < n:
            for length in pairs.get(data[i:i + 2], _ONE):
                tid = get(data[i:i + length])
                if tid is not None:
                    ids.append(tid)
                    i += length
                    break
            else:
                return [self.unk]
        return ids


_SPACE = ESCAPED_SPACE.decode()
FIRST = len(ESCAPED_SPACE) + 2  # bytes: the key of `starts` (the space symbol and two more)
_FIRST_SHORT = tuple(range(FIRST - 1, 0, -1))  # the lengths below FIRST, longest first
_ONE = (1,)


def _values(table: dict[str, list[int]], keys: list[str]) -> Iterable[list[int]]:
    """`table[k]` for each of `keys` (`itemgetter`: faster than mapping `__getitem__`)."""
    if len(keys) == 1:
        return [table[keys[0]]]  # itemgetter of one key returns the value itself
    return itemgetter(*keys)(table) if keys else ()


def _encode_all(words: list[str]) -> list[bytes]:
    """`▁word` as bytes for each word, in one `encode` (a NUL is never in a word)."""
    if not words:
        return []
    # uni.encode, all at once, the space symbol put before each word by the join
    return (_SPACE + ("\0" + _SPACE).join(words)).encode("utf-8", "surrogatepass").split(b"\0")


def candidate_lengths(to_id: Mapping[bytes, int]) -> tuple[dict[bytes, tuple[int, ...]],
                                                            dict[bytes, tuple[int, ...]]]:
    """The lengths worth trying where the text goes on with given bytes, longest first:

    - `starts`, {first FIRST bytes of a token that long or longer that begins
      with the space symbol: its lengths, then the lengths below FIRST};
    - `pairs`, {first two bytes of a token that long or longer: its lengths,
      then 1}.

    Grouped in numpy over the tokens' joined bytes (there are many tokens).
    """
    texts = list(to_id)
    sizes = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    joined = np.frombuffer(b"".join(texts) + bytes(FIRST), dtype=np.uint8)  # padded: reads past the end
    offsets = np.cumsum(sizes) - sizes
    spaced = sizes >= FIRST
    for k, byte in enumerate(ESCAPED_SPACE):
        spaced &= joined[offsets + k] == byte
    return (_grouped(joined, offsets[spaced], sizes[spaced], FIRST, _FIRST_SHORT),
            _grouped(joined, offsets[sizes >= 2], sizes[sizes >= 2], 2, _ONE))


def _grouped(joined: np.ndarray, offsets: np.ndarray, sizes: np.ndarray, head: int,
             tail: tuple[int, ...]) -> dict[bytes, tuple[int, ...]]:
    """{first `head` bytes of the tokens at `offsets`: their lengths, longest first, then `tail`}."""
    if not len(sizes):
        return {}
    key = np.zeros(len(sizes), dtype=np.int64)
    for k in range(head):
        key = (key << 8) | joined[offsets + k]
    span = int(sizes.max()) + 1
    if span < 1 << (62 - 8 * head):
        # one sort: by key, then by length, longest first; duplicates dropped
        both = np.unique(key * span + (span - 1 - sizes))
        key, size = both // span, span - 1 - both % span
    else:  # tokens too long to pack with their key
        order = np.lexsort((-sizes, key))
        key, size = key[order], sizes[order]
        keep = np.r_[True, (key[1:] != key[:-1]) | (size[1:] != size[:-1])]
        key, size = key[keep], size[keep]
    firsts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    bounds = firsts.tolist() + [len(key)]
    lengths = size.tolist()
    return {k.to_bytes(head, "big"): tuple(lengths[lo:hi]) + tail
            for k, lo, hi in zip(key[firsts].tolist(), bounds, bounds[1:])}


class WordSplitter:
    """The class tables of one (lowercase, strip_accents) setting, as regexes and a translation."""

    def __init__(self, *, lowercase: bool, strip_accents: bool) -> None:
        table, ws, skip, single = _classes(lowercase=lowercase, strip_accents=strip_accents)
        self.skip = re.compile(_in_class(skip)) if skip.any() else None
        # one plain class (fast in `re`) for words known to hold no astral code point
        self.skip_bmp = re.compile(f"[{_ranges(skip[:_BMP])}]") if skip[:_BMP].any() else None
        if ws[_BMP:].any() or not skip[ord(_STAND_IN_SINGLE)] or not skip[ord(_STAND_IN_OTHER)] or not skip[0]:
            raise AssertionError("tables break the splitting assumptions (see words/normalize_all)")
        # the stand-ins (private use, so never left in the text) play astral characters
        single_bmp = single[:_BMP].copy()
        single_bmp[ord(_STAND_IN_SINGLE)] = True
        self.word = re.compile(f"[{_ranges(single_bmp)}]|[^{_ranges(ws[:_BMP] | single_bmp)}]+")
        self.single, self.ws = single, ws
        if 0x20 in table or 0x20 in table.values() or not ws[0x20]:
            raise AssertionError("the translation touches the space (see normalize_all)")
        self.table = _lookup_string(table)

    def split(self, text: bytes) -> list[str]:
        """The raw words of `text`: one-character words and the runs between
        whitespace and them, in one regex pass (astral code points as in `words`).

        A dropped character is neither whitespace nor a one-character word, so
        it sits inside a run (or is one): dropping it before the split or from
        each word after it (`normalize_all`) gives the same words, except that
        a word of dropped characters alone becomes empty. Without astral code
        points they stay in until `normalize_all` (over distinct words only).
        """
        decoded = uni.decode_lenient(text)
        if not _ASTRAL_RE.search(decoded):
            return self.word.findall(decoded)
        if self.skip is not None:
            decoded = self.skip.sub("", decoded)  # before the (private use) stand-ins go in
        return self.words(decoded)

    def normalize_all(self, words: list[str]) -> list[str]:
        """Each word of `split` with its dropped characters removed and translated,
        in one regex pass and one `str.translate` (a space is never in a word).

        Words holding astral code points had theirs removed already in `split`,
        so the BMP ones are all that can be left.
        """
        joined = " ".join(words)
        if self.skip_bmp is not None:
            joined = self.skip_bmp.sub("", joined)
        return joined.translate(self.table).split(" ")

    def words(self, text: str) -> list[str]:
        """The raw words of decoded `text` (dropped characters already removed).

        The word regex knows only the BMP (fast in `re`); an astral code point
        is matched through a private-use stand-in of its class (private use
        characters are dropped before, so a stand-in is never ambiguous), then
        put back in order.
        """
        astral = _ASTRAL_RE.findall(text)
        if not astral:
            return self.word.findall(text)
        found = iter(astral)
        words = self.word.findall(_ASTRAL_RE.sub(self.stand_in, text))
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


def _lookup_string(table: dict[int, int]) -> str:
    """`table` as a string for `str.translate`: the output character at each
    code point up to the last one changed (past it, the character itself).

    Same output as the dict; faster, since a dict table raises and clears a
    KeyError inside `translate` for every character it leaves alone.
    """
    out = np.arange(max(table, default=-1) + 1, dtype=np.uint32)
    out[list(table)] = list(table.values())
    return out.tobytes().decode("utf-32-le", "surrogatepass")


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
