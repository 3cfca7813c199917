"""What the original tokenizer itself states about its special tokens, read as plain data (no library).

`repair` holds llama.cpp's reading of a GGUF against it, layer by layer (`harness.runs.repair_layers`):
the special ids, whether add_special puts a BOS first and an EOS last, and the end-of-generation set.
Only what the original states is compared; a role it does not name is left out, never guessed.

    hf:      tokenizer_config.json's bos_token / eos_token / unk_token / pad_token (ids from tokenizer.json),
             the model's unk_token, the post-processor's first and last items (else the config's
             add_bos_token / add_eos_token)
    spm:     the trainer's unk_id / bos_id / eos_id / pad_id; tokenizer_config.json's add_bos_token / add_eos_token
    tekken:  the special tokens <s>, </s>, <unk>, <pad>; the BOS first, as mistral-common does
    (all)    `--reference-arg add_bos=` / `add_eos=` as the three-way run takes them; the EOS ends a generation
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..files.input_limits import loads, read_tokenizer_file
from .gguf_keys import _template_ends, read_spm
from .hf import config_beside
from .specs import ReferenceSpec, parse

STATED_ROLES = ("bos", "eos", "unk", "pad")


def stated_specials(spec: str | ReferenceSpec, args: Mapping[str, str] | None = None) -> dict:
    """What the original itself says of its special tokens: `{"ids": {role: id}, "add_bos", "add_eos", "eog"}`.

    `ids` holds the roles of `STATED_ROLES` it names (a tokenizer_config.json's `bos_token` ..., a
    SentencePiece trainer's `bos_id` ..., a tekken file's `<s>` ...); `add_bos` / `add_eos` what add_special
    puts first and last (the post-processor; a `--reference-arg`, else tokenizer_config.json; tekken: the
    BOS), None where it says nothing; `eog` the ids it ends a generation on (its EOS). A role it does not
    name is left out, never guessed: `repair` compares llama.cpp's reading of the GGUF with these only.
    """
    ref = parse(spec) if isinstance(spec, str) else spec
    given = {k: v.lower() in ("true", "1", "yes") for k, v in (args or {}).items() if k in ("add_bos", "add_eos")}
    where = str(ref.source or ref.path)
    if ref.kind == "hf":
        out = _hf_stated(loads(read_tokenizer_file(ref.path), where), config_beside(ref.path))
    elif ref.kind == "spm":
        out = _spm_stated(read_spm(read_tokenizer_file(ref.path)), config_beside(ref.path))
    else:
        out = _tekken_stated(loads(read_tokenizer_file(ref.path), where))
    out.update({f: given[f] for f in given})
    out["eog"] = sorted({out["ids"]["eos"]} if "eos" in out["ids"] else set())
    return out


def _token_id(data: dict, token: Any) -> int | None:
    """The id of a tokenizer_config.json token value (a string, or `{"content": ...}`) in tokenizer.json."""
    text = token.get("content") if isinstance(token, dict) else token
    if not isinstance(text, str):
        return None
    for added in data.get("added_tokens") or []:
        if isinstance(added, dict) and added.get("content") == text and isinstance(added.get("id"), int):
            return int(added["id"])
    vocab = (data.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        found = vocab.get(text)
        return found if isinstance(found, int) else None
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        return next((i for i, v in enumerate(vocab) if isinstance(v, list) and v and v[0] == text), None)
    return None


def _hf_stated(data: dict, config: dict) -> dict:
    ids = {role: _token_id(data, config.get(f"{role}_token")) for role in STATED_ROLES}
    model = data.get("model") or {}
    if ids["unk"] is None and model.get("unk_token") is not None:
        ids["unk"] = _token_id(data, model["unk_token"])
    if ids["unk"] is None and isinstance(model.get("unk_id"), int):
        ids["unk"] = int(model["unk_id"])
    first, last = _template_ends(data.get("post_processor"))
    out: dict[str, Any] = {"ids": {r: i for r, i in ids.items() if i is not None}}
    out["add_bos"] = first is not None if data.get("post_processor") is not None else \
        (bool(config["add_bos_token"]) if "add_bos_token" in config else None)
    out["add_eos"] = None if model.get("type") == "WordPiece" else (
        last is not None if data.get("post_processor") is not None else
        (bool(config["add_eos_token"]) if "add_eos_token" in config else None))
    if first is not None and "bos" not in out["ids"]:
        out["ids"]["bos"] = first
    return out


def _spm_stated(model: dict, config: dict) -> dict:
    ids = {role: i for role, i in model.get("ids", {}).items() if 0 <= i < len(model["pieces"])}
    return {"ids": ids, "add_bos": bool(config["add_bos_token"]) if "add_bos_token" in config else None,
            "add_eos": bool(config["add_eos_token"]) if "add_eos_token" in config else None}


def _tekken_stated(data: dict) -> dict:
    texts = {"bos": "<s>", "eos": "</s>", "unk": "<unk>", "pad": "<pad>"}
    ranks = {t.get("token_str"): t.get("rank") for t in data.get("special_tokens") or [] if isinstance(t, dict)}
    if not ranks:  # no list: mistral-common's own default special tokens, <unk> <s> </s> first
        ranks = {"<unk>": 0, "<s>": 1, "</s>": 2}
    ids = {role: rank for role, text in texts.items() if isinstance(rank := ranks.get(text), int)}
    return {"ids": ids, "add_bos": True, "add_eos": False}
