"""llama.cpp's flags on each reference library, and what a library cannot express.

llama.cpp's `tokenize(text, add_special, parse_special)` and
`detokenize(ids, remove_special, unparse_special)` against the originals
(docs/references.md has the table and the reasons):

- add_special: hf `encode(add_special_tokens=...)` (the post-processor); spm `add_bos`/`add_eos`
  from the tokenizer_config.json beside the model, not applicable without one; tekken
  `encode(bos=True, eos=False)`, as mistral-common starts every request (or as stated).
- parse_special off: hf `encode_special_tokens = True` (special added tokens split as text,
  non-special ones still matched, as llama.cpp still matches USER_DEFINED tokens); spm and
  tekken the library's only behaviour (neither ever matches a control piece / special token in text).
- parse_special on: hf the library default (added tokens matched); spm (tekken) not applicable when
  the text holds a control or unknown piece's (a special token's) text, otherwise the same call.
- unparse_special: hf `decode(skip_special_tokens=not unparse_special)`; spm never shows control
  pieces, so not applicable with unparse on; tekken `SpecialTokenPolicy.KEEP` / `IGNORE`.
- remove_special: hf and tekken have no counterpart: not applicable with unparse on when the ids begin or
  end with a special token (with unparse off the special tokens are dropped either way).
- bytes input that is not UTF-8: not applicable (every library takes str).

A flag pair that cannot be expressed raises `NotExpressible`; the protocol
carries it as an error of type `NotApplicable`, and the case is then "not
applicable" for the reference, never a pass (`harness.references.specs.ReferenceClient`).
"""

from __future__ import annotations

from collections.abc import Iterable


class NotExpressible(Exception):
    """A flag pair (or input) the reference's library has no way to ask for; the message says which and why."""

    error_type = "NotApplicable"


def needs_text(text: str | bytes) -> str:
    """`text` as str; bytes input is not applicable (every reference library takes str)."""
    if isinstance(text, str):
        return text
    raise NotExpressible("bytes input: the reference library takes str only")


def holds_any(text: str, pieces: Iterable[str]) -> str | None:
    """The first of `pieces` found in `text`, or None."""
    return next((p for p in pieces if p and p in text), None)


# transformers' `PreTrainedTokenizerBase.clean_up_tokenization`, replacement for replacement
CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
            (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def clean_up_tokenization(text: str) -> str:
    """What transformers' decode does to the text when `clean_up_tokenization_spaces` is on."""
    for old, new in CLEAN_UP:
        text = text.replace(old, new)
    return text
