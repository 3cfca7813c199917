"""PLaMo-2: best-scoring segmentation over code points, with byte fallback.

llama.cpp's `llm_tokenizer_plamo2` runs a Viterbi pass from the end of each
raw fragment to its start. At every position the candidates are the
vocabulary pieces that match there (cost: minus the score, scaled by 1e4 and
rounded to an integer) and a one-code-point "unknown" step (cost 1e7) that is
later spelled with the `<0xNN>` byte tokens of its UTF-8 encoding. Ties go
to the longest piece. A leading U+FEFF of each fragment is dropped, input
that is not UTF-8 is read with llama.cpp's lenient decoder (each bad byte is
one U+FFFD), and `add_special` changes nothing (no BOS/EOS for this type).

llama.cpp finds the matching pieces through a suffix table: for position i
it extends the longest known suffix found at i+1 by one code point. Two
details of that table change results and are reproduced here:

- a piece whose scaled score is exactly -10,000,000 (the unknown score,
  e.g. the ``[PADn]`` tokens converters write with score -1000) ends the
  list of candidates at its position, and also ends the search for the
  suffix at the position before it;
- pieces with a score that is not finite or scales to -20,000,000 or below
  are never candidates, though they still extend suffixes.

Refused with `UnsupportedVocab`, as llama.cpp refuses to load them: a
missing `<0xNN>` byte token (or one whose id is 0). Also refused, because
llama.cpp then works on re-encoded text we do not model: a non-byte token
whose text is not UTF-8 that llama.cpp's decoder gives back unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..attrs import Attr
from ..errors import UnsupportedVocab
from ..vocab_rules import hex_byte
from .base import Engine

if TYPE_CHECKING:
    from ..vocab import Vocab

_BYTE = int(Attr.BYTE)
INVALID_SCORE = -20_000_000
UNKNOWN_SCORE = -10_000_000
_INF = 1 << 60
_MEMO_LIMIT = 1 << 20
_INT32_MIN = -(1 << 31)


def codepoints(data: bytes) -> list[int]:
    """Code points as llama.cpp's `unicode_cpts_from_utf8` reads them.

    It accepts overlong forms, surrogates and lead bytes up to 0xF7, and turns
    each byte it cannot start a sequence with into U+FFFD.
    """
    try:
        return [ord(ch) for ch in data.decode("utf-8")]
    except UnicodeDecodeError:
        return _lenient_codepoints(data)


def _lenient_codepoints(data: bytes) -> list[int]:
    out: list[int] = []
    pos, end = 0, len(data)
    while pos < end:
        lead = data[pos]
        size, mask = _sequence(lead)
        if size == 0 or pos + size > end or any(
            (data[pos + k] & 0xC0) != 0x80 for k in range(1, size)
        ):
            out.append(0xFFFD)
            pos += 1
            continue
        cp = lead & mask
        for k in range(1, size):
            cp = (cp << 6) | (data[pos + k] & 0x3F)
        out.append(cp)
        pos += size
    return out


def _sequence(lead: int) -> tuple[int, int]:
    """(length, payload mask) of a UTF-8 sequence by its lead byte; length 0 if invalid."""
    if lead < 0x80:
        return 1, 0x7F
    if lead < 0xC0:
        return 0, 0
    if lead < 0xE0:
        return 2, 0x1F
    if lead < 0xF0:
        return 3, 0x0F
    if lead < 0xF8:
        return 4, 0x07
    return 0, 0


def utf8_bytes(cp: int) -> bytes:
    """The UTF-8 bytes llama.cpp's byte fallback writes for `cp` (any value up to 0x1FFFFF)."""
    size = 1 + (cp >= 0x80) + (cp >= 0x800) + (cp >= 0x10000)
    if size == 1:
        return bytes([cp])
    lead = (0xF00 >> size) & 0xFF
    out = [lead | ((cp >> (6 * (size - 1))) & 0x3F)]
    out += [0x80 | ((cp >> (6 * (size - 1 - k))) & 0x3F) for k in range(1, size)]
    return bytes(out)


def scaled_score(score: float) -> int:
    """`int32(round(score * 1e4))` as llama.cpp computes it; INVALID_SCORE if not finite."""
    if not math.isfinite(score):
        return INVALID_SCORE
    x = float(score) * 1e4
    r = math.floor(abs(x))
    if abs(x) - r >= 0.5:
        r += 1
    r = int(math.copysign(r, x)) if x else 0
    return r if -(1 << 31) <= r < (1 << 31) else _INT32_MIN  # x86 cvttsd2si overflow


