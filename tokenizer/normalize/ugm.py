"""UGM's input normaliser up to the space rules: llama.cpp's `normalize_prefix`, over a whole input.

At each position, in this order: the longest path through the trie of
user-defined tokens (a *path*, not a whole token: llama.cpp's
`naive_trie::get_longest_prefix` quirk) is copied as is; else the longest
precompiled-charsmap key (`tokenizer.normalize.charsmap`) is replaced; else one code point
is copied, or one byte that does not decode becomes U+FFFD (and is not
normalized further).

`PrefixNormalizer.walk` does exactly that, position by position. The fast
paths below give the same bytes (pinned by tests/tokenizer/test_charsmap.py and the UGM
differential runs) and are chosen per vocabulary at load.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from ..cache import BoundedCache
from .charsmap import REPLACEMENT, Charsmap, is_llama_valid, llama_utf8_fix, unit_at

__all__ = ["PrefixNormalizer"]

_REPLACEMENT = REPLACEMENT


class PrefixNormalizer:
    """`normalize_prefix` from the start of an input to its end, one of three ways.

    `__call__` returns the normalized bytes and whether every piece it copied
    decodes cleanly (so that code point starts are where a decoder finds them,
    which the lattice's word cache relies on).

    - `walk`: position by position, exactly as llama.cpp; used when the
      charsmap is not `plain` or a user-defined token starts with a byte that
      is not a whole character.
    - `fast`: something other than a plain copy can only start at a character
      that is a one-character key or shares its first byte with a user-defined
      token, or just before a character that continues a longer key; one
      character-class scan finds those candidates and the exact walk runs
      only there.
    - `translated`: without user-defined tokens, `str.translate` does the
      one-character keys and the walk runs only before key-continuing
      characters.
    """

    def __init__(self, cm: Charsmap | None, user_defined: Iterable[bytes]) -> None:
        self.cm = cm
        self.user_defined = [t for t in user_defined if t]
        self.ud_trie = _byte_trie(self.user_defined)
        self.trusted_replacements = cm is None or cm.valid_replacements
        self.followers: frozenset[str] = frozenset()
        self.candidates = self._candidate_regex()
        self.table: dict[str, str] | None = None
        self.marker = b""
        self.memo: BoundedCache[str, str] = BoundedCache()
        # candidates without user-defined tokens come from the charsmap, so cm is set here
        if self.candidates and not self.user_defined and cm is not None and cm.strict_replacements:
            marker = _marker(cm)
            if marker is not None:
                self.marker = marker
                self.table = {k.decode(): v.decode() for k, v in cm.singles.items()}
                self.translate_re = self._translate_regex()

    def _candidate_regex(self) -> re.Pattern[str] | Literal[False] | None:
        """The regex of candidate characters; False when there are none; None for the slow path."""
        cm = self.cm
        if cm is not None and not cm.plain:
            return None
        chars: set[str] = set()
        for token in self.user_defined:
            head = token.decode("utf-8", "surrogateescape")[0]
            if _is_escape(head):
                return None
            chars |= _same_lead(head)
        if cm is not None:
            chars |= {k.decode() for k in cm.singles}
            self.followers = frozenset(k.decode() for k in cm.followers)
            chars |= self.followers
        return re.compile(_char_class(chars)) if chars else False

    def _translate_regex(self) -> re.Pattern[str]:
        parts = []
        if self.followers:
            parts.append(f"(?P<run>.(?:{_char_class(self.followers)})+)")
        if self.table:
            parts.append(f"(?P<single>{_char_class(self.table)})")
        return re.compile("|".join(parts) or "(?!)", re.S)

    def __call__(self, data: bytes) -> tuple[bytes, bool]:
        if self.candidates is None:
            return self.walk(data), False
        if self.candidates is False:
            return llama_utf8_fix(data), True
        if self.table is not None and self.marker not in data:
            return self.translated(data), self.trusted_replacements
        return self.fast(data)

    def translated(self, data: bytes) -> bytes:
        """No user-defined tokens and clean replacements: one regex pass.

        A one-character key is replaced from a table. A longer key is a character
        followed by characters that continue keys ("followers"), so each such
        run (a character and all the followers after it) is normalized on its
        own by exact walks, memoised; no key can reach past the run.

        A byte that does not decode becomes U+FFFD *without* being normalized
        (nmt_nfkc maps a real U+FFFD to a space), so it is first marked with a
        character that is no key and absent from the input, and turned into
        U+FFFD at the end.
        """
        marker = self.marker
        text = llama_utf8_fix(data, marker).decode("utf-8", "surrogateescape")
        out = self.translate_re.sub(self.replace, text)
        return out.encode("utf-8", "surrogateescape").replace(marker, _REPLACEMENT)

    def replace(self, m: re.Match[str]) -> str:
        found = m.group()
        if m.lastgroup != "run":
            assert self.table is not None  # translate_re exists only with a table
            return self.table[found]
        done = self.memo.get(found)
        if done is None:
            done = self.memo.put(found, self.normalize_run(found))
        return done

    def normalize_run(self, run: str) -> str:
        """A character and the followers after it, walked position by position."""
        data = run.encode("utf-8", "surrogateescape")
        cm, table = self.cm, self.table
        assert cm is not None and table is not None  # runs exist only on the translated path
        out: list[str] = []
        i, pos = 0, 0
        while i < len(run):
            length, offset, _ = cm.walk(data, pos)
            if length:
                used = data[pos:pos + length].decode("utf-8")  # keys are whole characters
                out.append(cm.replacement(offset).decode("utf-8"))
                i, pos = i + len(used), pos + length
            else:
                ch = run[i]
                out.append(table.get(ch, ch))
                i, pos = i + 1, pos + len(ch.encode("utf-8", "surrogateescape"))
        return "".join(out)

    def fast(self, data: bytes) -> tuple[bytes, bool]:
        text = data.decode("utf-8", "surrogateescape")
        out: list[bytes] = []
        trusted = self.trusted_replacements
        pos = 0                    # bytes normalized so far
        at_char, at_byte = 0, 0    # a known (character index, byte offset) pair
        for i in self.candidate_indices(text):
            x = at_byte + len(text[at_char:i].encode("utf-8", "surrogateescape"))
            at_char, at_byte = i, x
            if x < pos:
                continue           # inside what an earlier match consumed
            found = self.match_at(data, x)
            if found is None:
                continue
            piece, used, raw = found
            if x > pos:
                out.append(llama_utf8_fix(data[pos:x]))
            out.append(piece)
            if raw:
                trusted = trusted and is_llama_valid(piece)
            pos = x + used
        out.append(llama_utf8_fix(data[pos:]))
        return b"".join(out), trusted

    def candidate_indices(self, text: str) -> list[int]:
        """Character indices where a walk may find something, ascending."""
        followers, candidates = self.followers, self.candidates
        assert candidates  # the fast path runs only with a candidate regex
        found = []
        for m in candidates.finditer(text):
            i = m.start()
            if followers and i and text[i] in followers:
                found.append(i - 1)
            found.append(i)
        if followers:
            found = sorted(set(found))
        return found

    def match_at(self, data: bytes, x: int) -> tuple[bytes, int, bool] | None:
        """(piece, bytes consumed, copied raw?) at byte offset `x`, or None for a plain copy."""
        if self.user_defined:
            k = _longest_path(self.ud_trie, data, x)
            if k:
                return data[x:x + k], k, True
        if self.cm is not None:
            found = self.cm.longest_match(data, x)
            if found is not None:
                return found[0], found[1], False
        return None

    def walk(self, data: bytes) -> bytes:
        """The position-by-position walk: slow, exact for any charsmap and any tokens."""
        out = bytearray()
        i, n = 0, len(data)
        while i < n:
            found = self.match_at(data, i)
            if found is not None:
                out += found[0]
                i += found[1]
                continue
            k = unit_at(data, i)
            out += data[i:i + k] if k else _REPLACEMENT
            i += k or 1
        return bytes(out)


_MARKERS = ("\uffff", "\U0010ffff", "\ufdd0", "\U000fffff")


def _marker(cm: Charsmap) -> bytes | None:
    """A character that starts, continues and appears in no key or replacement, as bytes."""
    for ch in _MARKERS:
        data = ch.encode()
        length, _, ran_off = cm.walk(data, 0)
        if not (length or ran_off or data in cm.followers or data in cm.replacements):
            return data
    return None


def _same_lead(ch: str) -> set[str]:
    """Every character whose UTF-8 form starts with the same byte as `ch`'s.

    A user-defined token's trie path can match just that byte (and llama.cpp
    then copies it alone), so all of them are candidates, and so is that byte
    where it does not decode.
    """
    lead = ch.encode()[0]
    if lead < 0x80:
        return {ch}
    bits, width = (0x1F, 6) if lead < 0xE0 else (0x0F, 12) if lead < 0xF0 else (0x07, 18)
    lo = (lead & bits) << width
    same = {chr(c) for c in range(lo, min(lo + (1 << width), 0x110000))
            if not 0xD800 <= c < 0xE000}
    return same | {chr(0xDC00 + lead)}  # the lead byte alone, as surrogateescape decodes it


def _is_escape(ch: str) -> bool:
    """A lone surrogate from surrogateescape decoding (a byte that is not UTF-8)."""
    return "\udc80" <= ch <= "\udcff"


def _char_class(chars: Iterable[str]) -> str:
    """A regex (str) matching one of `chars`; the astral part behind a one-range guard."""
    cps = sorted(ord(c) for c in chars)
    bmp = _class_body([c for c in cps if c < 0x10000])
    astral = _class_body([c for c in cps if c >= 0x10000])
    parts = [f"[{bmp}]"] if bmp else []
    if astral:
        parts.append(f"(?=[\\U00010000-\\U0010ffff])[{astral}]")
    return "|".join(parts)


def _class_body(cps: list[int]) -> str:
    parts = []
    i = 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        lo, hi = cps[i], cps[j]
        parts.append(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}")
        i = j + 1
    return "".join(parts)


def _byte_trie(keys: Iterable[bytes]) -> dict[int, Any]:
    root: dict[int, Any] = {}
    for key in keys:
        node = root
        for b in key:
            node = node.setdefault(b, {})
    return root


def _longest_path(trie: dict[int, Any], data: bytes, i: int) -> int:
    node, j, n = trie, i, len(data)
    while j < n:
        child = node.get(data[j])
        if child is None:
            break
        node = child
        j += 1
    return j - i
