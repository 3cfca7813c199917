"""Synthetic vocabularies built to make the self-test's blind spots visible (family `sensitivity`).

Each curated mutant that once survived the main job (`blind_spot` in
tests/mutants/mutants.toml) is a real bug that no input can show on the shipped
vocabularies, because none of them holds what the bug needs. These recipes
derive, deterministically and from the shipped files, small vocabularies that
do hold it, so that the boundary slice and the corpora reach the difference:

- ``sens-bpe-specials`` (gpt-2 cut down like the ``pre-<name>`` ones, pre
  ``jina-v2-de``: GPT-2's split, and llama.cpp's by-text rule that sets LSTRIP
  on ``<mask>``): a CONTROL ``<mask>`` where BPE keeps the space before it
  (``special-lstrip-ignored``); USER_DEFINED ``<probe>`` inside ``<<probe>>``
  and ``[tool`` overlapping ``tool]]``, the shorter one first by id
  (``special-id-order``); ``<|im_end|>`` while ``tokenizer.ggml.eot_token_id``
  names ``<|endoftext|>``, so it is end-of-generation by its text alone
  (``defaults-eog-no-im-end``); and tokens joining a tab or a newline to a
  letter, with the merges that make them (``pre-gpt2-letters-any-space``).
- ``sens-starcoder-digits`` (starcoder cut down, pre ``starcoder``): every
  two-digit token and a few longer ones, with their merges
  (``pre-starcoder-digit-runs``).
- ``sens-ugm-lattice`` (nomic-bert-moe's best pieces, every single character
  and the pieces around one hole; extra whitespace kept): user-defined
  whitespace runs scored -1000 in the file, as llama.cpp's converter scores
  added tokens (``ugm-user-defined-scored``); and two characters, `UGM_HOLES`,
  that no piece spells or starts but that lie inside kept pieces, each scored
  as nomic's rarest piece (``ugm-unk-score-from-max``: the unknown score then
  decides between, say, ``▁Ä`` and ``▁`` + unknown; with nomic's own scores
  every piece around a character beats an unknown scored either way).

`ENGINES` names the engine family each one runs on (the self-test skips a
mutant of one engine on the others' vocabularies).
"""

from __future__ import annotations

import numpy as np

from tokenizer.attrs import TokenType
from tokenizer.gguf import reader as gguf
from tokenizer.gguf.constants import Keys

from . import synth_base as base
from .synth_base import Meta, Recipe, Types

FAMILY = "sensitivity"
ENGINES = {"sens-bpe-specials": "bpe", "sens-starcoder-digits": "bpe", "sens-ugm-lattice": "ugm"}

# GPT-2's byte-level spelling of a tab and a newline
TAB, NEWLINE = "\u0109", "\u010a"
LETTER_JOINS = ((TAB, "a"), (NEWLINE, "a"), (TAB, "return"))
# (text, type) in id order: the shorter of each pair first, so id order and length order differ
BPE_SPECIALS = (
    ("<mask>", TokenType.CONTROL),
    ("<|im_end|>", TokenType.CONTROL),
    ("<probe>", TokenType.USER_DEFINED),
    ("<<probe>>", TokenType.USER_DEFINED),
    ("[tool", TokenType.USER_DEFINED),
    ("tool]]", TokenType.USER_DEFINED),
)
LONG_NUMBERS = (("00", "0"), ("1", "00"))   # 000 and 100, as BPE reaches them (0 0 ranks first)
UGM_KEEP = 8192                          # nomic's best-scored pieces kept
UGM_HOLES = ("\u00c4", "\u00e9")         # Ä (a boundary probe, Lu) and é (in the corpora and probes)
UGM_USER = ("\u2581\u2581", "\u2581\u2581\u2581\u2581", "<extra_id_0>")
ADDED_TOKEN_SCORE = -1000.0              # convert_hf_to_gguf's score for added tokens


def recipes() -> list[Recipe]:
    return [
        Recipe("sens-bpe-specials", "gpt-2",
               "LSTRIP <mask>, nested and overlapping specials, <|im_end|> beside another EOT, "
               "tab+letter tokens (pre jina-v2-de)", _bpe_specials),
        Recipe("sens-starcoder-digits", "starcoder",
               "multi-digit tokens under starcoder's one-digit split", _starcoder_digits),
        Recipe("sens-ugm-lattice", "nomic-bert-moe",
               "UGM with user-defined tokens scored -1000 and a character no piece starts",
               _ugm_lattice),
    ]


# --- BPE -------------------------------------------------------------------------------------

