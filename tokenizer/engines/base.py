"""The interface every engine implements, and the one place specials are wrapped around text.

An engine holds the rules that differ between llama.cpp's vocabulary types:
how a fragment of raw text becomes ids, which specials go around the result,
and how a token's piece is spelled. Everything shared lives elsewhere:
special-token partitioning in `tokenizer.special`, the attribute rules of
`token_to_piece` and all of `detokenize` in `tokenizer.pieces`, the public
API in `tokenizer.api`, the engine lookup in `tokenizer.api.Tokenizer.from_gguf`.

`Engine.tokenize` is the template (HF tokenizers' post-processor stage, done
once here instead of per type as in llama.cpp's `llama-vocab.cpp`): `before`
adds the leading specials when `add_special` is true, each raw fragment goes to
`encode_into`, special ids pass through, `after` adds the trailing specials.

What an engine receives and supplies:

- `__init__(vocab)`: a validated `tokenizer.vocab.Vocab` (texts as bytes,
  `token_to_id`, float32 scores as floats, final `attrs` and the `base_attrs`
  llama.cpp's tokenizer object was built with, `special` ids with -1 for none,
  the flags, `merges`, `precompiled_charsmap`, raw `metadata`). Build lookup
  tables here; refuse what you cannot reproduce with `UnsupportedVocab`.
- `encode_into(fragment, out)`: append the ids of one raw fragment (`bytes`,
  never empty, possibly invalid UTF-8) to `out`.
- `first_text(fragment)`: the fragment as encoded when it starts the input or
  follows a special token (SPM's space prefix); the default leaves it alone.
- `before(out)` / `after(out)`: the specials `add_special` puts around the
  result; none by default (RWKV, PLaMo-2, test). `BosEosEngine` adds BOS/EOS
  as the vocabulary's flags say (SPM, BPE, UGM); WPM adds BOS and SEP.
- `piece(token)`: the bytes `token_to_piece(token, special=True)` gives, for a
  valid id (the API checks the range, applies `special=False` and `lstrip`).
- `linefeed()`: llama.cpp's newline id for vocabulary types whose loader
  tokenizes "\\n" (the default here does exactly that).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar

from ..errors import UnsupportedVocab

if TYPE_CHECKING:
    from ..vocab import Vocab


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while an engine tokenizes a fragment or a vocabulary loads.

    Both build tens or hundreds of thousands of objects, none in a cycle (a
    long fragment's per-word id lists; a load's tuples, lists and dicts, on
    llama-bpe most of the time `tuple(zip(...))` took to pair 280,147 merges),
    and each of the collector's passes walks them (and the tables alive since
    the load) to no end: 5 to 10% of WPM's and UGM's time on
    harness/data/corpora/diverse.txt. Reference counting frees everything as usual; the
    collector resumes, if it was on, when the work is done.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Engine:
    """Base class: subclasses set `vocab_type` and supply `encode_into` and `piece`."""

    vocab_type: ClassVar[str]
    vocab: Vocab

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab

    def tokenize(self, fragments: Sequence[bytes | int], *, add_special: bool) -> list[int]:
        """Ids for the partitioned input, as llama.cpp's `tokenize` for every vocabulary type.

        `fragments` alternate raw text and special ids already split out
        (`tokenizer.special.partition`); an empty input arrives as `[]`.
        """
        return self.assemble(fragments, add_special=add_special, encode_into=self.encode_into)

    def tokenize_batch(self, inputs: Sequence[Sequence[bytes | int]], *, add_special: bool) -> list[list[int]]:
        """`tokenize` of each partitioned input; an engine may share work between them."""
        return [self.tokenize(fragments, add_special=add_special) for fragments in inputs]

    def assemble(self, fragments: Sequence[bytes | int], *, add_special: bool,
                 encode_into: Callable[[bytes, list[int]], object]) -> list[int]:
        """The template of `tokenize`, each raw fragment (as `first_text` leaves it) given to `encode_into`."""
        out: list[int] = []
        if add_special:
            self.before(out)
        follows_special = True  # llama.cpp's is_prev_special starts true: the input start counts
        for fragment in fragments:
            if isinstance(fragment, int):
                out.append(fragment)
                follows_special = True
            else:
                encode_into(self.first_text(fragment) if follows_special else fragment, out)
                follows_special = False
        if add_special:
            self.after(out)
        return out

    def encode_into(self, fragment: bytes, out: list[int]) -> None:
        """Append the ids of one raw fragment to `out`."""
        raise NotImplementedError

    def first_text(self, fragment: bytes) -> bytes:
        """`fragment` as encoded when it starts the input or follows a special token."""
        return fragment

    def before(self, out: list[int]) -> None:
        """Append the specials that go first under `add_special` (none by default)."""

    def after(self, out: list[int]) -> None:
        """Append the specials that go last under `add_special` (none by default)."""

    def required(self, role: str) -> int:
        """The `role` id that `add_special` inserts; llama.cpp asserts it exists, we refuse."""
        token = self.vocab.special[role]
        if token < 0:
            name = role.upper()
            raise UnsupportedVocab(f"tokenize with add_special adds {name} but the vocabulary has no "
                                   f"{name} id: llama.cpp aborts here (GGML_ASSERT)")
        return token

    def piece(self, token: int) -> bytes:
        """The spelling of `token` as `token_to_piece(special=True)` gives it."""
        raise NotImplementedError

    def linefeed(self) -> int:
        """llama.cpp's `linefeed_id` for types whose loader tokenizes "\\n" (BPE, UGM, RWKV, ...)."""
        ids = self.tokenize([b"\n"], add_special=False)
        return ids[0] if ids else self.vocab.default_pad


class BosEosEngine(Engine):
    """An engine whose `add_special` adds BOS when `add_bos` and EOS when `add_eos` (SPM, BPE, UGM)."""

    def before(self, out: list[int]) -> None:
        if self.vocab.add_bos:
            out.append(self.required("bos"))

    def after(self, out: list[int]) -> None:
        if self.vocab.add_eos:
            out.append(self.required("eos"))
