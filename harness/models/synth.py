"""Synthetic GGUF vocabularies, built deterministically from the shipped ones.

llama.cpp ships no RWKV or PLaMo-2 vocabulary, and only a dozen of the ~90
`tokenizer.ggml.pre` names it accepts, so these builders derive realistic
files from the shipped vocabularies with our GGUF writer. The same shipped
file always gives byte-identical output (the golden records its sha256).

Families of recipes (`RECIPES`, name -> `Recipe`):

- ``rwkv-world``: GPT-2's tokens as raw bytes, escaped the way RWKV world
  vocabularies are (``repr(bytes)[2:-1]``), behind a CONTROL ``<s>`` and padded
  with UNUSED ``[PADn]`` tokens; eos 0 and the "\\n\\n" token as eot, as
  llama.cpp's converter writes them.
- ``plamo2``: llama-spm's pieces with ``▁`` turned back into spaces, Zipf-like
  log-probability scores, ``<|plamo:*|>`` specials, the 256 ``<0xNN>`` byte
  tokens and ``[PADn]`` tokens with score -1000, laid out as the converter does.
- ``pre-<name>``: every pre-tokenizer name llama.cpp accepts, on the shipped
  BPE vocabulary of its behaviour (`pre_base`: gpt-2 for the GPT-2 regex,
  llama-bpe for llama3, gemma-4 for the escaped-whitespace ones, qwen2 for the
  rest), cut down to its first `PRE_SWEEP_TOKENS` ordinary tokens (plus every
  special one) so that 91 goldens stay small.
- ``model-<name>``: the other `tokenizer.ggml.model` values (``none``,
  ``no_vocab``, ``hybriddna``, ``whitespace``, ``gemma4``, ``test``) and one
  llama.cpp does not know.
- ``sens-<name>``: vocabularies built to close the self-test's blind spots
  (`harness.models.synth_sensitivity`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from harness.models import gguf_writer
from tokenizer.attrs import TokenType
from tokenizer.gguf import reader as gguf
from tokenizer.gguf.constants import Keys, ValueType
from tokenizer.pretokenize.names import PRE_NAMES, resolve

from ..files.atomic import write_bytes_atomic
from . import synth_sensitivity
from .shipped import cache_dir
from .synth_base import (
    F32_ARRAY,
    I32_ARRAY,
    PRE_SWEEP_TOKENS,
    STR_ARRAY,
    Meta,
    Recipe,
    Types,
    cut,
    general,
    read_source,
)

SYNTH_COMMAND = "python -m harness synth"


def synthetic_dir() -> Path:
    return cache_dir() / "synthetic"


def synthetic_path(name: str) -> Path:
    return synthetic_dir() / f"{name}.gguf"


def build(name: str) -> bytes:
    """The bytes of synthetic vocabulary `name` (`KeyError` listing known names)."""
    recipe = recipe_for(name)
    meta, types = recipe.make(read_source(recipe.source))
    return gguf_writer.build(meta, types=types)


def write(name: str, directory: str | os.PathLike | None = None) -> Path:
    """Build `name` into `directory` (default: the cache's synthetic folder); returns the path."""
    folder = Path(directory) if directory is not None else synthetic_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.gguf"
    data = build(name)
    if not (path.is_file() and path.read_bytes() == data):
        write_bytes_atomic(path, data, "synthetic vocabulary")
    return path


def ensure(name: str) -> Path:
    """The cached file of `name`, built first if missing (`SetupError` if its source is)."""
    path = synthetic_path(name)
    return path if path.is_file() else write(name)


# GPT-2's architecture keys (as the shipped gpt-2 vocabulary has them): enough for
# llama.cpp's vocab_only load, so hand-made test vocabularies need no shipped file.
_SMALL_ARCH: tuple[tuple[str, object, ValueType], ...] = (
    (Keys.ARCHITECTURE, "gpt2", ValueType.STRING),
    (Keys.NAME, "custom", ValueType.STRING),
    ("gpt2.block_count", 12, ValueType.UINT32),
    ("gpt2.context_length", 1024, ValueType.UINT32),
    ("gpt2.embedding_length", 768, ValueType.UINT32),
    ("gpt2.feed_forward_length", 3072, ValueType.UINT32),
    ("gpt2.attention.head_count", 12, ValueType.UINT32),
    ("gpt2.attention.layer_norm_epsilon", np.float32(1e-5), ValueType.FLOAT32),
    ("general.file_type", 1, ValueType.UINT32),
)


def custom(tokens: Sequence[str | bytes], *, model: str, types: Sequence[int] | None = None,
           scores: Sequence[float] | None = None, extra: Meta | None = None) -> bytes:
    """A small hand-made vocabulary for tests, on GPT-2's architecture keys (no file needed).

    `types` default to NORMAL; `extra` adds or replaces keys (with `None` removing one).
    """
    meta: Meta = {key: value for key, value, _ in _SMALL_ARCH}
    key_types: Types = {key: (vtype, None) for key, _, vtype in _SMALL_ARCH}
    kinds = [int(TokenType.NORMAL)] * len(tokens) if types is None else [int(t) for t in types]
    meta |= {Keys.MODEL: model, Keys.TOKENS: list(tokens),
             Keys.TOKEN_TYPE: np.asarray(kinds, dtype="<i4")}
    key_types |= {Keys.TOKENS: STR_ARRAY, Keys.TOKEN_TYPE: I32_ARRAY}
    if scores is not None:
        meta[Keys.SCORES] = np.asarray(scores, dtype="<f4")
        key_types[Keys.SCORES] = F32_ARRAY
    for key, value in (extra or {}).items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    return gguf_writer.build(meta, types=key_types)


def recipe_for(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise KeyError(f"unknown synthetic vocabulary {name!r} (known: "
                       f"{', '.join(sorted(RECIPES))})") from None


# --- shared pieces ---------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character -> byte."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def gpt2_bytes(text: str) -> bytes:
    """The raw bytes a GPT-2 byte-level token text stands for."""
    table = _gpt2_byte_decoder()
    return bytes(table[ch] for ch in text)


def rwkv_escape(raw: bytes) -> str:
    """An RWKV world token text: the body of Python's bytes literal, as the converter writes it."""
    return repr(raw)[2:-1]


def _pad_to(tokens: list, types: list, multiple: int, *, scores: list | None = None) -> None:
    while len(tokens) % multiple:
        tokens.append(f"[PAD{len(tokens)}]")
        types.append(int(TokenType.UNUSED))
        if scores is not None:
            scores.append(-1000.0)


# --- RWKV ------------------------------------------------------------------------------------

def _rwkv_world(src: gguf.GGUFFile) -> tuple[Meta, Types]:
    meta, types = general(src, "rwkv-world")
    tokens, kinds = ["<s>"], [int(TokenType.CONTROL)]
    src_types = np.asarray(src.metadata[Keys.TOKEN_TYPE])
    for text, kind in zip(src.metadata[Keys.TOKENS], src_types):
        if kind == TokenType.NORMAL:
            tokens.append(rwkv_escape(gpt2_bytes(text)))
            kinds.append(int(TokenType.NORMAL))
    _pad_to(tokens, kinds, 64)
    meta |= {
        Keys.MODEL: "rwkv",
        Keys.TOKENS: tokens,
        Keys.TOKEN_TYPE: np.asarray(kinds, dtype="<i4"),
        Keys.BOS_ID: 0,
        Keys.EOS_ID: 0,
        Keys.EOT_ID: tokens.index(rwkv_escape(b"\n\n")),
    }
    types |= {Keys.TOKENS: STR_ARRAY, Keys.TOKEN_TYPE: I32_ARRAY}
    return meta, types


# --- PLaMo-2 ---------------------------------------------------------------------------------

PLAMO2_SPECIALS = (
    ("<|plamo:unk|>", TokenType.UNKNOWN),
    ("<|plamo:bos|>", TokenType.CONTROL),
    ("<|plamo:eos|>", TokenType.CONTROL),
    ("<|plamo:pad|>", TokenType.CONTROL),
    ("<|plamo:op|>", TokenType.CONTROL),
)


def _plamo2(src: gguf.GGUFFile) -> tuple[Meta, Types]:
    meta, types = general(src, "plamo2")
    tokens = [text for text, _ in PLAMO2_SPECIALS] + [f"<0x{b:02X}>" for b in range(256)]
    kinds = [int(kind) for _, kind in PLAMO2_SPECIALS] + [int(TokenType.BYTE)] * 256
    scores = [0.0] * len(tokens)
    src_types = np.asarray(src.metadata[Keys.TOKEN_TYPE])
    rank = 0
    for text, kind in zip(src.metadata[Keys.TOKENS], src_types):
        if kind != TokenType.NORMAL:
            continue
        tokens.append(text.replace("\u2581", " "))
        kinds.append(int(TokenType.NORMAL))
        scores.append(-1.0 - math.log(rank + 1))  # Zipf: log-probability falls with rank
        rank += 1
    _pad_to(tokens, kinds, 128, scores=scores)
    arch = meta.get(Keys.ARCHITECTURE)
    if f"{arch}.vocab_size" in meta:
        meta[f"{arch}.vocab_size"] = len(tokens)
    meta |= {
        Keys.MODEL: "plamo2",
        Keys.PRE: "default",
        Keys.TOKENS: tokens,
        Keys.SCORES: np.asarray(scores, dtype="<f4"),
        Keys.TOKEN_TYPE: np.asarray(kinds, dtype="<i4"),
        Keys.BOS_ID: 1,
        Keys.EOS_ID: 2,
        Keys.PAD_ID: 3,
        Keys.UNK_ID: 0,
        Keys.EOT_ID: 4,
        Keys.ADD_SPACE_PREFIX: False,
    }
    types |= {Keys.TOKENS: STR_ARRAY, Keys.SCORES: F32_ARRAY, Keys.TOKEN_TYPE: I32_ARRAY}
    return meta, types


# --- pre-tokenizer sweep ---------------------------------------------------------------------

# The shipped vocabulary each llama.cpp pre-tokenizer behaviour is put on.
_PRE_BASES = {
    "gpt2": "gpt-2",
    "gemma4": "gemma-4",
    "sarvam_moe": "gemma-4",
    "qwen2": "qwen2",
    "qwen35": "qwen2",
    "llama3": "llama-bpe",
}
_PRE_DEFAULT_BASE = "qwen2"


def pre_base(pre_name: str) -> str:
    """The shipped vocabulary that `pre-<pre_name>` is built on."""
    behaviour = PRE_NAMES[pre_name][0]
    return _PRE_BASES.get(behaviour, _PRE_DEFAULT_BASE)


def _pre_recipe(pre_name: str) -> Recipe:
    base = pre_base(pre_name)

    def make(src: gguf.GGUFFile) -> tuple[Meta, Types]:
        meta, types = general(src, f"pre-{pre_name}")
        meta |= cut(base) | {Keys.MODEL: "gpt2", Keys.PRE: pre_name}
        return meta, types | {Keys.MERGES: STR_ARRAY}

    return Recipe(f"pre-{pre_name}", base,
                  f"pre-tokenizer {pre_name!r} on {base} (first {PRE_SWEEP_TOKENS} tokens)", make)


# --- other model names -----------------------------------------------------------------------

def _model_recipe(model: str, source: str, summary: str,
                  extra: Callable[[gguf.GGUFFile, Meta], None] | None = None) -> Recipe:
    def make(src: gguf.GGUFFile) -> tuple[Meta, Types]:
        meta, types = general(src, f"model-{model}")
        meta |= cut(source) | {Keys.MODEL: model}
        if extra is not None:
            extra(src, meta)
        return meta, types | {Keys.MERGES: STR_ARRAY}

    return Recipe(f"model-{model}", source, summary, make)


def _no_vocab(model: str) -> Recipe:
    def make(src: gguf.GGUFFile) -> tuple[Meta, Types]:
        meta, types = general(src, f"model-{model}")
        meta[Keys.MODEL] = model
        return meta, types

    return Recipe(f"model-{model}", "gpt-2", f"tokenizer model {model!r}: no vocabulary", make)


DNA_MARKER = "\ue000"   # llama.cpp's suffix that keeps k-mer texts apart from BPE tokens


def _add_dna(src: gguf.GGUFFile, meta: Meta) -> None:
    """Append <dna>, </dna>, <oov> and every 6-mer of ACGT (with the marker)."""
    kmers = [""]
    for _ in range(6):
        kmers = [k + c for k in kmers for c in "ACGT"]
    added = ["<dna>", "</dna>", "<oov>"] + [k + DNA_MARKER for k in kmers]
    kinds = [int(TokenType.USER_DEFINED)] * 3 + [int(TokenType.NORMAL)] * len(kmers)
    meta[Keys.TOKENS] = list(meta[Keys.TOKENS]) + added
    meta[Keys.TOKEN_TYPE] = np.concatenate([meta[Keys.TOKEN_TYPE], np.asarray(kinds, "<i4")])


def _dna_on_gpt2(src: gguf.GGUFFile, meta: Meta) -> None:
    _add_dna(src, meta)
    meta[Keys.PRE] = "gpt-2"


def _set(**values) -> Callable[[gguf.GGUFFile, Meta], None]:
    keyed = {getattr(Keys, k.upper()): v for k, v in values.items()}
    return lambda src, meta: meta.update(keyed)


def _model_recipes() -> list[Recipe]:
    return [
        _no_vocab("none"),
        _no_vocab("no_vocab"),
        _model_recipe("hybriddna", "gpt-2", "BPE with DNA k-mers inside <dna>...</dna>",
                      _dna_on_gpt2),
        _model_recipe("whitespace", "gpt-2", "BPE over whitespace-separated words",
                      _set(pre="whitespace")),
        _model_recipe("gemma4", "gemma-4", "model gemma4 forces pre gemma4 over the file's pre",
                      _set(pre="qwen2")),
        _model_recipe("test", "gpt-2", "llama.cpp's hashing test tokenizer"),
        _model_recipe("bogus", "gpt-2", "a tokenizer model llama.cpp does not know"),
    ]


def _all_recipes() -> dict[str, Recipe]:
    recipes = [
        Recipe("rwkv-world", "gpt-2", "RWKV world layout over GPT-2's byte tokens", _rwkv_world),
        Recipe("plamo2", "llama-spm", "PLaMo-2 layout over llama-spm's pieces", _plamo2),
        *(_pre_recipe(name) for name in sorted(PRE_NAMES)),
        *_model_recipes(),
        *synth_sensitivity.recipes(),
    ]
    table: dict[str, Recipe] = {}
    for recipe in recipes:
        if recipe.name in table:
            raise ValueError(f"synthetic vocabulary {recipe.name!r} defined twice")
        table[recipe.name] = recipe
    return table


RECIPES: dict[str, Recipe] = _all_recipes()


def names(prefix: str = "") -> list[str]:
    """Synthetic vocabulary names (starting with `prefix`), sorted."""
    return sorted(n for n in RECIPES if n.startswith(prefix))


def pre_sweep_names() -> list[str]:
    return names("pre-")


def pre_sweep_aliases() -> list[str]:
    """The pre-sweep vocabularies that behave exactly as an earlier one (in name order): the same
    base vocabulary, and a pre name llama.cpp's load() gives the same behaviour and flags
    (`tokenizer.pretokenize.names.resolve`; e.g. `llama-v3` as `llama3`). 31 of the 91."""
    seen: set[tuple] = set()
    aliases = []
    for name in pre_sweep_names():
        pre = name.removeprefix("pre-")
        spec = resolve(pre, model="gpt2")
        key = (pre_base(pre), spec.pre_type, tuple(sorted(spec.overrides.items())), spec.no_default_bos,
               spec.merges_optional, spec.force_add_bos)
        if key in seen:
            aliases.append(name)
        seen.add(key)
    return aliases

