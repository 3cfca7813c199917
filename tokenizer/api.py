"""`Tokenizer`: the public API, mirroring llama.cpp's vocabulary functions.

    >>> tok = Tokenizer.from_gguf("ggml-vocab-llama-spm.gguf")
    >>> tok.tokenize("Hello world", add_special=True, parse_special=False)
    [1, 15043, 3186]
    >>> tok.detokenize([15043, 3186], remove_special=True, unparse_special=False)
    b'Hello world'
    >>> tok.detokenize([1, 15043, 3186], remove_special=True, unparse_special=False)
    b' Hello world'

(The second keeps its space: llama.cpp strips the space prefix only when no BOS
was removed in front of it.)

Semantics are those of `llama_tokenize`, `llama_detokenize`,
`llama_token_to_piece` and the `llama_vocab_*` getters of the pinned
llama.cpp. `str` input is encoded as UTF-8; `bytes` are used as they are
(invalid UTF-8 included); a `str` holding lone surrogates U+DC80..U+DCFF stands for
those raw bytes (surrogateescape, as `tokenizer.gguf.reader` reads them). Ids outside the
vocabulary raise `InvalidToken`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from . import pieces
from .attrs import Attr
from .engines import Engine, engine_for
from .engines.base import collector_paused
from .errors import UnsupportedVocab
from .gguf import reader as gguf
from .special import Partitioner
from .vocab import MODELS, ROLES, Vocab, load_vocab, model_name


class Tokenizer:
    """A GGUF vocabulary with llama.cpp's tokenize/detokenize behaviour."""

    #: Everything llama.cpp's tokenizer API offers, so a parity check compares all of it
    #: (the engine contract of docs/engine-contract.md; nothing is left unchecked).
    capabilities: ClassVar[tuple[str, ...]] = (
        "tokenize", "bytes_input", "detokenize", "token_to_piece", "token_text", "token_score",
        "token_attr", "vocab_info", "specials", "is_eog", "is_control")

    def __init__(self, vocab: Vocab, engine: Engine) -> None:
        self.vocab = vocab
        self.engine = engine
        self._piece = _cached_pieces(engine)
        self._tables = {special: pieces.PieceTable(vocab, self._piece, special=special) for special in (False, True)}
        self._nl = vocab.linefeed if vocab.linefeed is not None else engine.linefeed()
        self._specials = Partitioner(vocab)

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """Load a vocabulary: `GGUFError` for a bad file, `UnsupportedVocab` for what we refuse.

        The one place an engine is looked up: by the type the model name gives,
        before anything else is read, so a type we have no engine for is
        refused as such.
        """
        with collector_paused():  # a load's hundreds of thousands of objects, none in a cycle
            f = gguf.read(path, lazy_strings=True)  # token texts and merges stay bytes
            model = model_name(f)
            try:
                engine = engine_for(MODELS[model][0])
            except UnsupportedVocab as e:
                raise UnsupportedVocab(f"tokenizer.ggml.model {model!r}: {e}") from None
            vocab = load_vocab(f)
            return cls(vocab, engine(vocab))

    # -- llama_tokenize / llama_detokenize / llama_token_to_piece ----------------
    def tokenize(self, text: str | bytes, *, add_special: bool, parse_special: bool) -> list[int]:
        """Token ids for `text`, as `llama_tokenize(text, add_special, parse_special)`."""
        fragments = self._specials.partition(_as_bytes(text), parse_special=parse_special)
        return self.engine.tokenize(fragments, add_special=add_special)

    def tokenize_batch(self, texts: Sequence[str | bytes], *, add_special: bool,
                       parse_special: bool) -> list[list[int]]:
        """`[tokenize(t, ...) for t in texts]`, faster: the engine shares the work between the texts.

        The ids are those `tokenize` gives each text (BPE merges the words new to its
        cache once for the whole batch); an input `tokenize` refuses makes the call raise.
        """
        inputs = [self._specials.partition(_as_bytes(text), parse_special=parse_special) for text in texts]
        with collector_paused():  # the words of a whole batch, none in a cycle
            return self.engine.tokenize_batch(inputs, add_special=add_special)

    def detokenize(self, ids: Sequence[int], *, remove_special: bool, unparse_special: bool) -> bytes:
        """The bytes of `ids`, as `llama_detokenize(ids, remove_special, unparse_special)`."""
        return pieces.detokenize(self.vocab, self._tables, ids, remove_special=remove_special,
                                 unparse_special=unparse_special)

    def token_to_piece(self, token: int, *, lstrip: int = 0, special: bool) -> bytes:
        """The bytes of one token, as `llama_token_to_piece(token, lstrip, special)`."""
        return pieces.token_to_piece(self.vocab, self._piece, token, lstrip=lstrip, special=special)

    # -- the vocabulary ------------------------------------------------------------
    @property
    def n_tokens(self) -> int:
        return len(self.vocab.texts)

    @property
    def vocab_type(self) -> str:
        return self.vocab.vocab_type

    @property
    def pre(self) -> str:
        return self.vocab.pre

    def token_text(self, token: int) -> bytes:
        """llama_vocab_get_text: a C string, so the text ends at an embedded NUL."""
        pieces.check_token(self.vocab, token)
        return self.vocab.texts[token].split(b"\0", 1)[0]

    def token_score(self, token: int) -> float:
        pieces.check_token(self.vocab, token)
        return self.vocab.scores[token]

    def token_attr(self, token: int) -> int:
        pieces.check_token(self.vocab, token)
        return self.vocab.attrs[token]

    def is_eog(self, token: int) -> bool:
        return token in self.vocab.eog

    def is_control(self, token: int) -> bool:
        pieces.check_token(self.vocab, token)
        return bool(self.vocab.attrs[token] & Attr.CONTROL)

    @property
    def nl(self) -> int | None:
        return None if self._nl is None or self._nl < 0 else self._nl

    @property
    def add_bos(self) -> bool:
        return self.vocab.add_bos

    @property
    def add_eos(self) -> bool:
        return self.vocab.add_eos

    @property
    def add_sep(self) -> bool:
        return self.vocab.add_sep

    # -- chat templates (tokenizer.chat.render) ----------------------------------------------
    @property
    def chat_template(self) -> str | None:
        """The GGUF's `tokenizer.chat_template`, None when it has none."""
        from .chat import render as chat  # late: jinja2 loads only when chat templates are used
        return chat.chat_template(self.vocab.metadata)

    def chat_template_variant(self, name: str) -> str | None:
        """A named template, `tokenizer.chat_template.<name>` (e.g. "tool_use")."""
        from .chat import render as chat
        return chat.chat_template(self.vocab.metadata, name)

    def apply_chat_template(self, messages: Sequence[Any], *, add_generation_prompt: bool = True,
                            tools: Sequence[Any] | None = None, template: str | None = None,
                            **variables: Any) -> str:
        """The prompt llama-server renders for `messages` (see `tokenizer.chat.render`).

        `template` replaces the GGUF's template (as llama-server's `--chat-template-file`);
        `now` (seconds since the epoch) fixes the clock that `strftime_now` and `date_string`
        read; other keywords become template variables (`chat_template_kwargs`).
        Raises `chat.TemplateRaised` when the template refuses the conversation,
        `chat.ChatTemplateError` when it fails, `chat.ChatBudgetExceeded` past its budget.
        """
        from .chat import render as chat
        source = template
        if source is None:
            tool_use = self.chat_template_variant("tool_use")
            source = tool_use if tools and tool_use else self.chat_template
            source = source or tool_use or ""
        return chat.apply_template(
            source, messages, bos_token=chat.special_text(self, "bos"),
            eos_token=chat.special_text(self, "eos"), add_bos=self.add_bos, add_eos=self.add_eos,
            add_generation_prompt=add_generation_prompt, tools=tools, **variables)

    def encode_chat(self, messages: Sequence[Any], **options: Any) -> list[int]:
        """The ids llama-server feeds the model: the prompt tokenized with add_special and parse_special."""
        text = self.apply_chat_template(messages, **options)
        return self.tokenize(text, add_special=True, parse_special=True)

    def count_tokens(self, messages: Sequence[Any], **options: Any) -> int:
        """len(encode_chat(messages, ...))."""
        return len(self.encode_chat(messages, **options))

    def __repr__(self) -> str:
        v = self.vocab
        return f"<Tokenizer {v.vocab_type} model={v.model!r} pre={v.pre!r} n_tokens={len(v.texts)}>"


