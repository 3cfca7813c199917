"""The by-text rules llama.cpp's vocabulary loader applies after reading token types.

llama.cpp (src/llama-vocab.cpp, `llama_vocab::impl::load`) does not trust token
types alone: it recognises end-of-turn, end-of-message and fill-in-the-middle
tokens by their text, marks control tokens whose text says "unused", builds the
end-of-generation set from another list of texts, and sets strip attributes by
model name. This module holds those tables and applies them, in llama.cpp's
order, to a `RuleInput`: the few fields of the loader's state the rules read,
and the special ids and attributes they change (`apply`).

Where llama.cpp keeps the first match while walking its `unordered_map`, the
walk follows `tokenizer.cpp_map_order.map_order`, so the same token wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from . import cpp_map_order
from .attrs import Attr
from .errors import UnsupportedVocab

# role -> texts that make a token that role when its id is not set by metadata
DETECT_BY_TEXT: dict[str, tuple[str, ...]] = {
    "eot": (
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
        "<end_of_utterance>",
    ),
    "eom": ("<|eom_id|>",),
    "fim_pre": (
        "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
        "▁<PRE>", "<|code_prefix|>", "<|prefix|>",
    ),
    "fim_suf": (
        "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
        "▁<SUF>", "<|code_suffix|>", "<|suffix|>",
    ),
    "fim_mid": (
        "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
        "▁<MID>", "<|code_middle|>", "<|middle|>",
    ),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}

EOG_TEXTS = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
    "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
    "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
)

# gpt-oss: always rendered, whatever the file says
FORCE_USER_DEFINED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")

_CONTROL = int(Attr.CONTROL)


@dataclass
class RuleInput:
    """What the by-text rules read (texts, names) and change in place (`special`, `attrs`)."""

    texts: tuple[bytes, ...]
    token_to_id: Mapping[bytes, int]
    special: dict[str, int]
    attrs: list[int]
    name: bytes  # general.name, exact bytes ("" when absent)
    pre: bytes  # tokenizer.ggml.pre as the file spells it
    arch: bytes  # general.architecture
    _rank: np.ndarray | None = field(default=None, repr=False)

    def map_rank(self) -> np.ndarray:
        """Position of each id in llama.cpp's `token_to_id` iteration order (computed once)."""
        if self._rank is None:
            order = cpp_map_order.map_order(cpp_map_order.hash_all(self.texts))
            self._rank = np.empty(len(order), dtype=np.int64)
            self._rank[order] = np.arange(len(order))
        return self._rank


def apply(d: RuleInput) -> tuple[set[int], tuple[int, ...]]:
    """Every rule in llama.cpp's order: (end-of-generation ids, special-token cache)."""
    detect_by_text(d)
    mark_unused(d)
    eog = build_eog(d)
    cache = special_cache(d)
    strip_by_model(d, cache)
    return eog, cache