class Plamo2Engine(Engine):
    """Viterbi over PLaMo-2 pieces, reproducing llama.cpp's suffix-table walk."""

    vocab_type = "plamo2"

    def __init__(self, vocab: Vocab) -> None:
        super().__init__(vocab)
        # llama.cpp builds its tables before load() adjusts attributes by token text
        texts, attrs = vocab.texts, vocab.base_attrs
        self._bytes = self._byte_tokens(texts, attrs)
        self._scores, self._ids = self._pieces(texts, vocab.scores, attrs)
        self._rows: dict[str, list[tuple[str, int, int]]] = {}
        # memos over the suffix table, filled as inputs need them (cleared past _MEMO_LIMIT)
        self._steps: dict[tuple[int, str], str] = {}
        self._candidates: dict[str, list[tuple[int, int, int]]] = {}

    @staticmethod
    def _byte_tokens(texts: Sequence[bytes], attrs: Sequence[int]) -> list[int]:
        table = [0] * 256
        for token, (text, attr) in enumerate(zip(texts, attrs)):
            value = hex_byte(text) if attr & _BYTE else None
            if value is not None:
                table[value] = token
        missing = [f"<0x{b:02X}>" for b in range(256) if table[b] == 0]
        if missing:
            raise UnsupportedVocab(
                f"PLaMo-2 vocabulary lacks byte tokens {', '.join(missing[:8])}"
                + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
                + " (a byte token with id 0 counts as missing); llama.cpp refuses to load it"
            )
        return table

    @staticmethod
    def _pieces(texts: Sequence[bytes], scores: Sequence[float],
                attrs: Sequence[int]) -> tuple[dict[str, int], dict[str, int]]:
        """Score of every piece and every suffix of one (INVALID for bare suffixes), and ids."""
        table: dict[str, int] = {}
        ids: dict[str, int] = {}
        for token, text in enumerate(texts):
            if attrs[token] & _BYTE:  # every byte-typed token stays out of the pieces
                try:  # ... but still owns its text in the id map
                    ids[text.decode("utf-8", "surrogatepass")] = token
                except UnicodeDecodeError:
                    pass  # no piece can spell it
                continue
            piece = _decode_piece(token, text)
            ids[piece] = token
            table[piece] = scaled_score(float(scores[token]))
            for k in range(1, len(piece)):
                table.setdefault(piece[k:], INVALID_SCORE)
        return table, ids

    def _rows_for(self, suffix: str) -> list[tuple[str, int, int]]:
        """Prefixes of `suffix` that are pieces, longest first, then the unknown step."""
        rows = self._rows.get(suffix)
        if rows is None:
            rows = []
            for n in range(len(suffix), 0, -1):
                piece = suffix[:n]
                score = self._scores.get(piece)
                if score is not None:
                    rows.append((piece, self._ids.get(piece, -1), score))
            rows.append(("", -1, UNKNOWN_SCORE))
            self._rows[suffix] = rows
        return rows

    def encode_into(self, text: bytes, out: list[int]) -> None:
        out.extend(self.encode(text))

    def encode(self, text: bytes) -> list[int]:
        """Ids for one raw fragment."""
        cps = codepoints(text)
        if cps and cps[0] == 0xFEFF:
            cps = cps[1:]
        if not cps:
            return []
        lengths, ids = self._viterbi(cps)
        return self._spell(cps, lengths, ids)

    def _next_suffix(self, cp: int, prev: str) -> str:
        if cp > 0x10FFFF:  # no piece holds it: the search ends at the first unknown row
            return ""
        ch = chr(cp)
        for piece, _, score in self._rows_for(prev):
            candidate = ch + piece
            if candidate in self._scores:
                return candidate
            if score == UNKNOWN_SCORE:
                return ""
        return ""  # not reached: the last row is the unknown step

    def _candidates_for(self, suffix: str) -> list[tuple[int, int, int]]:
        """(length, token, score) of each Viterbi candidate at a position whose suffix is `suffix`."""
        found = []
        for piece, token, score in self._rows_for(suffix):
            if score > INVALID_SCORE:
                found.append((len(piece) or 1, token, score))
            if score == UNKNOWN_SCORE:
                break
        return found

    def _viterbi(self, cps: list[int]) -> tuple[list[int], list[int]]:
        n = len(cps)
        cost = [_INF] * (n + 1)
        cost[n] = 0
        lengths = [0] * (n + 1)
        ids = [0] * (n + 1)
        if len(self._steps) > _MEMO_LIMIT:
            self._steps.clear()
            self._candidates.clear()
        steps, candidates = self._steps, self._candidates
        suffix = ""
        for i in range(n - 1, -1, -1):
            key = (cps[i], suffix)
            step = steps.get(key)
            if step is None:
                step = steps[key] = self._next_suffix(*key)
            suffix = step
            rows = candidates.get(suffix)
            if rows is None:
                rows = candidates[suffix] = self._candidates_for(suffix)
            best, best_size, best_token = _INF, 0, 0
            for size, token, score in rows:
                total = cost[i + size] - score
                if total < best:
                    best, best_size, best_token = total, size, token
            cost[i], lengths[i], ids[i] = best, best_size, best_token
        return lengths, ids

    def _spell(self, cps: list[int], lengths: list[int], ids: list[int]) -> list[int]:
        out: list[int] = []
        pos, n = 0, len(cps)
        while pos < n:
            if ids[pos] >= 0:
                out.append(ids[pos])
            else:
                out.extend(self._bytes[b] for b in utf8_bytes(cps[pos]))
            pos += lengths[pos]
        return out

    def piece(self, token: int) -> bytes:
        text = self.vocab.texts[token]
        value = hex_byte(text) if self.vocab.attrs[token] & _BYTE else None
        return text if value is None else bytes([value])


def _decode_piece(token: int, text: bytes) -> str:
    """A token's text as code points; refuses text llama.cpp would not give back unchanged."""
    try:
        return text.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise UnsupportedVocab(
            f"PLaMo-2 token {token} is not UTF-8 ({text!r}); llama.cpp would match a "
            "re-encoded form of it, which this engine does not reproduce"
        ) from None
