"""Hugging Face transformers as the engine under test: `--engine transformers`.

transformers builds a fast tokenizer from a GGUF file's metadata
(`AutoTokenizer.from_pretrained(folder, gguf_file=name)`); nothing comes from
the hub (`HF_HUB_OFFLINE=1`, `local_files_only=True`). This adapter maps only
what transformers really exposes, and declares only that (docs/peers.md):

| capability  | transformers call                                   |
|-------------|-----------------------------------------------------|
| tokenize    | `encode(text, add_special_tokens=add_special, split_special_tokens=not parse_special)` |
| detokenize  | `decode(ids, skip_special_tokens=not unparse_special)`; `remove_special` has no counterpart |
| token_text  | `convert_ids_to_tokens(id)`, over `len(tokenizer)` ids |

Not offered, so never checked: bytes input (transformers takes `str`: the
invalid-UTF-8 cases are "not applicable"), `token_to_piece`, scores and
attributes (transformers has no such per-token data to give), `vocab_type`
and `pre`, llama.cpp's special ids and flags, `is_eog`, `is_control`.

Needs the `[transformers]` extra (transformers, tokenizers, gguf, torch); it
runs in a contained child (`harness.subjects.peers`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class TransformersEngine:
    """A GGUF vocabulary as transformers' fast tokenizer sees it."""

    capabilities = ("tokenize", "detokenize", "token_text")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        from transformers import AutoTokenizer
        path = Path(path).resolve()
        self.hf: Any = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
        self.n_tokens = len(self.hf)

    def tokenize(self, text: str | bytes, *, add_special: bool, parse_special: bool) -> list[int]:
        if not isinstance(text, str):
            raise TypeError("transformers tokenizes str only")
        return list(self.hf.encode(text, add_special_tokens=add_special, split_special_tokens=not parse_special))

    def detokenize(self, ids: list[int], *, remove_special: bool, unparse_special: bool) -> str:
        """`decode`: special tokens shown when llama.cpp would unparse them; `remove_special` ignored."""
        return str(self.hf.decode(list(ids), skip_special_tokens=not unparse_special))

    def token_text(self, token: int) -> str:
        text = self.hf.convert_ids_to_tokens(int(token))
        if text is None:
            raise IndexError(f"transformers has no token {token}")
        return str(text)

    def close(self) -> None:
        self.hf = None


def load(path: str | os.PathLike[str], **engine_args: str) -> TransformersEngine:
    """The factory `--engine transformers` runs (in the Python reference child); takes no options."""
    if engine_args:
        raise TypeError(f"--engine transformers takes no --engine-arg (got {', '.join(sorted(engine_args))})")
    return TransformersEngine(path)
