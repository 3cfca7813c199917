"""The vocabulary descriptor: what llama.cpp's loader makes of a file's tokenizer metadata.

`load_vocab(gguf_file)` reproduces `llama_vocab::impl::load` (pinned llama.cpp,
src/llama-vocab.cpp): model name -> vocabulary type, default special ids per
type, flags (model defaults, then the pre-tokenizer's, then the file's), token
texts, scores and attributes, the by-text overrides (`tokenizer.vocab_rules`),
the end-of-generation set, the special-token cache the partitioner walks, and
the strip attributes set by model name.

It is also the strict gate in front of the engines: whatever an engine relies on
is checked here, and a problem raises `GGUFError` (malformed metadata) or
`UnsupportedVocab` (well formed, but not reproducible or refused by llama.cpp)
naming the key, its byte offset and the token id. Where llama.cpp quietly
accepts something odd (a special id out of range, a score array longer than
the token list, a byte token spelled `<0x1FF>`), we refuse it and say so.

What an engine receives (`Engine.__init__(vocab)`), all indexed by token id:
`texts` (bytes, empty texts already replaced by llama.cpp's `[EMPTY_<id>]`),
`token_to_id`, `scores` (float32 values as floats), `attrs` (final
`llama_token_attr` bits) and `base_attrs` (the bits as they stood when llama.cpp
built its tokenizer object: token types only, before any by-text override;
tables built at construction must use these), `special` ids (-1 for none),
the flags, `merges` (BPE), `precompiled_charsmap` (UGM) and the raw `metadata`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from . import vocab_rules
from .attrs import TYPE_TO_ATTR, Attr
from .errors import GGUFError, UnsupportedVocab
from .gguf.constants import Keys, ValueType
from .gguf.reader import GGUFFile
from .pretokenize import names as pre_names

NULL = -1
INT32_MAX = 2**31 - 1
MAX_TOKEN_BYTES = INT32_MAX  # llama.cpp aborts on a piece this long (token_to_piece's int32 sizes)

# tokenizer.ggml.model -> (vocabulary type, default special ids) as load() sets them
MODELS: dict[str, tuple[str, dict[str, int]]] = {
    "llama": ("spm", {"bos": 1, "eos": 2, "unk": 0}),
    "bert": ("wpm", {"bos": 101, "eos": NULL, "unk": 100, "sep": 102, "pad": 0, "mask": 103}),
    "gpt2": ("bpe", {"bos": 11, "eos": 11, "unk": NULL}),
    "hybriddna": ("bpe", {"bos": 11, "eos": 11, "unk": NULL}),
    "whitespace": ("bpe", {"bos": 11, "eos": 11, "unk": NULL}),
    "gemma4": ("bpe", {"bos": NULL, "eos": NULL, "unk": NULL}),
    "t5": ("ugm", {"bos": NULL, "eos": 1, "unk": 2, "pad": 0}),
    "rwkv": ("rwkv", {"bos": NULL, "eos": NULL, "unk": NULL}),
    "plamo2": ("plamo2", {"bos": 1, "eos": 2, "unk": 0, "pad": 3}),
    "test": ("test", {"bos": NULL, "eos": NULL, "unk": NULL}),
    "no_vocab": ("none", {"bos": NULL, "eos": NULL, "unk": NULL}),
    "none": ("none", {"bos": NULL, "eos": NULL, "unk": NULL}),
}

ROLES = ("bos", "eos", "eot", "eom", "unk", "sep", "pad", "mask",
         "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep")

# (role, key) in the order load() reads them; the deprecated keys come last and win
SPECIAL_KEYS = (
    ("bos", Keys.BOS_ID), ("eos", Keys.EOS_ID), ("eot", Keys.EOT_ID), ("eom", Keys.EOM_ID),
    ("unk", Keys.UNK_ID), ("sep", Keys.SEP_ID), ("pad", Keys.PAD_ID), ("mask", Keys.MASK_ID),
    ("fim_pre", Keys.FIM_PRE_ID), ("fim_suf", Keys.FIM_SUF_ID), ("fim_mid", Keys.FIM_MID_ID),
    ("fim_pad", Keys.FIM_PAD_ID), ("fim_rep", Keys.FIM_REP_ID), ("fim_sep", Keys.FIM_SEP_ID),
    ("fim_pre", "tokenizer.ggml.prefix_token_id"), ("fim_suf", "tokenizer.ggml.suffix_token_id"),
    ("fim_mid", "tokenizer.ggml.middle_token_id"),
)

FLAGS = ("add_space_prefix", "add_bos", "add_eos", "add_sep", "ignore_merges", "clean_spaces",
         "remove_extra_whitespaces", "escape_whitespaces", "treat_whitespace_as_suffix")

# vocabulary types whose byte tokens llama.cpp parses as "<0xXX>"
_HEX_BYTE_TYPES = frozenset({"spm", "ugm", "bpe"})


@dataclass(frozen=True)
class Vocab:
    """Everything the engines and the shared code need, validated. See the module docstring."""

    model: str
    vocab_type: str
    pre: str
    pre_type: str
    texts: tuple[bytes, ...]
    token_to_id: Mapping[bytes, int]
    scores: tuple[float, ...]
    attrs: tuple[int, ...]
    base_attrs: tuple[int, ...]
    special: Mapping[str, int]
    default_pad: int
    default_unk: int  # the type's default unk id, which llama.cpp uses while tokenizing "\n" at load
    linefeed: int | None
    eog: frozenset[int]
    special_tokens: tuple[int, ...]
    merges: Merges
    precompiled_charsmap: bytes | None
    normalizer_lowercase: bool
    normalizer_strip_accents: bool
    n_token_types: int
    suppress_tokens: tuple[int, ...]
    max_token_len: int
    add_space_prefix: bool = False
    add_bos: bool = False
    add_eos: bool = False
    add_sep: bool = False
    ignore_merges: bool = False
    clean_spaces: bool = False
    remove_extra_whitespaces: bool = False
    escape_whitespaces: bool = True
    treat_whitespace_as_suffix: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    where: Callable[[str], str] = field(default=repr, repr=False, compare=False)

    @property
    def n_tokens(self) -> int:
        return len(self.texts)

    def byte_token(self, byte: int) -> int | None:
        """llama.cpp's `byte_to_token` for SPM/UGM: `<0xXX>`, else the raw byte's token."""
        found = self.token_to_id.get(b"<0x%02X>" % byte)
        return found if found is not None else self.token_to_id.get(bytes((byte,)))


def model_name(gguf_file: GGUFFile) -> str:
    """`tokenizer.ggml.model`, checked: missing is a `GGUFError`, a name llama.cpp refuses `UnsupportedVocab`."""
    key = Keys.MODEL
    have = gguf_file.types.get(key, (None, None))
    if key not in gguf_file.metadata:
        raise GGUFError(f"{key} is missing: llama.cpp cannot load a vocabulary without it")
    if have[0] != ValueType.STRING:
        raise GGUFError(f"{gguf_file.where(key)}: has type {_type_name(have)}, llama.cpp requires STRING")
    model = gguf_file.metadata[key]
    if model not in MODELS:
        raise UnsupportedVocab(f"{gguf_file.where(key)} = {model!r}: llama.cpp refuses it "
                               f"(\"unknown tokenizer\"); known: {', '.join(sorted(MODELS))}")
    return str(model)


def load_vocab(gguf_file: GGUFFile) -> Vocab:
    """The `Vocab` llama.cpp's loader builds from `gguf_file`, or a precise refusal."""
    d = _Draft(gguf_file)
    d.read_model()
    d.read_tokens()
    d.compute_linefeed()
    d.read_special_ids()
    d.read_late_flags()
    eog, cache = vocab_rules.apply(d.rule_input())
    d.check_byte_tokens()
    return d.finish(eog, cache)


