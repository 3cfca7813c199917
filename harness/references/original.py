"""What the original tokenizer says about itself, read as plain data for cases derived from it.

`run --reference` adds boundary cases built from the original's own rules
(`harness.inputs.derived`), not from a list of known bugs. This module reads
those rules without running the original's library (a `tokenizer.json` and the
`tokenizer_config.json` beside it are JSON; a tekken file's pattern is JSON too;
a SentencePiece model is read by `gguf_keys.read_spm`):

- `normalizers`: the normalizer types in order (`NFC`, `NFKC`, `Lowercase`, ...);
- `patterns`: the Split pre-tokenizers' regexes, GPT-2's for a ByteLevel one that splits
  (`use_regex`), a tekken file's `pattern`;
- `added`: every added token with its flags (`lstrip`, `rstrip`,
  `single_word`, `normalized`, `special`);
- `vocab_words`: up to `MAX_WORDS` vocabulary entries, spelled as input text
  (byte-level BPE decoded, U+2581 as a space);
- `add_bos` / `add_eos`: the config's `add_bos_token` / `add_eos_token` (None
  when it does not say), and `post_bos` / `post_eos`: whether the
  post-processor itself puts a token first / last.

Every file read is bounded (`MAX_BYTES`); a file that cannot be read gives
empty rules, not an error: these cases are extra probes, never the check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .specs import ReferenceSpec, parse

MAX_BYTES = 64 << 20   # a tokenizer.json of a 256k vocabulary is about 20 MB
MAX_WORDS = 200_000
# what a ByteLevel pre-tokenizer with use_regex splits by (tokenizers' byte_level.rs)
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


@dataclass(frozen=True)
class AddedToken:
    content: str
    special: bool = False
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False
    normalized: bool = False


@dataclass(frozen=True)
class OriginalRules:
    kind: str = ""
    normalizers: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    added: tuple[AddedToken, ...] = ()
    vocab_words: tuple[str, ...] = field(default=(), repr=False)
    add_bos: bool | None = None
    add_eos: bool | None = None
    post_bos: bool = False
    post_eos: bool = False


def read(spec: str | ReferenceSpec) -> OriginalRules:
    """The rules of the reference `spec`; empty rules when its files cannot be read as expected."""
    ref = parse(spec) if isinstance(spec, str) else spec
    try:
        if ref.kind == "hf":
            return hf_rules(_json(ref.path), _config(ref.path))
        if ref.kind == "tekken":
            data = _json(ref.path)
            pattern = (data.get("config") or {}).get("pattern")
            return OriginalRules(kind="tekken", patterns=(pattern,) if isinstance(pattern, str) else ())
        if ref.kind == "spm":
            return spm_rules(ref.path)
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return OriginalRules(kind=ref.kind)


def _json(path: Path) -> Any:
    with path.open("rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path}: over {MAX_BYTES} bytes")
    return json.loads(data)


def _config(path: Path) -> dict:
    config = path.parent / "tokenizer_config.json"
    if not config.is_file():
        return {}
    data = _json(config)
    return data if isinstance(data, dict) else {}


def hf_rules(data: dict, config: dict) -> OriginalRules:
    """The rules of a parsed tokenizer.json and its tokenizer_config.json."""
    post = data.get("post_processor")
    first, last = _post_edges(post)
    return OriginalRules(kind="hf", normalizers=tuple(_types(data.get("normalizer"), "normalizers")),
                         patterns=tuple(_split_patterns(data.get("pre_tokenizer"))),
                         added=tuple(_added(data.get("added_tokens"))),
                         vocab_words=tuple(_words(data.get("model") or {}, data.get("pre_tokenizer"))),
                         add_bos=_flag(config.get("add_bos_token")), add_eos=_flag(config.get("add_eos_token")),
                         post_bos=first, post_eos=last)


def spm_rules(path: Path) -> OriginalRules:
    from .gguf_keys import read_spm

    with path.open("rb") as handle:
        blob = handle.read(MAX_BYTES + 1)
    if len(blob) > MAX_BYTES:
        raise ValueError(f"{path}: over {MAX_BYTES} bytes")
    model = read_spm(blob)
    words = [p.replace("\u2581", " ") for p, t in zip(model["pieces"], model["types"], strict=False) if t == 1]
    return OriginalRules(kind="spm", vocab_words=tuple(words[:MAX_WORDS]))


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _types(node: object, key: str) -> list[str]:
    """The `type`s of a normalizer (or pre-tokenizer) tree, a Sequence flattened, in order."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [t for child in node.get(key) or [] for t in _types(child, key)]
    return [str(node.get("type"))]


def _split_patterns(node: object) -> list[str]:
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [p for child in node.get("pretokenizers") or [] for p in _split_patterns(child)]
    if node.get("type") == "ByteLevel" and node.get("use_regex", True):
        return [GPT2_PATTERN]
    pattern = node.get("pattern") if node.get("type") == "Split" else None
    regex = pattern.get("Regex") if isinstance(pattern, dict) else None
    return [regex] if isinstance(regex, str) else []


def _added(items: object) -> list[AddedToken]:
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("content"), str) and item["content"]:
            out.append(AddedToken(item["content"], *(bool(item.get(k)) for k in
                                                     ("special", "lstrip", "rstrip", "single_word", "normalized"))))
    return out


def _post_edges(post: object) -> tuple[bool, bool]:
    """(the post-processor puts a special token first, last) for a single sequence."""
    if not isinstance(post, dict):
        return False, False
    kind = post.get("type")
    if kind == "Sequence":
        edges = [_post_edges(p) for p in post.get("processors") or []]
        return any(e[0] for e in edges), any(e[1] for e in edges)
    if kind in ("BertProcessing", "RobertaProcessing"):
        return True, True
    if kind == "TemplateProcessing":
        single = post.get("single") or []
        special = [isinstance(p, dict) and "SpecialToken" in p for p in single]
        return bool(special and special[0]), bool(special and special[-1])
    return False, False


def _words(model: dict, pre: object) -> list[str]:
    """Vocabulary entries as the input text that spells them (at most `MAX_WORDS`)."""
    from tokenizer import unicode as uni

    table = uni.char_to_byte()
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        keys = list(vocab)
    elif isinstance(vocab, list):   # Unigram: [[piece, score], ...]
        keys = [v[0] for v in vocab if isinstance(v, list) and v and isinstance(v[0], str)]
    else:
        return []
    byte_level = "ByteLevel" in _types(pre, "pretokenizers")
    out = []
    for key in keys[:MAX_WORDS]:
        if byte_level and all(ch in table for ch in key):
            out.append(bytes(table[ch] for ch in key).decode("utf-8", "ignore"))
        else:
            out.append(key.replace("\u2581", " ").removeprefix("##"))
    return out