def _b(texts: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(t.encode("utf-8") for t in texts)


def detect_by_text(d: RuleInput) -> None:
    """EOT/EOM/FIM ids by text, first match in llama.cpp's map order; forces CONTROL."""
    for role, texts in DETECT_BY_TEXT.items():
        if d.special[role] != -1:
            continue
        found = [d.token_to_id[t] for t in _b(texts) if t in d.token_to_id]
        if not found:
            continue
        chosen = found[0] if len(found) == 1 else _first_in_map_order(d, found)
        d.special[role] = chosen
        d.attrs[chosen] |= _CONTROL


def _first_in_map_order(d: RuleInput, ids: list[int]) -> int:
    rank = d.map_rank()
    return min(ids, key=lambda i: rank[i])


def mark_unused(d: RuleInput) -> None:
    """Control tokens whose text contains "unused" get the UNUSED bit."""
    for i in _with_any(d.attrs, _CONTROL):
        if b"unused" in d.texts[i].split(b"\0", 1)[0]:  # strstr stops at a NUL
            d.attrs[i] |= int(Attr.UNUSED)


def _with_any(attrs: list[int], mask: int) -> list[int]:
    """Ids whose attributes share a bit with `mask`, ascending."""
    return np.nonzero(np.asarray(attrs, dtype=np.int64) & mask)[0].tolist()


def build_eog(d: RuleInput) -> set[int]:
    """The end-of-generation set, with llama.cpp's special cases."""
    eog = {d.special[r] for r in ("fim_pad", "fim_rep", "fim_sep") if d.special[r] != -1}
    for t in _b(EOG_TEXTS):
        i = d.token_to_id.get(t)
        if i is not None:
            eog.add(i)
            d.attrs[i] |= _CONTROL
    for t in _b(FORCE_USER_DEFINED):
        i = d.token_to_id.get(t)
        if i is not None:
            d.attrs[i] = int(Attr.USER_DEFINED)
    eog.update(d.special[r] for r in ("eos", "eot", "eom") if d.special[r] != -1)
    _drop_harmony_end(d, eog)
    _drop_normal_s(d, eog)
    return eog


def _texts_of(d: RuleInput, eog: set[int]) -> dict[bytes, int]:
    # std::set iterates ascending; later ids overwrite, as llama.cpp's loop does
    return {d.texts[i]: i for i in sorted(eog) if 0 <= i < len(d.texts)}


def _drop_harmony_end(d: RuleInput, eog: set[int]) -> None:
    texts = _texts_of(d, eog)
    has_call = b"<|call|>" in texts or b"<|calls|>" in texts
    if b"<|end|>" in texts and has_call and (b"<|return|>" in texts or b"<|flush|>" in texts):
        end = texts[b"<|end|>"]
        eog.discard(end)
        d.attrs[end] = int(Attr.USER_DEFINED)


def _drop_normal_s(d: RuleInput, eog: set[int]) -> None:
    texts = _texts_of(d, eog)
    if b"</s>" in texts and (b"<|tool_response>" in texts or b"<|plamo:eos|>" in texts):
        s = texts[b"</s>"]
        eog.discard(s)
        d.attrs[s] = int(Attr.NORMAL)


def special_cache(d: RuleInput) -> tuple[int, ...]:
    """Ids the partitioner splits out, in llama.cpp's order (std::sort by length, descending)."""
    mask = int(Attr.CONTROL | Attr.USER_DEFINED | Attr.UNKNOWN)
    ids = _with_any(d.attrs, mask)
    texts = d.texts
    return tuple(cpp_map_order.std_sort(ids, lambda a, b: len(texts[a]) > len(texts[b])))


def strip_by_model(d: RuleInput, cache: tuple[int, ...]) -> None:
    """LSTRIP/RSTRIP attributes llama.cpp sets by pre-tokenizer, architecture or model name."""
    name = d.name.lower()  # std::tolower: ASCII only, as bytes.lower
    pre, arch = d.pre, d.arch
    if _any_in(pre, (b"jina-v2-de", b"jina-v2-es", b"jina-v2-code")) or _any_in(
        arch, (b"nomic-bert-moe", b"jina-bert-v3")
    ):
        _set(d, b"<mask>", Attr.LSTRIP, on=True, required=False)
    elif _any_in(name, (b"phi-3", b"phi3")):
        for i in cache:
            d.attrs[i] |= int(Attr.RSTRIP)
        _set(d, b"</s>", Attr.RSTRIP, on=True, required=True)
        for t in (b"<unk>", b"<s>", b"<|endoftext|>"):
            _set(d, t, Attr.RSTRIP, on=False, required=True)
    elif b"modern-bert" in name:
        _set(d, b"[MASK]", Attr.LSTRIP, on=True, required=False)


def _any_in(text: bytes, parts: tuple[bytes, ...]) -> bool:
    return any(p in text for p in parts)


def _set(d: RuleInput, text: bytes, bit: Attr, *, on: bool, required: bool) -> None:
    i = d.token_to_id.get(text)
    if i is None:
        if required:
            raise UnsupportedVocab(f"general.name says phi-3, but token {text!r} is missing: llama.cpp "
                                   "fails to load (its phi-3 attribute rules look the token up with "
                                   "token_to_id.at)")
        return
    d.attrs[i] = d.attrs[i] | int(bit) if on else d.attrs[i] & ~int(bit)


DNA_MARKER = "\ue000".encode()  # hybriddna's suffix that keeps k-mer ids apart from plain text


def bare_dna_kmers(texts: tuple[bytes, ...], token_to_id: Mapping[bytes, int]) -> tuple[bytes, ...]:
    """Token texts as llama.cpp's hybriddna load leaves them: k-mers lose their marker.

    Only the texts change; lookups by text (`token_to_id`) keep the marked keys,
    and the k-mers are the block that follows `<oov>`.
    """
    oov = token_to_id.get(b"<oov>")
    if oov is None:
        return texts
    n = len(DNA_MARKER)
    return texts[:oov + 1] + tuple(
        t[:-n] if len(t) > n and t.endswith(DNA_MARKER) else t for t in texts[oov + 1:]
    )


def hex_byte(text: bytes) -> int | None:
    """N for a token text spelled `<0xNN>` (hex digits of either case), else None."""
    if len(text) == 6 and text[:3] == b"<0x" and text[5:] == b">" and all(
            c in b"0123456789abcdefABCDEF" for c in text[3:5]):
        return int(text[3:5], 16)
    return None