class _Draft:
    """Mutable state while loading; `finish()` freezes it into a `Vocab`."""

    def __init__(self, f: GGUFFile) -> None:
        self.f = f
        self.flags: dict[str, bool] = {}
        self.special: dict[str, int] = dict.fromkeys(ROLES, NULL)
        self.merges = Merges()
        self.charsmap: bytes | None = None
        self.lowercase = True
        self.strip_accents = True

    # -- typed metadata access -------------------------------------------------
    def refuse(self, message: str) -> NoReturn:
        raise UnsupportedVocab(message)

    def bad(self, key: str, message: str) -> GGUFError:
        return GGUFError(f"{self.f.where(key)}: {message}")

    def get(self, key: str, vtype: ValueType, elem: ValueType | None = None) -> Any:
        """The value of `key` if present, checked to have llama.cpp's required type."""
        if key not in self.f.metadata:
            return None
        have = self.f.types.get(key, (None, None))
        want = (vtype, elem)
        if have[0] != vtype or (elem is not None and have[1] != elem):
            raise self.bad(key, f"has type {_type_name(have)}, llama.cpp requires {_type_name(want)}")
        return self.f.metadata[key]

    def text_key(self, key: str) -> bytes:
        """A string key's exact bytes ("" when absent); llama.cpp refuses any other type."""
        value = self.get(key, ValueType.STRING)
        return b"" if value is None else value.encode("utf-8", "surrogateescape")

    # -- the steps of load(), in order -------------------------------------------
    def read_model(self) -> None:
        model = model_name(self.f)
        self.model = model
        self.vocab_type, defaults = MODELS[model]
        self.default_unk = defaults.get("unk", NULL)
        self.special.update(defaults)
        pre = self.get(Keys.PRE, ValueType.STRING)
        spec = pre_names.resolve(pre, model=model)
        # llama.cpp keeps the file's string ("" when absent); gemma4 forces its own
        self.pre = "gemma4" if model == "gemma4" else (pre or "")
        self.pre_type, self.force_add_bos = spec.pre_type, spec.force_add_bos
        self.flags.update(spec.overrides)
        if spec.no_default_bos:
            self.special["bos"] = NULL
        if spec.pre_type == "whitespace":
            self.lowercase = False
        if self.vocab_type == "bpe":
            self.read_merges(optional=spec.merges_optional)
        if self.vocab_type == "ugm":
            self.read_charsmap()
        self.n_token_types = self.get(Keys.TOKEN_TYPE_COUNT, ValueType.UINT32) or 0
        for flag, key in (("add_space_prefix", Keys.ADD_SPACE_PREFIX),
                          ("remove_extra_whitespaces", Keys.REMOVE_EXTRA_WS)):
            value = self.get(key, ValueType.BOOL)
            if value is not None:
                self.flags[flag] = bool(value)

    def read_merges(self, *, optional: bool) -> None:
        merges = self.get(Keys.MERGES, ValueType.ARRAY, ValueType.STRING)
        if merges is None:
            if optional:
                return
            raise GGUFError(f"{Keys.MERGES} is missing: llama.cpp refuses a BPE vocabulary without merges")
        self.merges = _split_merges(merges, self.f.raw_strings.get(Keys.MERGES))

    def read_charsmap(self) -> None:
        key = Keys.PRECOMPILED_CHARSMAP
        if key not in self.f.metadata:
            return
        have = self.f.types.get(key, (None, None))
        if have[0] != ValueType.ARRAY or have[1] not in (ValueType.INT8, ValueType.UINT8):
            raise self.bad(key, f"has type {_type_name(have)}, llama.cpp requires an int8/uint8 array")
        blob = np.asarray(self.f.metadata[key]).astype(np.uint8).tobytes()
        if len(blob) < 4:
            raise self.bad(key, f"is {len(blob)} bytes, shorter than its 4-byte header")
        size = int.from_bytes(blob[:4], "little")
        if size + 4 >= len(blob):
            raise self.bad(key, f"header says {size} bytes of trie, but only {len(blob) - 4} follow")
        self.charsmap = blob

    def read_tokens(self) -> None:
        tokens = self.get(Keys.TOKENS, ValueType.ARRAY, ValueType.STRING)
        if tokens is None:
            raise GGUFError(f"{Keys.TOKENS} is missing: llama.cpp cannot load a vocabulary without it")
        n = len(tokens)
        if n > INT32_MAX:
            raise self.bad(Keys.TOKENS, f"has {n} tokens; token ids are int32")
        self.texts = _token_texts(self, tokens, self.f.raw_strings.get(Keys.TOKENS))
        self.token_to_id = _unique_ids(self, self.texts)
        self.scores = self._scores(n)
        self.attrs = self._attrs(n)
        self.base_attrs = tuple(self.attrs)
        self.max_token_len = max(map(len, self.texts), default=0)

    def _scores(self, n: int) -> tuple[float, ...]:
        key = Keys.SCORES
        if key not in self.f.metadata:
            return (0.0,) * n
        have = self.f.types.get(key, (None, None))
        if have[0] != ValueType.ARRAY or have[1] not in (ValueType.FLOAT32, ValueType.INT32):
            raise self.bad(key, f"has type {_type_name(have)}, llama.cpp requires a float32 (or int32) array")
        values = np.asarray(self.f.metadata[key])
        self._same_length(key, len(values), n)
        return tuple(values.astype(np.float32).tolist())

    def _attrs(self, n: int) -> list[int]:
        types = self.get(Keys.TOKEN_TYPE, ValueType.ARRAY, ValueType.INT32)
        if types is None:
            return [int(Attr.NORMAL)] * n
        self._same_length(Keys.TOKEN_TYPE, len(types), n)
        types = np.asarray(types, dtype=np.int64)
        table = np.zeros(len(TYPE_TO_ATTR), dtype=np.int64)  # type values are 0..6
        for k, v in TYPE_TO_ATTR.items():
            table[int(k)] = int(v)
        known = (types >= 0) & (types < len(table))
        attrs: list[int] = np.where(known, table[np.where(known, types, 0)], 0).tolist()
        return attrs

    def _same_length(self, key: str, have: int, n: int) -> None:
        if have != n:
            extra = " (llama.cpp ignores the extra entries; we refuse the mismatch)" if have > n else ""
            raise self.bad(key, f"has {have} entries but {Keys.TOKENS} has {n}{extra}")

    def compute_linefeed(self) -> None:
        self.default_pad = self.special["pad"]
        self.linefeed: int | None
        if self.vocab_type == "spm":
            found = self.token_to_id.get(b"<0x0A>", self.token_to_id.get(b"\n"))
            self.linefeed = found if found is not None else self.default_pad
        elif self.vocab_type == "wpm":
            self.linefeed = self.default_pad
        else:
            self.linefeed = None  # the engine tokenizes "\n", as llama.cpp does

    def read_special_ids(self) -> None:
        n = len(self.texts)
        for role, key in SPECIAL_KEYS:
            if self.special[role] >= n:
                self.special[role] = NULL  # a default beyond a small vocabulary is dropped
            value = self.get(key, ValueType.UINT32)
            if value is None:
                continue
            if value >= n:
                raise self.bad(key, f"= {value} is outside the vocabulary of {n} tokens "
                                    "(llama.cpp warns and keeps the default; we refuse)")
            self.special[role] = int(value)

    def read_late_flags(self) -> None:
        for flag, key in (("add_bos", Keys.ADD_BOS), ("add_eos", Keys.ADD_EOS), ("add_sep", Keys.ADD_SEP)):
            value = self.get(key, ValueType.BOOL)
            if value is not None:
                self.flags[flag] = bool(value)
        if self.force_add_bos:
            self.flags["add_bos"] = True
        lower = self.get(Keys.NORMALIZER_LOWERCASE, ValueType.BOOL)
        if lower is not None:
            self.lowercase = bool(lower)
        self.strip_accents = self.lowercase
        strip = self.get(Keys.NORMALIZER_STRIP_ACCENTS, ValueType.BOOL)
        if strip is not None:
            self.strip_accents = bool(strip)
        suppress = self.get("tokenizer.ggml.suppress_tokens", ValueType.ARRAY, ValueType.INT32)
        ids = [] if suppress is None else np.asarray(suppress).tolist()
        self.suppress = tuple(i for i in ids if 0 <= i < len(self.texts))

    def rule_input(self) -> vocab_rules.RuleInput:
        """The state the by-text rules read and change; `special` and `attrs` are shared, not copied."""
        return vocab_rules.RuleInput(
            texts=self.texts, token_to_id=self.token_to_id, special=self.special, attrs=self.attrs,
            name=self.text_key("general.name"), pre=self.text_key(Keys.PRE),
            arch=self.text_key("general.architecture"))

    def check_byte_tokens(self) -> None:
        """Byte tokens whose piece llama.cpp would parse (or abort on) must be `<0xXX>`."""
        shown = int(Attr.UNKNOWN | Attr.CONTROL | Attr.USER_DEFINED | Attr.NORMAL)
        attrs = np.asarray(self.attrs, dtype=np.int64)
        for i in np.nonzero((attrs & int(Attr.BYTE) != 0) & (attrs & shown == 0))[0].tolist():
            if self.vocab_type == "wpm":
                self.refuse(f"token {i} is a byte token in a WPM vocabulary: llama.cpp aborts loading it")
            if self.vocab_type in _HEX_BYTE_TYPES and not _is_hex_byte(self.texts[i]):
                raise self.bad(Keys.TOKEN_TYPE, f"token {i} has type BYTE but text {self.texts[i]!r}, "
                                                "not <0xXX> (llama.cpp would misread it)")

    def final_texts(self) -> tuple[bytes, ...]:
        if self.model == "hybriddna":
            return vocab_rules.bare_dna_kmers(self.texts, self.token_to_id)
        return self.texts

    def finish(self, eog: set[int], cache: tuple[int, ...]) -> Vocab:
        flags = {k: self.flags.get(k, False) for k in FLAGS}
        flags["escape_whitespaces"] = self.flags.get("escape_whitespaces", True)
        return Vocab(
            model=self.model, vocab_type=self.vocab_type, pre=self.pre, pre_type=self.pre_type,
            texts=self.final_texts(), token_to_id=self.token_to_id, scores=self.scores,
            attrs=tuple(self.attrs), base_attrs=self.base_attrs, special=dict(self.special),
            default_pad=self.default_pad, default_unk=self.default_unk, linefeed=self.linefeed, eog=frozenset(eog),
            special_tokens=cache, merges=self.merges, precompiled_charsmap=self.charsmap,
            normalizer_lowercase=self.lowercase, normalizer_strip_accents=self.strip_accents,
            n_token_types=int(self.n_token_types), suppress_tokens=self.suppress,
            max_token_len=self.max_token_len, metadata=self.f.metadata, where=self.f.where,
            **flags,
        )


