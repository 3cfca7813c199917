"""The class of a conversion difference no GGUF key explains, found by experiment (issue 42, section 2).

`harness.references.causes` tries candidate changes on each differing case;
the ones here name a class of difference rather than a key:

- `unicode-version` (input): every code point newer than one side's tables
  written as an older assigned code point of the same general category, for
  both sides. Newer than llama.cpp's: not assigned in its `unicode-data.cpp`
  (Unicode 15.1 for the pinned build, `llama_facts.llama_version`) but assigned
  in Python's `unicodedata` or the `regex` module's newer tables; newer than the
  original's, as far as the harness can tell: assigned in llama.cpp's tables and
  not in Python's (14.0 on Python 3.11). The category is Python's, else the
  `regex` module's (`REPLACEMENTS` holds one old code point per category);
- `model-type` (GGUF, not exact): `tokenizer.ggml.model` as the original's model
  asks (a Unigram SentencePiece model written `llama` is run as `t5`, llama.cpp's
  UGM, its flags and special ids kept): converting through the other path;
- `original-normalized` (input): the case's text replaced by the original's own
  normalized text (`normalize` of tokenizers or sentencepiece, asked of the
  reference child), for both sides: a normalizer no GGUF key carries;
- the loader's by-text retyping is `cause_candidates`' `loader-retyping`.

A case no candidate makes agree is still classed, from the two sides' ids
(`pieces_class`): `segmentation-only` when both hold the same text in different
pieces (`model-type` when the two model types also disagree), `normalization`
when the texts differ. `class_of(names)` gives the class of a cause: its
candidates' classes (`CLASS_OF`, else by side). "unexplained" is left for what
no experiment classes (a side with no ids).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from tokenizer import Tokenizer

from ..files import protobuf
from . import llama_facts
from .cause_candidates import Candidate

UNEXPLAINED = "unexplained"
SEGMENTATION = "segmentation-only"
NORMALIZATION = "normalization"
MODEL_TYPE = "model-type"
# candidate name -> the class of difference it shows; any other candidate is classed by its side (BY_SIDE)
CLASS_OF = {"unicode-version": "unicode-version", "loader-retyping": "loader-retyping", "model-type": MODEL_TYPE,
            "original-normalizer": "normalizer", "original-normalized": "normalizer"}
BY_SIDE = {"gguf": "gguf-key", "original": "llama.cpp-behaviour", "input": NORMALIZATION}
# an old code point per general category (Unicode 1.1 to 3.0: in every table a tokenizer carries)
REPLACEMENTS = {"Lu": "A", "Ll": "a", "Lt": "\u01c5", "Lm": "\u02b0", "Lo": "\u05d0", "Mn": "\u0301",
                "Mc": "\u0903", "Me": "\u20dd", "Nd": "0", "Nl": "\u2160", "No": "\u00b2", "Pc": "_", "Pd": "-",
                "Ps": "(", "Pe": ")", "Pi": "\u00ab", "Pf": "\u00bb", "Po": "!", "Sm": "+", "Sc": "$", "Sk": "^",
                "So": "\u00a9", "Zs": " ", "Cf": "\u00ad"}
MODEL_NAMES = {"Unigram": "t5", "WordPiece": "bert"}  # the original's model -> the GGUF model that runs it
GGUF_MODELS = {"spm": "llama", "bpe": "gpt2", "wpm": "bert", "ugm": "t5"}
SPM_MODEL_TYPES = {1: "Unigram", 2: "BPE", 3: "Word", 4: "Char"}  # TrainerSpec.model_type
MAX_SHOWN = 8  # code points named in a unicode-version detail


def class_of(names: Sequence[str], sides: dict[str, str]) -> str:
    """The class a cause names: its candidates' classes, distinct, in order, joined by '+'."""
    found = [CLASS_OF.get(n) or BY_SIDE.get(sides.get(n, ""), UNEXPLAINED) for n in names]
    return "+".join(dict.fromkeys(found)) or UNEXPLAINED


# --- Unicode versions ------------------------------------------------------------------------------

