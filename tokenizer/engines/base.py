"""The interface every engine implements, and the registry that finds them.

An engine holds the rules that differ between llama.cpp's vocabulary types:
how a fragment of raw text becomes ids, where BOS/EOS/SEP go, and how a
token's piece is spelled. Everything shared (special-token partitioning,
`token_to_piece` attribute handling, `detokenize`) lives in `tokenizer.api`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from ..errors import UnsupportedVocab

if TYPE_CHECKING:
    from ..vocab import Vocab

ENGINES: dict[str, type[Engine]] = {}


class Engine:
    """Base class: subclasses set `vocab_type` and override the two hooks."""

    vocab_type: ClassVar[str]

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab

    def tokenize(self, fragments: Sequence[bytes | int], *, add_special: bool) -> list[int]:
        """Ids for the partitioned input.

        `fragments` alternates raw text (`bytes`, possibly invalid UTF-8) and
        special token ids already split out by the partitioner.
        """
        raise NotImplementedError

    def piece(self, token: int) -> bytes:
        """The spelling of a non-special token, as `token_to_piece(special=True)` gives it."""
        raise NotImplementedError


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