def _type_name(t: tuple[ValueType | None, ValueType | None]) -> str:
    vtype, elem = t
    if vtype is None:
        return "?"
    if vtype == ValueType.ARRAY:
        return f"array of {elem.name if elem is not None else '?'}"
    return str(vtype.name)


class Merges(Sequence[tuple[bytes, bytes]]):
    """The merges as llama.cpp splits them, (left, right) by rank.

    When every merge holds exactly one space, not at its start, and no NUL (all
    shipped vocabularies), they are kept as `joined`: their exact bytes joined
    by NUL, which the BPE engine reads with numpy. The pairs are split from it
    only when asked for (`pairs`, indexing, iterating).
    """

    __slots__ = ("_count", "_pairs", "joined")

    def __init__(self, pairs: Sequence[tuple[bytes, bytes]] = (), *, joined: bytes | None = None,
                 count: int = 0) -> None:
        self.joined = joined if joined is not None and count else None
        self._pairs: tuple[tuple[bytes, bytes], ...] | None = None if self.joined else tuple(pairs)
        self._count = count if self.joined else len(pairs)

    @property
    def pairs(self) -> tuple[tuple[bytes, bytes], ...]:
        if self._pairs is None:
            assert self.joined is not None
            parts = self.joined.replace(b"\x00", b" ").split(b" ")
            self._pairs = tuple(zip(parts[0::2], parts[1::2], strict=True))
        return self._pairs

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):  # type: ignore[no-untyped-def]  # int or slice, as a tuple's
        return self.pairs[i]

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.pairs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Merges) and self.joined is not None and other.joined is not None:
            return self.joined == other.joined
        return isinstance(other, Sequence) and self.pairs == tuple(other)

    def __hash__(self) -> int:
        return hash(self.pairs)

    def __repr__(self) -> str:
        return f"<Merges of {len(self)}>"


