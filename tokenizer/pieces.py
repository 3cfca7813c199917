"""Token pieces and detokenizing: llama.cpp's `token_to_piece` and `detokenize`.

The spelling of a token (its "piece") depends on the vocabulary type and comes
from the engine (`Engine.piece`); what is shared lives here:

- `token_to_piece`: UNKNOWN and CONTROL tokens give nothing unless
  `special=True`; `lstrip` drops up to that many leading spaces.
- `detokenize`: with `remove_special`, a leading BOS (when the vocabulary adds
  BOS) and a trailing EOS (when it adds EOS) are dropped; the first piece loses
  one leading space when the vocabulary adds a space prefix, unless a BOS was
  just dropped (llama.cpp's rule, pinned by tests/tokenizer/test_api.py); then
  `clean_spaces` runs llama.cpp's three clean-up passes.
- `hex_byte_piece`/`spm_piece`: the SPM/UGM/WPM spelling rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .attrs import SPECIAL_ATTRS, Attr
from .errors import InvalidToken

if TYPE_CHECKING:
    from .vocab import Vocab

_SHOWN_AS_TEXT = int(Attr.UNKNOWN | Attr.CONTROL | Attr.USER_DEFINED)
_NORMAL = int(Attr.NORMAL)
_BYTE = int(Attr.BYTE)
ESCAPED_SPACE = "\u2581".encode()


def check_token(vocab: Vocab, token: int) -> None:
    """`InvalidToken` unless `token` is an id of `vocab` (llama.cpp would throw out_of_range)."""
    if not isinstance(token, int) or not 0 <= token < len(vocab.texts):
        raise InvalidToken(f"token id {token!r} is outside the vocabulary of {len(vocab.texts)} tokens")


def hex_byte_piece(text: bytes) -> bytes:
    """The byte a `<0xXX>` token stands for (load_vocab has checked the spelling)."""
    return bytes((int(text[3:5], 16),))


def spm_piece(vocab: Vocab, token: int) -> bytes:
    """SPM/UGM/WPM spelling: special text as is, ▁ as space in normal tokens, byte tokens as bytes."""
    attr, text = vocab.attrs[token], vocab.texts[token]
    if attr & _SHOWN_AS_TEXT:
        return text
    if attr & _NORMAL:
        return text.replace(ESCAPED_SPACE, b" ")
    if attr & _BYTE:
        return hex_byte_piece(text)
    return b""


def token_to_piece(vocab: Vocab, piece: Callable[[int], bytes], token: int, *,
                   lstrip: int, special: bool) -> bytes:
    """llama.cpp's `llama_token_to_piece` given the cached spelling function `piece`."""
    check_token(vocab, token)
    if not special and vocab.attrs[token] & SPECIAL_ATTRS:
        return b""
    out = piece(token)
    skip = 0
    while skip < lstrip and skip < len(out) and out[skip] == 0x20:
        skip += 1
    return out[skip:] if skip else out


class PieceTable(dict[int, bytes]):
    """token -> `token_to_piece(token, lstrip=0, special=special)`, each filled on its first use.

    `detokenize` joins pieces from it at C speed; an id outside the vocabulary is
    never stored (its lookup raises `InvalidToken`).
    """

    def __init__(self, vocab: Vocab, piece: Callable[[int], bytes], *, special: bool) -> None:
        super().__init__()
        self.vocab, self.piece, self.special = vocab, piece, special

    def __missing__(self, token: int) -> bytes:
        value = token_to_piece(self.vocab, self.piece, token, lstrip=0, special=self.special)
        self[token] = value
        return value


def detokenize(vocab: Vocab, tables: dict[bool, PieceTable], ids: Sequence[int], *,
               remove_special: bool, unparse_special: bool) -> bytes:
    """llama.cpp's `llama_detokenize` (with a buffer large enough for the result).

    `tables`: the `PieceTable` for each `unparse_special`.
    """
    ids = list(ids)
    if not set(map(type, ids)) <= _PLAIN_IDS:  # a numpy integer or other object: refused as check_token does
        for token in ids:
            check_token(vocab, token)
    remove_space = vocab.add_space_prefix
    if remove_special and vocab.add_bos and ids and ids[0] == vocab.special["bos"]:
        remove_space = False
        ids = ids[1:]
    if remove_special and vocab.add_eos and ids and ids[-1] == vocab.special["eos"]:
        ids = ids[:-1]
    special = unparse_special
    table = tables[special]
    if remove_space and ids:
        first = token_to_piece(vocab, table.piece, ids[0], lstrip=1, special=special)
        text = first + b"".join(map(table.__getitem__, ids[1:]))
    else:
        text = b"".join(map(table.__getitem__, ids))
    return clean_spaces(text) if vocab.clean_spaces else text


_PLAIN_IDS = frozenset((int, bool))  # bool is an int to check_token, as to llama.cpp's C API


def clean_spaces(text: bytes) -> bytes:
    """llama.cpp's three clean-up passes, with its C loops' results."""
    for gap in _PUNCTUATION_GAPS:
        text = text.replace(gap, gap[1:])
    buf = bytearray(text)
    total = len(buf)
    if b" ' " in buf:
        total = _pass_lone_apostrophe(buf, total)
    if b" '" in buf[:total]:
        total = _pass_contractions(buf, total)
    return bytes(buf[:total])


# The first pass drops each space that comes just before one of ? ! . , (its loop compares
# the input's own bytes, which it has not yet overwritten). A drop never makes a new pair of
# another mark, so one `replace` per mark, in any order, gives the loop's result.
_PUNCTUATION_GAPS = (b" ?", b" !", b" .", b" ,")


def _pass_lone_apostrophe(t: bytearray, n: int) -> int:
    total = 1 if n else 0
    i = 1
    while i < n:
        x = t[i]
        if x == 0x27 and i + 1 < n and t[i - 1] == 0x20 and t[i + 1] == 0x20:
            total -= 1
            i += 1
            t[i] = 0  # llama.cpp blanks the next space in place, which the next test then sees
        t[total] = x
        total += 1
        i += 1
    return total


def _pass_contractions(t: bytearray, n: int) -> int:
    total = 1 if n else 0
    for i in range(1, n):
        x = t[i]
        if t[i - 1] == 0x20 and x == 0x27 and i + 1 < n and _drops_space(t, i, n):
            total -= 1
        t[total] = x
        total += 1
    return total


def _drops_space(t: bytearray, i: int, n: int) -> bool:
    x1 = t[i + 1]
    if x1 in b"td":
        return False
    if x1 in b"sm":
        return True
    return i + 2 < n and (x1, t[i + 2]) in ((0x72, 0x65), (0x76, 0x65))  # 're, 've
