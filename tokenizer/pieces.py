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


def detokenize(vocab: Vocab, piece: Callable[[int], bytes], ids: Sequence[int], *,
               remove_special: bool, unparse_special: bool) -> bytes:
    """llama.cpp's `llama_detokenize` (with a buffer large enough for the result)."""
    ids = list(ids)
    remove_space = vocab.add_space_prefix
    if remove_special and vocab.add_bos and ids and ids[0] == vocab.special["bos"]:
        remove_space = False
        ids = ids[1:]
    if remove_special and vocab.add_eos and ids and ids[-1] == vocab.special["eos"]:
        ids = ids[:-1]
    parts = []
    for token in ids:
        parts.append(token_to_piece(vocab, piece, token, lstrip=int(remove_space),
                                    special=unparse_special))
        remove_space = False
    text = b"".join(parts)
    return clean_spaces(text) if vocab.clean_spaces else text


def clean_spaces(text: bytes) -> bytes:
    """llama.cpp's three clean-up passes, run on a buffer exactly as its C loops run."""
    buf = bytearray(text)
    total = len(buf)
    if any(p in text for p in (b" ?", b" !", b" .", b" ,")):
        total = _pass_punctuation(buf, total)
    if b" ' " in buf[:total]:
        total = _pass_lone_apostrophe(buf, total)
    if b" '" in buf[:total]:
        total = _pass_contractions(buf, total)
    return bytes(buf[:total])


def _pass_punctuation(t: bytearray, n: int) -> int:
    total = 1 if n else 0
    for i in range(1, n):
        x = t[i]
        if t[i - 1] == 0x20 and x in b"?!.,":
            total -= 1
        t[total] = x
        total += 1
    return total


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
