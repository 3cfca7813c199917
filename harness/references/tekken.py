"""The tekken reference: a Mistral `tekken.json` run by Mistral's own library (`--reference tekken:PATH`).

Runs in the Python reference child (`harness.references.specs`), through
`mistral_common`'s `Tekkenizer` (tiktoken underneath). What the library offers
is `encode(s, bos, eos)`: the text is always split as plain text (the special
tokens are "handled manually": tiktoken is given none, so `[INST]` or `<s>` in
a text is never matched), and the caller says whether the BOS and the EOS go
around it. Flags (`harness.references.flags`, docs/references.md):

- add_special: `bos=True, eos=False`, what mistral-common itself does with a
  request (`InstructTokenizerBase.start()` is `[bos_id]`; the EOS follows an
  assistant answer only); `--reference-arg add_bos=` / `add_eos=` state otherwise.
- parse_special off: the library's only behaviour.
- parse_special on: not applicable when the text holds a special token's text
  (`[INST]`, `<SPECIAL_20>`, ...), which llama.cpp would parse and tekken
  cannot; otherwise the same call.
- decode: unparse_special is `SpecialTokenPolicy.KEEP` (on) or `IGNORE` (off);
  remove_special with unparse on has no counterpart when the ids begin or end
  with a special token (not applicable).

Offered: `tokenize` and `token_text`, each token spelled as the converter
spells it in `tokenizer.ggml.tokens` (gguf-py's `MistralVocab._tekken_tokens`:
a special token's string; any other token's bytes through GPT-2's
bytes_to_unicode).
"""

from __future__ import annotations

import os
from typing import Any

from tokenizer.unicode import byte_to_char

from .flags import NotExpressible, holds_any, needs_text
from .spm import BOOLS


class TekkenReference:
    """A tekken.json as mistral-common's `Tekkenizer` runs it."""

    capabilities = ("tokenize", "token_text")

    def __init__(self, path: str | os.PathLike[str], *, add_bos: bool = True, add_eos: bool = False) -> None:
        from mistral_common.tokens.tokenizers.tekken import SpecialTokenPolicy, Tekkenizer
        self.tk: Any = Tekkenizer.from_file(str(path))
        self.policy = SpecialTokenPolicy
        self.n_tokens = int(self.tk.n_words)
        self.add_bos, self.add_eos = add_bos, add_eos
        self.n_special = int(self.tk.num_special_tokens)
        self.special_texts = tuple(str(self.tk.id_to_piece(i)) for i in range(self.n_special))
        self.bytes_table = byte_to_char()

    def tokenize(self, text: str | bytes, *, add_special: bool, parse_special: bool) -> list[int]:
        text = needs_text(text)
        if parse_special:
            found = holds_any(text, self.special_texts)
            if found is not None:
                raise NotExpressible(f"parse_special: tekken never matches a special token in text "
                                     f"(the text holds {found!r})")
        return [int(i) for i in self.tk.encode(text, bos=add_special and self.add_bos,
                                               eos=add_special and self.add_eos)]

    def token_text(self, token: int) -> str:
        """The token as the GGUF's converter writes it: a special token's string, else its bytes, byte-level."""
        token = int(token)
        if token < self.n_special:
            return self.special_texts[token]
        raw = self.tk.id_to_byte_piece(token, self.policy.KEEP)
        return "".join(self.bytes_table[b] for b in raw)

    def decode(self, ids: list[int], *, remove_special: bool, unparse_special: bool) -> dict[str, str]:
        """tekken's decode under llama.cpp's detokenize flags: {"raw", "cleaned", "applied"}, all one text."""
        ids = [int(i) for i in ids]
        if remove_special and unparse_special and ids and (ids[0] < self.n_special or ids[-1] < self.n_special):
            raise NotExpressible("remove_special with unparse_special: tekken's decode has no way to drop only "
                                 "a leading BOS or a trailing EOS and show the other special tokens")
        policy = self.policy.KEEP if unparse_special else self.policy.IGNORE
        text = str(self.tk.decode(ids, special_token_policy=policy))
        return {"raw": text, "cleaned": text, "applied": text}

    def close(self) -> None:
        self.tk = None


def load(path: str | os.PathLike[str], *, reference: str = "", **engine_args: str) -> TekkenReference:
    """The factory `tekken:PATH` runs in the child; `path` (the GGUF) is not read.

    `--reference-arg add_bos=true|false` / `add_eos=...` (or `--engine-arg` in the
    interim form) say what add_special adds; by default the BOS, as mistral-common does.
    """
    unknown = sorted(set(engine_args) - {"add_bos", "add_eos"})
    if unknown:
        raise TypeError(f"a tekken: reference takes add_bos=, add_eos= only (got {', '.join(unknown)})")
    if not reference:
        raise TypeError("a tekken: reference needs its tekken.json (the 'reference' argument)")
    stated = {"add_bos": True, "add_eos": False}
    for name, value in engine_args.items():
        if value.lower() not in BOOLS:
            raise TypeError(f"{name}={value!r}: expected true or false")
        stated[name] = BOOLS[value.lower()]
    return TekkenReference(reference, **stated)


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.references.tekken FILE [MEMORY_LIMIT]`: the file's special token texts as JSON,
    by id (the library's defaults and fillers where the file lists none), for `harness.references.added`;
    with MEMORY_LIMIT (bytes) the process caps its address space first."""
    import json
    import sys

    from ..environment import LimitError, lower_limit
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2) or not all(a.isdigit() for a in args[1:]):
        print("usage: python -m harness.references.tekken FILE [MEMORY_LIMIT]", file=sys.stderr)
        return 2
    try:  # an inherited lower limit stays in force (never raised)
        cap = lower_limit("AS", int(args[1])) if len(args) == 2 else None
    except LimitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        reference = TekkenReference(args[0])
    except MemoryError:
        print(f"error: MemoryError: over the memory limit of {cap:,} bytes (--memory-limit)"
              if cap is not None else "error: MemoryError", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the library's own error, one line for the caller
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(list(reference.special_texts), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
