"""The `sentencepiece` reference: a SentencePiece `.model` run by Google's own library (`--engine spm:PATH`).

Runs in the Python reference child (`harness.references.specs`). sentencepiece
itself adds no BOS or EOS unless asked, and its model file does not say
whether to: that comes from the `tokenizer_config.json` beside the model
(`add_bos_token`, `add_eos_token`, as transformers' LlamaTokenizer reads
them), or from `--engine-arg add_bos=true|false` (`add_eos=`). Without
either, add_special on is not applicable. sentencepiece never
matches a control piece (`<s>`) in text, which is llama.cpp's parse_special
off; with parse_special on, a text holding a control or unknown piece's text
is not applicable, any other text is the same call. Offered: `tokenize`,
`token_text` (the pieces, as the GGUF holds them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .flags import NotExpressible, clean_up_tokenization, holds_any, needs_text
from .hf import config_beside

SPACE = "\u2581"  # sentencepiece's escaped space


class SPMReference:
    """A SentencePiece model as `sentencepiece` runs it."""

    capabilities = ("tokenize", "token_text")

    def __init__(self, path: str | os.PathLike[str], *, stated: dict[str, bool] | None = None) -> None:
        import sentencepiece
        path = Path(path)
        self.sp: Any = sentencepiece.SentencePieceProcessor(model_file=str(path))
        self.n_tokens = int(self.sp.get_piece_size())
        config = {**config_beside(path), **(stated or {})}
        self.add_bos: bool | None = bool(config["add_bos_token"]) if "add_bos_token" in config else None
        self.add_eos: bool | None = bool(config["add_eos_token"]) if "add_eos_token" in config else None
        if (self.add_bos is None) != (self.add_eos is None):  # LlamaTokenizer's defaults for the one left out
            self.add_bos = True if self.add_bos is None else self.add_bos
            self.add_eos = False if self.add_eos is None else self.add_eos
        self.special_texts = tuple(self.sp.id_to_piece(i) for i in range(self.n_tokens)
                                   if self.sp.is_control(i) or self.sp.is_unknown(i))
        self.clean_up = bool(config.get("clean_up_tokenization_spaces"))  # LlamaTokenizer's decode honours it
        self.dummy_prefix = str(self.sp.normalize("a")).startswith(SPACE)

    def tokenize(self, text: str | bytes, *, add_special: bool, parse_special: bool) -> list[int]:
        text = needs_text(text)
        if add_special and self.add_bos is None:
            raise NotExpressible("add_special: sentencepiece adds no BOS/EOS of its own and no "
                                 "tokenizer_config.json beside the model says whether to")
        if parse_special:
            found = holds_any(text, self.special_texts)
            if found is not None:
                raise NotExpressible(f"parse_special: sentencepiece never matches a control piece in text "
                                     f"(the text holds {found!r})")
        return list(self.sp.encode(text, add_bos=bool(add_special and self.add_bos),
                                   add_eos=bool(add_special and self.add_eos)))

    def token_text(self, token: int) -> str:
        return str(self.sp.id_to_piece(int(token)))

    def decode(self, ids: list[int], *, remove_special: bool, unparse_special: bool) -> dict[str, str]:
        """sentencepiece's decode (control pieces are never shown): {"raw", "cleaned", "applied"}; `applied` is
        cleaned when the tokenizer_config.json beside the model says `clean_up_tokenization_spaces` (as
        transformers' LlamaTokenizer does), so llama.cpp's clean-up agrees only where the original asks for it."""
        if unparse_special:
            raise NotExpressible("unparse_special: sentencepiece's decode never shows control pieces")
        text = str(self.sp.decode([int(i) for i in ids]))
        cleaned = clean_up_tokenization(text)
        return {"raw": text, "cleaned": cleaned, "applied": cleaned if self.clean_up else text}

    def normalize(self, text: str) -> str:
        """The text after the model's normalizer (sentencepiece's `normalize`), spaces as spaces and without
        the dummy prefix it adds, so that it can be tokenized again by both sides."""
        normal = str(self.sp.normalize(text))
        if self.dummy_prefix and normal.startswith(SPACE):
            normal = normal[1:]
        return normal.replace(SPACE, " ")

    def close(self) -> None:
        self.sp = None


STATED = {"add_bos": "add_bos_token", "add_eos": "add_eos_token"}
BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def load(path: str | os.PathLike[str], *, reference: str = "", **engine_args: str) -> SPMReference:
    """The factory `--engine spm:PATH` runs in the child; `path` (the GGUF) is not read.

    `--engine-arg add_bos=true|false` and `add_eos=...` state what the original
    adds where no tokenizer_config.json says it (they win over one that does).
    """
    unknown = sorted(set(engine_args) - set(STATED))
    if unknown:
        raise TypeError(f"an spm: reference takes --engine-arg add_bos=, add_eos= only (got {', '.join(unknown)})")
    if not reference:
        raise TypeError("an spm: reference needs its .model file (the 'reference' argument)")
    stated = {}
    for name, value in engine_args.items():
        if value.lower() not in BOOLS:
            raise TypeError(f"--engine-arg {name}={value!r}: expected true or false")
        stated[STATED[name]] = BOOLS[value.lower()]
    return SPMReference(reference, stated=stated)