def _as_bytes(text: str | bytes) -> bytes:
    """The input as bytes: `str` as UTF-8 (lone surrogates U+DC80..U+DCFF as their raw bytes)."""
    if isinstance(text, str):
        return text.encode("utf-8", "surrogateescape")  # as the reader and the oracle do
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"tokenize() takes str or bytes, not {type(text).__name__}")


def _special_getter(role: str) -> property:
    def get(self: Tokenizer) -> int | None:
        token = self.vocab.special[role]
        return None if token < 0 else token

    get.__doc__ = f"llama_vocab_{role}: the {role} id, None where llama.cpp reports -1."
    return property(get)


for _role in ROLES:
    setattr(Tokenizer, _role, _special_getter(_role))


def _cached_pieces(engine: Engine) -> Callable[[int], bytes]:
    """`engine.piece`, each token's spelling computed once (a closure, not a method: the
    piece tables hold it, and a bound method would tie the tokenizer into a cycle)."""
    # a dict, not a list of n_tokens Nones: every pass of the cyclic collector walks a list
    # (16 ms of a full collection on nomic-bert-moe's 250,048), a dict of bytes not at all
    store: dict[int, bytes] = {}

    def piece(token: int) -> bytes:
        cached = store.get(token)
        if cached is None:
            cached = store[token] = engine.piece(token)
        return cached
    return piece
