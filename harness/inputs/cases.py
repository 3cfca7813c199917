"""One corpus case from an input, an even spread of token ids, and the special tokens cases are built around:
shared by corpus, boundaries and documents."""

from __future__ import annotations

import os

import numpy as np

from ..models.model import Model, as_model

# GGUF token types (llama.cpp's LLAMA_TOKEN_TYPE_*) worth building cases around.
CONTROL, USER_DEFINED = 3, 4
MAX_TOKENS_PER_TYPE = 8   # special-token cases stay a few dozen per vocabulary
MAX_TOKEN_BYTES = 48


def make_case(case_id: str, data: bytes | str) -> dict:
    """`{"id", "text"}` when the input is valid UTF-8, else `{"id", "bytes": hex}`."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    try:
        return {"id": case_id, "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"id": case_id, "bytes": data.hex()}


def spread(ids: list[int], k: int) -> list[int]:
    """Up to k ids: the first half by id, the rest evenly spaced over the remainder."""
    if len(ids) <= k:
        return ids
    head = ids[: k // 2]
    rest = ids[k // 2:]
    step = len(rest) / (k - len(head))
    return head + [rest[int(j * step)] for j in range(k - len(head))]


def encodable(text: str) -> bool:
    """Whether `text` is valid UTF-8 text (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def chosen_tokens(model: Model | str | os.PathLike) -> list[tuple[int, str]]:
    """(id, text) of up to 8 control and 8 user-defined tokens, from the GGUF's metadata ([] if our reader
    refuses the file: it may still be one llama.cpp loads, or refuses, and the run records that)."""
    metadata = as_model(model).metadata
    if metadata is None:
        return []
    return _chosen_tokens(metadata.get("tokenizer.ggml.tokens") or [], metadata.get("tokenizer.ggml.token_type"))


def _chosen_tokens(tokens: list[str], types) -> list[tuple[int, str]]:
    from tokenizer.gguf import reader as gguf

    if types is None or not tokens:
        return []
    types = np.asarray(types)
    chosen: list[tuple[int, str]] = []
    for kind in (CONTROL, USER_DEFINED):
        ids = [int(i) for i in np.nonzero(types == kind)[0]
               if 0 < len(gguf.as_bytes(tokens[i])) <= MAX_TOKEN_BYTES]
        chosen.extend((i, tokens[i]) for i in spread(ids, MAX_TOKENS_PER_TYPE))
    return chosen
