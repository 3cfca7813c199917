"""RWKV: greedy longest match over the vocabulary's raw bytes.

RWKV "world" vocabularies store each token as the body of a Python bytes
literal (``repr(b"...")[2:-1]``: ``\\x8e``, ``\\n``, ``\\\\``, ``\\'``), because a
GGUF string array cannot hold arbitrary bytes portably. llama.cpp unescapes
every token once (`llama_unescape_rwkv_token`), puts the bytes in a trie, and
tokenizes each raw fragment left to right by taking the longest token that
matches at the current byte. There is no BOS/EOS insertion and no
normalisation: `add_special` changes nothing for this vocabulary type.

Quirks reproduced (each pinned in ``tests/tokenizer/test_rwkv.py``):

- the unescaper only knows lowercase hex; any other digit is folded in with
  llama.cpp's arithmetic (``c - '0'`` or ``c - 'a' + 10`` in a byte), and a
  backslash before any other character yields that character;
- a byte that starts no token becomes the unknown id, which is -1 unless the
  file names one (the RWKV loader sets no default);
- when several tokens unescape to the same bytes the last id wins.

One llama.cpp behaviour is refused rather than reproduced: when a byte starts
some token but no token is a prefix of the remaining input, llama.cpp's loop
restarts from the beginning of the fragment forever. `tokenize` raises
`UnsupportedVocab` there, naming the byte offset.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import UnsupportedVocab
from .base import Engine

if TYPE_CHECKING:
    from ..vocab import Vocab

_ESCAPES = {ord("t"): 0x09, ord("n"): 0x0A, ord("r"): 0x0D}
_VALUE = -1  # key of a trie node's token id (byte keys are 0..255)
_Trie = dict[int, Any]  # byte -> child node, and _VALUE -> token id
# Texts whose every escape Python's own bytes-literal decoder reads exactly as llama.cpp does.
_PLAIN_ESCAPES = re.compile(rb"(?:[^\\]|\\(?:x[0-9a-f]{2}|[ntr\\'\"]))*")


def _hex_digit(c: int) -> int:
    """llama.cpp's digit value for byte `c`, computed in a signed char then cast to uint8."""
    signed = c - 256 if c >= 0x80 else c
    value = signed - ord("a") + 10 if signed >= ord("a") else signed - ord("0")
    return value & 0xFF


def unescape(text: bytes) -> bytes:
    """The raw bytes an RWKV token text stands for, as llama.cpp decodes them.

    >>> unescape(rb"\\xe4\\xb8\\x80\\n")
    b'\\xe4\\xb8\\x80\\n'
    """
    if b"\\" not in text:
        return text
    if _PLAIN_ESCAPES.fullmatch(text):
        return codecs.escape_decode(text)[0]
    out = bytearray()
    escaping = False
    hex_left = acc = 0
    for c in text:
        if hex_left:
            acc = ((acc << 4) + _hex_digit(c)) & 0xFF
            hex_left -= 1
            if not hex_left:
                out.append(acc)
                acc = 0
        elif escaping:
            escaping = False
            if c == ord("x"):
                hex_left = 2
            else:
                out.append(_ESCAPES.get(c, c))
        elif c == ord("\\"):
            escaping = True
        else:
            out.append(c)
    return bytes(out)


def _build_trie(pieces: Sequence[bytes], tokens: Sequence[int]) -> _Trie:
    """A trie over `pieces[t]` for each t in `tokens` (in order: a later id overwrites)."""
    root: _Trie = {}
    for token in tokens:
        node = root
        for b in pieces[token]:
            node = node.setdefault(b, {})
        node[_VALUE] = token
    return root


class RwkvEngine(Engine):
    """Longest-match tokenizer over unescaped RWKV token bytes."""

    vocab_type = "rwkv"

    def __init__(self, vocab: Vocab) -> None:
        super().__init__(vocab)
        self._pieces = [unescape(text) for text in vocab.texts]
        self._unk = vocab.special.get("unk", -1)
        # one sub-trie per first byte, built when input first needs it
        self._starts: dict[int, list[int]] = {}
        for token, piece in enumerate(self._pieces):
            if piece:
                self._starts.setdefault(piece[0], []).append(token)
        self._trie: _Trie = {}

    def _node(self, first: int) -> _Trie | None:
        """The trie node after byte `first`, or None when no token starts with it."""
        node = self._trie.get(first)
        if node is None and first in self._starts:
            node = self._trie[first] = _build_trie(self._pieces, self._starts[first])[first]
        return node

    def encode_into(self, text: bytes, out: list[int]) -> None:
        pos, end, root = 0, len(text), self._trie
        while pos < end:
            node = root.get(text[pos]) or self._node(text[pos])
            if node is None:
                out.append(self._unk)
                pos += 1
                continue
            best = node.get(_VALUE)
            best_end, i = pos + 1, pos + 1
            while i < end:
                node = node.get(text[i])
                if node is None:
                    break
                i += 1
                token = node.get(_VALUE)
                if token is not None:
                    best, best_end = token, i
            if best is None:
                raise UnsupportedVocab(
                    f"RWKV vocabulary has tokens starting with byte 0x{text[pos]:02x} but none "
                    f"matching the input at byte offset {pos}; llama.cpp loops forever here"
                )
            out.append(best)
            pos = best_end

    def piece(self, token: int) -> bytes:
        return self._pieces[token]
