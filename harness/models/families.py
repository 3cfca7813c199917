"""Model families: a family name -> the vocabularies that stand for it.

`run --family bpe` checks every model listed here under `bpe`. The shipped
vocabularies are grouped by the tokenizer llama.cpp runs for them (gemma-4's
`gemma4` model is a BPE vocabulary in llama.cpp). The synthetic vocabularies
(`harness.models.synth`, built by `python -m harness synth`) make up `rwkv`,
`plamo2`, `pre-sweep` (one per `tokenizer.ggml.pre` name llama.cpp accepts)
`model-names` (the other `tokenizer.ggml.model` values llama.cpp loads and
tokenizes with) and `sensitivity` (`harness.models.synth_sensitivity`: vocabularies
that hold what the self-test's former blind spots need; the main job runs them).
"""

from __future__ import annotations

from collections.abc import Iterable

from . import synth

FAMILIES: dict[str, tuple[str, ...]] = {
    "spm": ("llama-spm", "baichuan", "phi-3"),
    "bpe": ("aquila", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",
            "gpt-neox", "llama-bpe", "mpt", "qwen2", "qwen35", "refact", "starcoder"),
    "wpm": ("bert-bge",),
    "ugm": ("nomic-bert-moe",),
    "rwkv": ("rwkv-world",),
    "plamo2": ("plamo2",),
    "pre-sweep": tuple(synth.pre_sweep_names()),
    "model-names": ("model-gemma4", "model-hybriddna", "model-whitespace"),
    "sensitivity": tuple(synth.names("sens-")),
}

# Views of a family, for `--family` only (a model's family is still the one above). The nightly
# checks one pre-sweep vocabulary per behaviour with every boundary input and the names that only
# alias a behaviour (`synth.pre_sweep_aliases`) with the main job's share: between two aliases
# nothing differs but the pre name, which a small set of inputs already tells apart.
_ALIASES = tuple(synth.pre_sweep_aliases())
VIEWS: dict[str, tuple[str, ...]] = {
    "pre-behaviours": tuple(n for n in FAMILIES["pre-sweep"] if n not in _ALIASES),
    "pre-aliases": _ALIASES,
}
CHOICES = sorted(FAMILIES) + sorted(VIEWS)  # what --family accepts


def models_of(family: str) -> tuple[str, ...]:
    """The model names of a family; `KeyError` naming the known families when unknown."""
    try:
        return FAMILIES[family] if family in FAMILIES else VIEWS[family]
    except KeyError:
        raise KeyError(f"unknown family {family!r} (known: {', '.join(CHOICES)})") from None


def members(families: Iterable[str]) -> tuple[str, ...]:
    """The models of every family in `families`, in order, each once (`--family`, repeated)."""
    return tuple(dict.fromkeys(model for family in families for model in models_of(family)))


def family_of(model: str) -> str:
    """The family a model name belongs to, or `other` for a path or unknown name."""
    for family, models in FAMILIES.items():
        if model in models:
            return family
    return "other"
