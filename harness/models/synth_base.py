"""The building blocks every synthetic recipe uses (`harness.models.synth`, `harness.models.synth_sensitivity`).

A `Recipe` names a synthetic vocabulary, the shipped vocabulary it is made from
and the function that makes its metadata; `source` reads that shipped file
(cached); `general` and `tokenizer_keys` copy its two halves of metadata; and
`cut_bpe` / `cut` give a BPE vocabulary cut down to its first ordinary tokens,
as the `pre-<name>` sweep and the sensitivity family use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from tokenizer.attrs import TokenType
from tokenizer.gguf import reader as gguf
from tokenizer.gguf.constants import Keys, ValueType

from .shipped import shipped_path

PRE_SWEEP_TOKENS = 8192   # ordinary tokens kept in each pre-<name> vocabulary
PRE_SWEEP_CHARS = 1024    # ... plus this many single-character tokens beyond them
Meta = dict[str, Any]  # GGUF metadata: key -> value as tokenizer.gguf.reader reads it
Types = dict[str, tuple[ValueType, ValueType | None]]

STR_ARRAY = (ValueType.ARRAY, ValueType.STRING)
I32_ARRAY = (ValueType.ARRAY, ValueType.INT32)
F32_ARRAY = (ValueType.ARRAY, ValueType.FLOAT32)


@dataclass(frozen=True)
class Recipe:
    """How to make one synthetic vocabulary from one shipped vocabulary."""

    name: str
    source: str
    summary: str
    make: Callable[[gguf.GGUFFile], tuple[Meta, Types]]


@lru_cache(maxsize=4)
def read_source(name: str) -> gguf.GGUFFile:
    return gguf.read(shipped_path(name))


def general(src: gguf.GGUFFile, name: str) -> tuple[Meta, Types]:
    """The source's non-tokenizer keys (architecture and hyper-parameters), renamed."""
    meta = {k: v for k, v in src.metadata.items() if not k.startswith("tokenizer.")}
    meta[Keys.NAME] = name
    return meta, dict(src.types)


def tokenizer_keys(src: gguf.GGUFFile) -> Meta:
    return {k: v for k, v in src.metadata.items() if k.startswith("tokenizer.")}


# --- cut-down BPE bases ----------------------------------------------------------------------

ID_KEYS = tuple(v for k, v in vars(Keys).items() if k.endswith("_ID"))


def cut_bpe(src: gguf.GGUFFile, keep: int) -> Meta:
    """The source's tokenizer keys with only its first `keep` ordinary tokens.

    SentencePiece-style vocabularies list single characters last, so the most
    frequent `PRE_SWEEP_CHARS` of those stay as well. Special (non-NORMAL) tokens all
    stay, renumbered after the ordinary ones; a merge stays when both halves and the
    result stay. Special-id keys follow their token; one whose token is dropped is
    dropped too.
    """
    meta = tokenizer_keys(src)
    texts = src.metadata[Keys.TOKENS]
    kinds = np.asarray(src.metadata[Keys.TOKEN_TYPE])
    ordinary = [i for i in range(len(texts)) if kinds[i] == TokenType.NORMAL]
    chars = [i for i in ordinary[keep:] if len(texts[i]) == 1][:PRE_SWEEP_CHARS]
    kept = ordinary[:keep] + chars + [i for i in range(len(texts)) if kinds[i] != TokenType.NORMAL]
    new_id = {old: new for new, old in enumerate(kept)}
    tokens = [texts[i] for i in kept]
    present = set(tokens)
    merges = [m for m in src.metadata.get(Keys.MERGES, []) if _merge_kept(m, present)]
    meta |= {
        Keys.TOKENS: tokens,
        Keys.TOKEN_TYPE: np.asarray([kinds[i] for i in kept], dtype="<i4"),
        Keys.MERGES: merges,
    }
    if Keys.SCORES in meta:
        meta[Keys.SCORES] = np.asarray(src.metadata[Keys.SCORES])[kept].astype("<f4")
    for key in ID_KEYS:
        if key in meta:
            old = int(meta[key])
            if old in new_id:
                meta[key] = new_id[old]
            else:
                del meta[key]
    return meta


def _merge_kept(merge: str, present: set[str]) -> bool:
    left, sep, right = merge.partition(" ")
    return bool(sep) and left in present and right in present and left + right in present


@lru_cache(maxsize=4)
def cut(source: str) -> Meta:
    """`cut_bpe` of a shipped vocabulary, shared by the recipes built on it (never mutated)."""
    return cut_bpe(read_source(source), PRE_SWEEP_TOKENS)