def _bpe_base(src: gguf.GGUFFile, source: str, name: str, pre: str) -> tuple[Meta, Types]:
    """`source` cut down as the pre-sweep does, as `name` with pre-tokenizer `pre` (lists copied)."""
    meta, types = base.general(src, name)
    cut = base.cut(source)
    meta |= cut | {Keys.MODEL: "gpt2", Keys.PRE: pre,
                   Keys.TOKENS: list(cut[Keys.TOKENS]), Keys.MERGES: list(cut[Keys.MERGES])}
    return meta, types | {Keys.MERGES: base.STR_ARRAY}


def _append(meta: Meta, texts: list[str], kind: TokenType, merges: list[str] | None = None) -> None:
    """Add tokens of one type at the end, and merges after the source's (the lowest ranks)."""
    clash = set(texts) & set(meta[Keys.TOKENS])
    if clash:  # two ids with one text would make llama.cpp's token_to_id keep only one
        raise ValueError(f"tokens already in the source: {sorted(clash)}")
    meta[Keys.TOKENS] += texts
    meta[Keys.TOKEN_TYPE] = np.concatenate([meta[Keys.TOKEN_TYPE], np.full(len(texts), int(kind), "<i4")])
    meta[Keys.MERGES] += merges or []


def _bpe_specials(src: gguf.GGUFFile) -> tuple[Meta, Types]:
    meta, types = _bpe_base(src, "gpt-2", "sens-bpe-specials", "jina-v2-de")
    _append(meta, [a + b for a, b in LETTER_JOINS], TokenType.NORMAL, [f"{a} {b}" for a, b in LETTER_JOINS])
    for text, kind in BPE_SPECIALS:
        _append(meta, [text], kind)
    tokens = meta[Keys.TOKENS]
    meta[Keys.EOT_ID] = tokens.index("<|endoftext|>")
    meta[Keys.MASK_ID] = tokens.index("<mask>")
    return meta, types


def _starcoder_digits(src: gguf.GGUFFile) -> tuple[Meta, Types]:
    meta, types = _bpe_base(src, "starcoder", "sens-starcoder-digits", "starcoder")
    pairs = [(a, b) for a in "0123456789" for b in "0123456789"] + list(LONG_NUMBERS)
    _append(meta, [a + b for a, b in pairs], TokenType.NORMAL, [f"{a} {b}" for a, b in pairs])
    return meta, types


# --- UGM -------------------------------------------------------------------------------------

def _ugm_kept(texts: list[str], kinds: np.ndarray) -> list[int]:
    """Ids kept from nomic, in its order: every non-normal token, the best `UGM_KEEP` pieces,
    every single-character piece, and every piece with a hole (`UGM_HOLES`) inside; none that
    spells or starts with a hole."""
    normal = kinds == TokenType.NORMAL
    kept = []
    for i, text in enumerate(texts):
        if not normal[i]:
            kept.append(i)
        elif text.startswith(UGM_HOLES):
            continue
        elif i < UGM_KEEP or len(text) == 1 or _holed(text):
            kept.append(i)
    return kept


def _holed(text: str) -> bool:
    return any(hole in text for hole in UGM_HOLES)


def _ugm_lattice(src: gguf.GGUFFile) -> tuple[Meta, Types]:
    meta, types = base.general(src, "sens-ugm-lattice")
    keys = base.tokenizer_keys(src)
    texts = list(keys[Keys.TOKENS])
    kinds = np.asarray(keys[Keys.TOKEN_TYPE])
    kept = _ugm_kept(texts, kinds)
    new_id = {old: new for new, old in enumerate(kept)}
    scores = np.asarray(keys[Keys.SCORES], dtype="<f4")
    rare = scores[kinds == TokenType.NORMAL].min()
    holed = np.asarray([_holed(texts[i]) for i in kept])
    meta |= keys | {
        Keys.TOKENS: [texts[i] for i in kept] + list(UGM_USER),
        Keys.TOKEN_TYPE: np.concatenate([kinds[kept], np.full(len(UGM_USER), int(TokenType.USER_DEFINED))])
        .astype("<i4"),
        Keys.SCORES: np.concatenate([np.where(holed, rare, scores[kept]),
                                     np.full(len(UGM_USER), ADDED_TOKEN_SCORE)]).astype("<f4"),
        Keys.REMOVE_EXTRA_WS: False,   # so that runs of spaces reach the user-defined tokens
    }
    for key in base.ID_KEYS:
        if key in meta:
            meta[key] = new_id[int(meta[key])]
    return meta, types