# every byte but NUL and space: deleting them leaves a joined merge list's separators
_NOT_SEPARATOR = bytes(b for b in range(256) if b not in (0, 0x20))
# one merge per NUL-separated record: first part (at least one byte), space, second part
_MERGE_RECORD = re.compile(rb"([^\x00][^ \x00]*) ([^\x00]*)(?:\x00|\Z)")


def _split_merges(merges: Sequence[str], joined: bytes | None = None) -> Merges:
    """llama.cpp splits each merge at the first space after position 0; no space gives ("", "").

    `joined` is the merges' exact bytes joined by NUL when the reader has them
    (`GGUFFile.raw_strings`); otherwise they are joined and encoded here.
    """
    if joined is None:
        joined = "\x00".join(merges).encode("utf-8", "surrogateescape")
    n = len(merges)
    if n and joined.translate(None, _NOT_SEPARATOR) == b" \x00" * (n - 1) + b" " and (
            not joined.startswith(b" ") and b"\x00 " not in joined):
        # Each merge holds one space, not at its start, and no NUL: the engine cuts them itself.
        return Merges(joined=joined, count=n)
    if joined.count(b"\x00") == n - 1:  # no merge holds a NUL itself
        pairs = _MERGE_RECORD.findall(joined)
        if len(pairs) == n:  # every record had its space: the regex is exact
            return Merges(pairs)
    out: list[tuple[bytes, bytes]] = []
    append = out.append
    for m in merges:
        if m[:1] == " ":
            pos = m.find(" ", 1)
            a, b = (m[:pos], m[pos + 1:]) if pos > 0 else ("", "")
        else:
            a, sep, b = m.partition(" ")
            if not sep:
                a = ""
        append((a.encode("utf-8", "surrogateescape"), b.encode("utf-8", "surrogateescape")))
    return Merges(out)