def newer(cpt: int) -> str | None:
    """Why `cpt` is newer than one side's tables ('llama.cpp' or 'python'), or None."""
    if cpt < 0x80 or 0xD800 <= cpt < 0xE000 or unicodedata.category(chr(cpt)) == "Co":
        return None
    ours = llama_facts.llama_assigned(cpt)
    python = unicodedata.category(chr(cpt)) != "Cn"
    if not ours and (python or llama_facts.regex_assigned(cpt)):
        return "llama.cpp"
    if ours and not python:
        return "python"
    return None


def category(cpt: int) -> tuple[str | None, str]:
    """`cpt`'s general category and the table that gives it: Python's `unicodedata`, else the `regex` module's."""
    python = unicodedata.category(chr(cpt))
    if python != "Cn":
        return python, f"Python's unicodedata {unicodedata.unidata_version}"
    return llama_facts.regex_category(cpt), f"the regex module's tables ({llama_facts.regex_version()})"


def substitutions(text: str) -> list[dict[str, Any]]:
    """The code points of `text` newer than one side's tables, each with its category and replacement."""
    out, seen = [], set()
    for ch in text:
        cpt = ord(ch)
        if cpt in seen or (side := newer(cpt)) is None:
            continue
        seen.add(cpt)
        cat, source = category(cpt)
        if cat in REPLACEMENTS:
            out.append({"code_point": f"U+{cpt:04X}", "category": cat, "category_from": source,
                        "newer_than": _newer_than(side), "as": f"U+{ord(REPLACEMENTS[cat]):04X}"})
    return out


def _newer_than(side: str) -> str:
    if side == "llama.cpp":
        return f"llama.cpp's tables (Unicode {llama_facts.llama_version()}, src/unicode-data.cpp): not assigned there"
    return (f"Python's unicodedata {unicodedata.unidata_version} (and so perhaps the original's): assigned in "
            f"llama.cpp's Unicode {llama_facts.llama_version()} tables only")


def substituted(text: str) -> str:
    """`text` with each code point newer than one side's tables written as an old one of its category."""
    subs = {chr(int(s["code_point"][2:], 16)): REPLACEMENTS[s["category"]] for s in substitutions(text)}
    return "".join(subs.get(ch, ch) for ch in text) if subs else text


def unicode_version() -> list[Candidate]:
    """The candidate, when llama.cpp's tables are in the cache (they are its facts, not our engine's)."""
    if llama_facts.unicode_flags() is None:
        return []
    return [Candidate("unicode-version", f"code points newer than one side's Unicode tables (llama.cpp's "
                      f"{llama_facts.llama_version()}, Python's {unicodedata.unidata_version}) written as an older "
                      "code point of the same category", "input", text=substituted)]


def detail(names: Sequence[str], text: str) -> dict[str, Any]:
    """What a cause's experiment changed in the case, for its evidence (the substituted code points)."""
    if "unicode-version" not in names:
        return {}
    subs = substitutions(text)
    return {"substituted": subs[:MAX_SHOWN], "substituted_n": len(subs)}


# --- model type ------------------------------------------------------------------------------------

def spm_model_type(buf: bytes) -> str | None:
    """A SentencePiece ModelProto's trainer model type ('Unigram', 'BPE', ...; Unigram when unset)."""
    for number, _, value in protobuf.fields(buf):
        if number == 2 and isinstance(value, bytes):  # TrainerSpec { model_type = 3 }
            kinds = [v for n, _, v in protobuf.fields(value) if n == 3 and isinstance(v, int)]
            return SPM_MODEL_TYPES.get(kinds[-1] if kinds else 1)
    return "Unigram"


def models_differ(original: str | None, vocab_type: str) -> bool:
    """The original's model and the GGUF's `tokenizer.ggml.model` run different algorithms: a Unigram model not
    run as UGM (`t5`), a WordPiece one not as `bert`, a BPE one as either."""
    gguf = GGUF_MODELS.get(vocab_type)
    if original in MODEL_NAMES:
        return gguf != MODEL_NAMES[original]
    return original == "BPE" and gguf in ("t5", "bert")


