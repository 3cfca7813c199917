"""The `tokenizers` reference: a `tokenizer.json` run by Hugging Face's own library (`--engine hf:PATH`).

Runs in the Python reference child (`harness.references.specs`). What it is:
the `tokenizer.json` exactly as `tokenizers` runs it, offline, with padding
and truncation switched off (transformers switches them off per call unless
asked, so a file that ships them on, as all-MiniLM-L6-v2's does, would
otherwise pad every case to its `max_length`). From `tokenizer_config.json`
only `clean_up_tokenization_spaces` is read (for `decode`); `normalize` gives the text after the
file's normalizer (the cause experiment "normalizer not representable"); a transformers
class that rewrites the post-processor from its config (LlamaTokenizerFast's
`add_bos_token`) is not reproduced: `harness.references.gguf_keys` names that
disagreement instead.

Flags: `harness.references.flags` (add_special is `add_special_tokens`;
parse_special off is `encode_special_tokens`). Offered: `tokenize`, and
`token_text` for BPE and Unigram models, whose token strings are the GGUF's
own (a WordPiece GGUF holds the converter's rewrite, `##x` -> `x`, `x` -> `▁x`,
so there it is not offered). `decode` is for the three-way check's decode
comparison (`harness.references.classify.decode_outcome`); it is not declared
as `detokenize`, because today's per-case records cannot hold a pair it
cannot express.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..files.input_limits import loads, read_tokenizer_file
from .flags import NotExpressible, clean_up_tokenization, needs_text

TEXT_MODELS = ("BPE", "Unigram")


def config_beside(path: Path) -> dict:
    """tokenizer_config.json next to `path`, or {} (a file that is not a JSON object is {} too)."""
    config = path.parent / "tokenizer_config.json"
    if not config.is_file():
        return {}
    data = loads(read_tokenizer_file(config), str(config))
    return data if isinstance(data, dict) else {}


class HFReference:
    """A tokenizer.json as `tokenizers` runs it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from tokenizers import Tokenizer
        path = Path(path)
        self.hf: Any = Tokenizer.from_file(str(path))
        self.hf.no_padding()
        self.hf.no_truncation()
        self.config = config_beside(path)
        model = type(self.hf.model).__name__  # not json.loads(to_str()): a second copy of a large file
        vocab = self.hf.get_vocab(with_added_tokens=True)
        self.n_tokens = max(vocab.values(), default=-1) + 1
        self.capabilities = ("tokenize", "token_text") if model in TEXT_MODELS else ("tokenize",)
        added = self.hf.get_added_tokens_decoder()
        self.special_ids = frozenset(i for i, t in added.items() if t.special)

    def tokenize(self, text: str | bytes, *, add_special: bool, parse_special: bool) -> list[int]:
        self.hf.encode_special_tokens = not parse_special
        return list(self.hf.encode(needs_text(text), add_special_tokens=add_special).ids)

    def token_text(self, token: int) -> str:
        """The token's string; an id the file leaves out (a hole) is empty."""
        return self.hf.id_to_token(int(token)) or ""

    def decode(self, ids: list[int], *, remove_special: bool, unparse_special: bool) -> dict[str, str]:
        """The reference's decode under llama.cpp's detokenize flags: {"raw", "cleaned", "applied"}.

        `applied` is what transformers would return (cleaned when the config's
        `clean_up_tokenization_spaces` is on). `NotExpressible` for remove_special
        with unparse_special on ids that begin or end with a special token.
        """
        ids = [int(i) for i in ids]
        if remove_special and unparse_special and ids and (ids[0] in self.special_ids or ids[-1] in self.special_ids):
            raise NotExpressible("remove_special with unparse_special: decode has no way to drop only a leading BOS "
                                 "or a trailing EOS and show the other special tokens")
        raw = self.hf.decode(ids, skip_special_tokens=not unparse_special)
        cleaned = clean_up_tokenization(raw)
        return {"raw": raw, "cleaned": cleaned,
                "applied": cleaned if self.config.get("clean_up_tokenization_spaces") else raw}

    def normalize(self, text: str) -> str:
        """The text after the original's normalizer (`normalizer.normalize_str`), as its model sees it."""
        normalizer = self.hf.normalizer
        return text if normalizer is None else str(normalizer.normalize_str(text))

    def close(self) -> None:
        self.hf = None


def load(path: str | os.PathLike[str], *, reference: str = "", **engine_args: str) -> HFReference:
    """The factory `--engine hf:PATH` runs in the child; `path` (the GGUF) is not read."""
    if engine_args:
        given = ", ".join(sorted(engine_args))
        raise TypeError(f"an hf: reference takes no --engine-arg or --reference-arg (got {given})")
    if not reference:
        raise TypeError("an hf: reference needs its tokenizer.json (the 'reference' argument)")
    return HFReference(reference)