def _token_texts(d: _Draft, tokens: Sequence[str], joined: bytes | None) -> tuple[bytes, ...]:
    # the reader's joined bytes hold no NUL inside a token: one split gives them all
    texts = _encode_all(tokens) if joined is None else joined.split(b"\x00")
    if not all(texts):
        for i, t in enumerate(texts):
            if not t:
                texts[i] = b"[EMPTY_%d]" % i  # llama.cpp's stand-in for an empty token
    # (all of them together shorter than the limit: no need to look at each)
    if (joined is None or len(joined) >= MAX_TOKEN_BYTES) and max(map(len, texts), default=0) >= MAX_TOKEN_BYTES:
        i = next(i for i, t in enumerate(texts) if len(t) >= MAX_TOKEN_BYTES)
        raise d.bad(Keys.TOKENS, f"token {i} is {len(texts[i])} bytes: llama.cpp aborts on "
                                 "pieces beyond the int32 limit")
    return tuple(texts)


def _encode_all(tokens: Sequence[str]) -> list[bytes]:
    """Each token's bytes (surrogateescape), in one `encode` when no token holds a NUL."""
    joined = "\x00".join(tokens)
    if tokens and joined.count("\x00") == len(tokens) - 1:
        return joined.encode("utf-8", "surrogateescape").split(b"\x00")
    return [s.encode("utf-8", "surrogateescape") for s in tokens]


def _unique_ids(d: _Draft, texts: tuple[bytes, ...]) -> dict[bytes, int]:
    ids = dict(zip(texts, range(len(texts)), strict=True))  # a later duplicate wins, as below
    if len(ids) != len(texts):
        first: dict[bytes, int] = {}
        for i, t in enumerate(texts):
            if t in first:
                raise d.bad(Keys.TOKENS, f"tokens {first[t]} and {i} have the same text {t!r} "
                                         "(llama.cpp aborts: token_to_id size != id_to_token size)")
            first[t] = i
    return ids


def _is_hex_byte(text: bytes) -> bool:
    return vocab_rules.hex_byte(text) is not None


__all__ = ["MODELS", "NULL", "ROLES", "Attr", "Merges", "Vocab", "load_vocab"]
