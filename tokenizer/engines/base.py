"""The interface every engine implements, and the registry that finds them.

An engine holds the rules that differ between llama.cpp's vocabulary types:
how a fragment of raw text becomes ids, where BOS/EOS/SEP go, and how a
token's piece is spelled. Everything shared lives elsewhere:
special-token partitioning in `tokenizer.special`, the attribute rules of
`token_to_piece` and all of `detokenize` in `tokenizer.pieces`, the public
API in `tokenizer.api`.

What an engine receives:

- `__init__(vocab)`: a validated `tokenizer.vocab.Vocab` (texts as bytes,
  `token_to_id`, float32 scores as floats, final `attrs` and the `base_attrs`
  llama.cpp's tokenizer object was built with, `special` ids with -1 for none,
  the flags, `merges`, `precompiled_charsmap`, raw `metadata`). Build lookup
  tables here; refuse what you cannot reproduce with `UnsupportedVocab`.
- `tokenize(fragments, *, add_special)`: the input after partitioning, a list
  alternating raw text (`bytes`, never empty, possibly invalid UTF-8) and
  special token ids (`int`) already split out. Return every id, including the
  BOS/EOS/SEP this vocabulary type inserts when `add_special` is true.
  An empty input arrives as `[]`.
- `piece(token)`: the bytes `token_to_piece(token, special=True)` gives, for a
  valid id (the API checks the range, applies `special=False` and `lstrip`).
- `linefeed()`: llama.cpp's newline id for vocabulary types whose loader
  tokenizes "\\n" (the default here does exactly that).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from ..errors import UnsupportedVocab

if TYPE_CHECKING:
    from ..vocab import Vocab

ENGINES: dict[str, type[Engine]] = {}


class Engine:
    """Base class: subclasses set `vocab_type` and override `piece`, and `tokenize` or `encode_into`."""

    vocab_type: ClassVar[str]

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab

    def tokenize(self, fragments: Sequence[bytes | int], *, add_special: bool) -> list[int]:
        """Ids for the partitioned input (see the module docstring).

        This default is llama.cpp's for the types that insert no BOS/EOS (RWKV,
        PLaMo-2, test): special ids pass through, each raw fragment goes to
        `encode_into`.
        """
        out: list[int] = []
        for fragment in fragments:
            if isinstance(fragment, int):
                out.append(fragment)
            else:
                self.encode_into(fragment, out)
        return out

    def encode_into(self, text: bytes, out: list[int]) -> None:
        """Append the ids of one raw fragment (for engines that keep the default `tokenize`)."""
        raise NotImplementedError

    def piece(self, token: int) -> bytes:
        """The spelling of `token` as `token_to_piece(special=True)` gives it."""
        raise NotImplementedError

    def linefeed(self) -> int:
        """llama.cpp's `linefeed_id` for types whose loader tokenizes "\\n" (BPE, UGM, RWKV, ...)."""
        ids = self.tokenize([b"\n"], add_special=False)
        return ids[0] if ids else self.vocab.default_pad


def register(cls: type[Engine]) -> type[Engine]:
    """Class decorator: make an engine findable by its `vocab_type`."""
    name = cls.vocab_type
    if name in ENGINES:
        raise ValueError(f"engine for vocab type {name!r} registered twice")
    ENGINES[name] = cls
    return cls


def engine_for(vocab_type: str) -> type[Engine]:
    """The engine class for a vocabulary type, or `UnsupportedVocab` listing the known ones."""
    try:
        return ENGINES[vocab_type]
    except KeyError:
        known = ", ".join(sorted(ENGINES)) or "none"
        raise UnsupportedVocab(
            f"no engine for vocabulary type {vocab_type!r} (known: {known})"
        ) from None