def model_type(tok: Tokenizer, original: str | None) -> list[Candidate]:
    """`tokenizer.ggml.model` as the original's model asks, where it asks another than the GGUF's (not exact:
    another converter path, named, never written by `repair`)."""
    vocab = tok.vocab
    want = MODEL_NAMES.get(str(original))
    if want is None or GGUF_MODELS.get(vocab.vocab_type) == want or want != "t5":
        return []
    changes: dict[str, Any] = {"tokenizer.ggml.model": want, "tokenizer.ggml.add_bos_token": bool(vocab.add_bos),
                               "tokenizer.ggml.add_eos_token": bool(vocab.add_eos),
                               "tokenizer.ggml.add_space_prefix": bool(vocab.add_space_prefix)}
    for role in ("bos", "eos", "unk", "pad"):
        if vocab.special.get(role, -1) >= 0:
            key = "unknown" if role == "unk" else "padding" if role == "pad" else role
            changes[f"tokenizer.ggml.{key}_token_id"] = int(vocab.special[role])
    return [Candidate(MODEL_TYPE, f"tokenizer.ggml.model = {want} (the original is a {original} model; the GGUF's "
                      f"{GGUF_MODELS.get(vocab.vocab_type)!r} runs another algorithm)", "gguf",
                      gguf=lambda meta: dict(changes), exact=False, keys=tuple(changes))]


# --- the original's normalizer ---------------------------------------------------------------------

def _space_layout(part: dict) -> bool:
    """SentencePiece's space layout in a tokenizer.json: spaces written U+2581, one prepended."""
    if part.get("type") == "Prepend":
        return part.get("prepend") == "\u2581"
    return part.get("type") == "Replace" and part.get("pattern") == {"String": " "} and part.get("content") == "\u2581"


def hf_normalizes(data: dict) -> bool:
    """A tokenizer.json whose normalizer does more than SentencePiece's space layout (a WordPiece original is
    classed by its own input experiments)."""
    if (data.get("model") or {}).get("type") == "WordPiece":
        return False
    parts, todo = [], [data.get("normalizer")]
    while todo:
        part = todo.pop()
        if isinstance(part, dict) and part.get("type") == "Sequence":
            todo += list(part.get("normalizers") or [])
        elif isinstance(part, dict):
            parts.append(part)
    return any(not _space_layout(p) for p in parts)


def spm_normalizes(buf: bytes) -> bool:
    """A SentencePiece model whose NormalizerSpec names a rule other than identity (nmt_nfkc by default)."""
    for number, _, value in protobuf.fields(buf):
        if number == 3 and isinstance(value, bytes):  # NormalizerSpec { name = 1 }
            names = [v for n, _, v in protobuf.fields(value) if n == 1 and isinstance(v, bytes)]
            return not names or names[-1] != b"identity"
    return True


def normalized(normalize: Callable[[str], str]) -> list[Candidate]:
    return [Candidate("original-normalized", "both sides given the original's own normalized text (its normalizer, "
                      "which no GGUF key carries)", "input", text=normalize)]


# --- no candidate: segmentation or normalization ----------------------------------------------------

def joined(ids: Sequence[int], tokens: Sequence[str], types: Sequence[int] | None) -> str:
    """The text a side's pieces spell (control tokens left out): the text that side tokenized."""
    keep = (t for t in ids if 0 <= t < len(tokens) and (types is None or int(types[t]) != 3))
    return "".join(tokens[t] for t in keep)


def pieces_class(rows: Sequence[tuple[Any, Any]], tokens: Sequence[str], types: Sequence[int] | None,
                 models_differ: bool) -> str:
    """The class of a case no candidate explains, from its (original, llama.cpp) ids per differing pair."""
    if not rows or any(o is None or g is None for o, g in rows):
        return UNEXPLAINED
    same = all(joined(o, tokens, types) == joined(g, tokens, types) for o, g in rows)
    if not same:
        return NORMALIZATION
    return MODEL_TYPE if models_differ else SEGMENTATION
