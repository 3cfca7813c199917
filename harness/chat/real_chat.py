"""Originals with chat templates for the three-way message check, built from the real set.

No original of the real set (harness/data/real_tokenizers.toml) ships a chat template:
llama3-early is a bare tokenizer.json, deepseek-v4's tokenizer_config.json has no
`chat_template`, all-MiniLM-L6-v2 is an encoder, and the Mistral entries are SentencePiece or
tekken files. So each pair here puts a model repository's own template (llama.cpp's sdist
copy, `models/templates/*.jinja`, sha256-checked with the sdist) into a real original's
tokenizer folder, the way the model's authors ship it, and converts a folder with llama.cpp's
own converter:

- `deepseek-r1`: deepseek-v4's tokenizer with DeepSeek-R1's template; the GGUF carries the same one;
- `deepseek-r1-older`: the GGUF is converted from the template's older revision (before the
  DeepSeek-R1 repositories made the generation prompt open a `<think>` block, 2025-02), and checked
  against the current one: a GGUF converted before the repository fixed its template;
- `deepseek-v4`: deepseek-v4's tokenizer with DeepSeek-V4's own template (it reads
  `enable_thinking`, which llama-server sets and transformers does not);
- `llama3-early`: the early Llama 3 tokenizer with Llama 3.1 Instruct's template (BOS written by
  the template, the date injected by `strftime_now`, tools).

    python -m harness chat --real --report reports/chat-real     # build (cached), then check three ways
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..files.atomic import write_text_atomic
from ..models.real_set import FETCH_REAL_COMMAND, real_dir
from ..models.shipped import cache_dir, templates_dir

R1_TEMPLATE = "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"
R1_THINK = "{{'<｜Assistant｜><think>\\n'}}"


def r1_before_think(source: str) -> str:
    """DeepSeek-R1's template as it was before its generation prompt opened `<think>`."""
    if R1_THINK not in source:
        raise SetupError(f"{R1_TEMPLATE}: its generation prompt no longer reads {R1_THINK}")
    return source.replace(R1_THINK, "{{'<｜Assistant｜>'}}")


@dataclass(frozen=True)
class ChatPair:
    """An original folder (`base` from the real set + `template`) and the GGUF to check against it."""

    name: str
    base: str  # the real-set entry whose tokenizer files are used
    template: str  # the sdist's models/templates file: the original's template
    config: tuple[tuple[str, str], ...] = ()  # tokenizer_config.json keys to set (special tokens)
    gguf_revision: Callable[[str], str] | None = None  # the template the GGUF was converted from, if older


PAIRS = (
    ChatPair("deepseek-r1", "deepseek-v4", R1_TEMPLATE),
    ChatPair("deepseek-r1-older", "deepseek-v4", R1_TEMPLATE, gguf_revision=r1_before_think),
    ChatPair("deepseek-v4", "deepseek-v4", "deepseek-ai-DeepSeek-V4.jinja"),
    ChatPair("llama3-early", "llama3-early", "meta-llama-Llama-3.1-8B-Instruct.jinja",
             config=(("bos_token", "<|begin_of_text|>"), ("eos_token", "<|eot_id|>"),
                     ("tokenizer_class", "PreTrainedTokenizerFast"))),
)


def root() -> Path:
    return cache_dir() / "real-chat"


def _folder(pair: ChatPair, where: Path, template: str) -> Path:
    """A copy of the base original's files with `template` as its tokenizer_config.json chat_template."""
    base = real_dir() / pair.base
    if not (base / "tokenizer.json").is_file():
        raise SetupError(f"the real set's {pair.base} is not fetched: {FETCH_REAL_COMMAND}")
    where.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(base / "tokenizer.json", where / "tokenizer.json")
    config: dict[str, Any] = {}
    if (base / "tokenizer_config.json").is_file():
        config = json.loads((base / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.update(dict(pair.config))
    config["chat_template"] = template
    write_text_atomic(where / "tokenizer_config.json", json.dumps(config, ensure_ascii=False, indent=1) + "\n")
    return where


def build(pair: ChatPair, *, log: Callable[[str], None] = print) -> tuple[Path, Path]:
    """(the GGUF, the original folder) of `pair`, converted once and then cached."""
    path = templates_dir() / pair.template
    if not path.is_file():
        raise SetupError(f"{path}: missing, fetch llama.cpp's sources first: python -m harness fetch")
    template = path.read_text(encoding="utf-8")
    where = root() / pair.name
    original = _folder(pair, where / "original", template)
    source = original if pair.gguf_revision is None else _folder(pair, where / "converted-from",
                                                                 pair.gguf_revision(template))
    gguf = where / f"{pair.name}-chat.gguf"
    stamp = where / "built.json"
    key = {"template": template, "gguf_template": (source / "tokenizer_config.json").read_text(encoding="utf-8")}
    if gguf.is_file() and stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) == key:
        return gguf, original
    from ..models.convert import convert, describe
    record = convert(source, gguf, log=lambda s: None)
    if not gguf.is_file():
        raise SetupError(f"{pair.name}: llama.cpp's converter wrote no GGUF: {describe(record)}")
    write_text_atomic(stamp, json.dumps(key) + "\n")
    log(f"{pair.name}: converted {source} -> {gguf}")
    return gguf, original
