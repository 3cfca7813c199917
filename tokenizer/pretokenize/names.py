"""`tokenizer.ggml.pre` values -> pre-tokenizer behaviour and the flags llama.cpp sets with it.

llama.cpp's `llama_vocab::impl::load()` (pinned version) first settles a set of
boolean flags from the tokenizer model (`gpt2`, `llama`, `bert`, ...), then,
for BPE models only, maps the `tokenizer.ggml.pre` string onto one of its
`LLAMA_VOCAB_PRE_TYPE_*` behaviours, switching some flags on the way.  Only
after that does it read `tokenizer.ggml.add_bos_token` and friends from the
file.  `resolve()` reproduces that first part: the behaviour name (the
`LLAMA_VOCAB_PRE_TYPE_*` suffix, lower-cased) plus the complete flag set as
it stands before the metadata overrides.

    >>> resolve("llama-bpe", model="gpt2").pre_type
    'llama3'
    >>> resolve("qwen2", model="gpt2").overrides["clean_spaces"]
    False
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..errors import UnsupportedVocab

# The flags load() initialises in `llama_vocab::impl` before looking at the model.
FLAG_DEFAULTS: Mapping[str, bool] = MappingProxyType({
    "add_space_prefix": False,
    "add_bos": False,
    "add_eos": False,
    "add_sep": False,
    "ignore_merges": False,
    "clean_spaces": False,
    "remove_extra_whitespaces": False,
    "escape_whitespaces": True,
    "treat_whitespace_as_suffix": False,
})

# Models llama.cpp tokenizes with its BPE session (`gemma4` forces pre "gemma4").
BPE_MODELS = frozenset({"gpt2", "hybriddna", "whitespace", "gemma4"})

# Flags each model type sets; BPE models get theirs before the pre name is looked at.
MODEL_FLAGS: Mapping[str, Mapping[str, bool]] = MappingProxyType({
    "bpe": {"add_space_prefix": False, "escape_whitespaces": False, "clean_spaces": True},
    "llama": {"add_space_prefix": True, "clean_spaces": False, "add_bos": True, "add_eos": False},
    "bert": {"add_space_prefix": False, "clean_spaces": True, "add_bos": True, "add_eos": False,
             "add_sep": True},
    "t5": {"add_bos": False, "add_eos": True},
    "rwkv": {"add_space_prefix": False, "clean_spaces": False, "add_bos": False, "add_eos": False},
    "plamo2": {},
})

_NO_CLEAN = {"clean_spaces": False}


def _names(pre_type: str, names: str, **flags: bool) -> list[tuple[str, str, dict[str, bool]]]:
    return [(name, pre_type, dict(flags)) for name in names.split()]


# One row group per branch of load()'s if/else chain over `tokenizer_pre`.
_TABLE = [
    *_names("default", "default"),
    *_names("minicpm5", "minicpm5", ignore_merges=True),
    *_names("llama3", "llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 "
            "jina-v5-nano", ignore_merges=True, add_bos=True),
    *_names("deepseek_llm", "deepseek-llm", **_NO_CLEAN),
    *_names("deepseek_coder", "deepseek-coder", **_NO_CLEAN),
    *_names("deepseek3_llm", "deepseek-v3", **_NO_CLEAN),
    *_names("spark2_5", "spark2_5", **_NO_CLEAN),
    *_names("youtu", "youtu", clean_spaces=False, ignore_merges=True),
    *_names("falcon", "falcon"),
    *_names("mpt", "mpt"),
    *_names("starcoder", "starcoder"),
    *_names("gpt2", "gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 "
            "mellum modern-bert"),
    *_names("jais2", "jais-2"),
    *_names("gemma4", "gemma4 granite-embed-multi-311m", escape_whitespaces=True),
    *_names("sarvam_moe", "sarvam-moe", escape_whitespaces=True, clean_spaces=False),
    *_names("gpt2", "jina-v1-en jina-v2-code roberta-bpe", add_sep=True),
    *_names("whitespace", "whitespace"),
    *_names("refact", "refact"),
    *_names("command_r", "command-r", **_NO_CLEAN),
    *_names("qwen2", "qwen2 deepseek-r1-qwen kormo f2llmv2", **_NO_CLEAN),
    *_names("qwen35", "qwen35", **_NO_CLEAN),
    *_names("stablelm2", "stablelm2"),
    *_names("olmo", "olmo"),
    *_names("dbrx", "dbrx"),
    *_names("smaug", "smaug-bpe"),
    *_names("poro", "poro-chat", **_NO_CLEAN),
    *_names("chatglm4", "chatglm-bpe"),
    *_names("chatglm4", "glm4 glm5", ignore_merges=True),
    *_names("viking", "viking", **_NO_CLEAN),
    *_names("jais", "jais"),
    *_names("tekken", "tekken", clean_spaces=False, ignore_merges=True, add_bos=True),
    *_names("smollm", "smollm", **_NO_CLEAN),
    *_names("codeshell", "codeshell"),
    *_names("bloom", "bloom"),
    *_names("gpt3_finnish", "gpt3-finnish"),
    *_names("exaone", "exaone"),
    *_names("gpt2", "exaone4"),
    *_names("exaone_moe", "exaone-moe"),
    *_names("chameleon", "chameleon", add_bos=True, clean_spaces=False),
    *_names("minerva", "minerva-7b"),
    *_names("qwen2", "megrez"),
    *_names("gpt4o", "gpt-4o llama4 kanana2 talkie", **_NO_CLEAN),
    *_names("granite_emb_multi", "granite-embed-multi-97m", clean_spaces=False,
            ignore_merges=True),
    *_names("tiny_aya", "tiny_aya cohere2moe", **_NO_CLEAN),
    *_names("superbpe", "superbpe", **_NO_CLEAN),
    *_names("trillion", "trillion", **_NO_CLEAN),
    *_names("granite_docling", "granite-docling", **_NO_CLEAN),
    *_names("bailingmoe", "bailingmoe bailingmoe2 llada-moe", **_NO_CLEAN),
    *_names("seed_coder", "seed-coder", **_NO_CLEAN),
    *_names("hunyuan", "hunyuan", **_NO_CLEAN),
    *_names("hunyuan_dense", "hunyuan-dense", **_NO_CLEAN),
    *_names("hy_v4", "hy_v4", **_NO_CLEAN),
    *_names("joyai_llm", "joyai-llm", **_NO_CLEAN),
    *_names("kimi_k2", "kimi-k2", **_NO_CLEAN),
    *_names("ufakzeka", "ufakzeka", **_NO_CLEAN),
    *_names("grok_2", "grok-2", **_NO_CLEAN),
    *_names("afmoe", "afmoe", **_NO_CLEAN),
    *_names("laguna", "laguna", **_NO_CLEAN),
    *_names("minimax_m2", "minimax-m2", **_NO_CLEAN),
    *_names("solar_open", "solar-open", **_NO_CLEAN),
    *_names("mellum2", "mellum2"),
]


# Names whose load() branch sets `special_bos_id = LLAMA_TOKEN_NULL`.
_NO_DEFAULT_BOS = frozenset({"chatglm-bpe", "glm4", "glm5"})


def _build_registry() -> Mapping[str, tuple[str, Mapping[str, bool]]]:
    registry: dict[str, tuple[str, Mapping[str, bool]]] = {}
    for name, pre_type, flags in _TABLE:
        if name in registry:
            raise ValueError(f"pre-tokenizer name {name!r} listed twice")
        registry[name] = (pre_type, MappingProxyType(flags))
    return MappingProxyType(registry)


PRE_NAMES = _build_registry()


@dataclass(frozen=True)
class PreSpec:
    """What a `tokenizer.ggml.pre` value means to llama.cpp.

    `name` is the pre-tokenizer name llama.cpp reports (the file's value,
    "default" when the key is missing, "gemma4" for the gemma4 model);
    `pre_type` the behaviour (`LLAMA_VOCAB_PRE_TYPE_*` suffix, lower case);
    `overrides` the complete flag set load() holds after the model and pre
    branches, before `tokenizer.ggml.add_*` / `add_space_prefix` /
    `remove_extra_whitespaces` keys from the file override it.
    `no_default_bos`: load() drops the model's default BOS id (chatglm-bpe,
    glm4, glm5); `tokenizer.ggml.bos_token_id` in the file still sets one.
    `merges_optional`: load() accepts a file without `tokenizer.ggml.merges`
    (kimi-k2 only; every other BPE vocabulary without merges is refused).
    `force_add_bos`: after reading `tokenizer.ggml.add_bos_token`, load()
    turns add_bos back on for the gemma4 behaviour (llama.cpp PR 21500).
    """

    name: str
    pre_type: str
    overrides: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))
    no_default_bos: bool = False
    merges_optional: bool = False
    force_add_bos: bool = False


def _flags(*layers: Mapping[str, bool]) -> Mapping[str, bool]:
    merged = dict(FLAG_DEFAULTS)
    for layer in layers:
        merged.update(layer)
    return MappingProxyType(merged)


def _unknown(pre: str) -> UnsupportedVocab:
    near = difflib.get_close_matches(pre, PRE_NAMES, n=5, cutoff=0.5)
    hint = f"; nearest known: {', '.join(near)}" if near else ""
    return UnsupportedVocab(
        f"tokenizer.ggml.pre = {pre!r} is not a pre-tokenizer llama.cpp knows "
        f"(it refuses the file with \"unknown pre-tokenizer type\"){hint}; "
        f"{len(PRE_NAMES)} names are known"
    )


def resolve(pre: str | None, *, model: str) -> PreSpec:
    """The behaviour and flags llama.cpp's load() derives from `model` and `pre`.

    Non-BPE models ignore `pre` (llama.cpp uses the default behaviour for
    them).  A BPE model with no pre key gets "default", with a warning in
    llama.cpp; an unknown value raises `UnsupportedVocab`.
    """
    if model not in BPE_MODELS:
        return PreSpec(pre or "default", "default", _flags(MODEL_FLAGS.get(model, {})))
    if model == "gemma4":
        pre = "gemma4"
    if not pre:
        return PreSpec("default", "default", _flags(MODEL_FLAGS["bpe"]))
    try:
        pre_type, flags = PRE_NAMES[pre]
    except KeyError:
        raise _unknown(pre) from None
    return PreSpec(pre, pre_type, _flags(MODEL_FLAGS["bpe"], flags),
                   no_default_bos=pre in _NO_DEFAULT_BOS, merges_optional=pre == "kimi-k2",
                   force_add_bos=pre_type == "gemma4")
