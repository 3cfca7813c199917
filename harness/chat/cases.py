"""What the chat layer checks: templates attached to vocabularies, and conversations.

A *target* is one chat template on one vocabulary:

- every shipped vocabulary's own templates (`tokenizer.chat_template` and each named
  variant), named `<model>` or `<model>.<variant>`;
- each of the sdist's `models/templates/*.jinja`, named `tmpl-<stem>`, attached to the
  shipped vocabulary whose special tokens the template spells most often (ties and
  templates that spell none go to llama-spm: its BOS/EOS `<s>`/`</s>` are then plain text
  to the template and the count is still exact for that vocabulary). The assignment is
  computed once and committed in `harness/data/chat_targets.json`.

Each conversation of `harness/data/corpora/conversations.jsonl` is rendered with
add_generation_prompt true and false; `{bos}`/`{eos}` in its content become the
vocabulary's BOS/EOS text.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from tokenizer import Tokenizer
from tokenizer.attrs import Attr
from tokenizer.chat.render import special_text

from ..files.atomic import write_text_atomic
from ..files.input_limits import read_side_json
from ..models.paths import resolve
from ..models.shipped import SHIPPED, templates_dir

CONVERSATIONS = Path(__file__).parents[1] / "data" / "corpora" / "conversations.jsonl"
# Which shipped vocabularies carry templates, and the vocabulary of each sdist template:
# written by `assign()` (`python -m harness chat --assign-vocabs`), reviewed, committed.
TARGETS_FILE = Path(__file__).parents[1] / "data" / "chat_targets.json"
FALLBACK_VOCAB = "llama-spm"


@dataclass(frozen=True)
class Target:
    name: str
    model: str  # the vocabulary's name (harness.models.shipped)
    source: str  # the template text
    origin: str  # "gguf", "file" (a GGUF given by path) or the .jinja file name

    @property
    def selector(self) -> str:
        """The `harness chat` arguments that select this target again (for reproduce lines)."""
        if self.origin == "file":
            return f"--model {shlex.quote(self.model)}"
        return f"--target {self.name}"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode("utf-8", "surrogateescape")).hexdigest()


@lru_cache(maxsize=32)
def tokenizer_for(model: str) -> Tokenizer:
    return Tokenizer.from_gguf(resolve(model))


def _specials(tok: Tokenizer) -> set[str]:
    out = set()
    for i in range(tok.n_tokens):
        if tok.token_attr(i) & (Attr.CONTROL | Attr.USER_DEFINED):
            text = tok.token_text(i).decode("utf-8", "replace")
            if len(text.strip()) >= 3 and not text.strip().isalnum():  # markup like <|im_end|>, [INST]
                out.add(text)
    return out


@lru_cache(maxsize=1)
def _special_sets() -> dict[str, frozenset[str]]:
    return {name: frozenset(_specials(tokenizer_for(name))) for name in SHIPPED}


def vocab_for(source: str) -> str:
    """The shipped vocabulary whose special tokens `source` spells most (llama-spm on a tie)."""
    best, score = FALLBACK_VOCAB, 0
    for name, specials in sorted(_special_sets().items()):
        hits = sum(1 for s in specials if s in source)
        if hits > score:
            best, score = name, hits
    return best


def _gguf_templates(name: str) -> list[str]:
    """The template variants of a vocabulary ("" for `tokenizer.chat_template`), sorted."""
    meta = tokenizer_for(name).vocab.metadata
    return sorted(k[len("tokenizer.chat_template"):].lstrip(".") for k in meta
                  if k.startswith("tokenizer.chat_template") and isinstance(meta[k], str))


def assign() -> dict[str, Any]:
    """Maintainers: which shipped vocabularies carry templates, and each sdist template's vocabulary."""
    gguf = {name: variants for name in SHIPPED if (variants := _gguf_templates(name))}
    sdist = {p.stem: vocab_for(p.read_text(encoding="utf-8")) for p in sorted(templates_dir().glob("*.jinja"))}
    data = {"gguf": gguf, "sdist": sdist}
    write_text_atomic(TARGETS_FILE, json.dumps(data, indent=1) + "\n", "chat targets")
    return data


def _assigned() -> dict[str, Any]:
    data: dict[str, Any] = read_side_json(TARGETS_FILE, "chat targets")
    return data


def gguf_targets(models: set[str] | None = None) -> list[Target]:
    """The shipped vocabularies' own templates (of `models` only, when given: nothing else is loaded)."""
    out = []
    for name, variants in _assigned()["gguf"].items():
        if models is not None and name not in models:
            continue
        meta = tokenizer_for(name).vocab.metadata
        for variant in variants:
            key = f"tokenizer.chat_template.{variant}" if variant else "tokenizer.chat_template"
            out.append(Target(f"{name}.{variant}" if variant else name, name, meta[key], "gguf"))
    return out


def file_targets(path: str) -> list[Target]:
    """Every chat template of the GGUF file at `path` (`harness chat --model PATH`).

    Raises `SetupError` when the file carries no `tokenizer.chat_template*` key.
    """
    model = str(resolve(path))
    meta = tokenizer_for(model).vocab.metadata
    variants = _gguf_templates(model)
    if not variants:
        from ..errors import SetupError
        raise SetupError(f"{model}: no tokenizer.chat_template in its metadata, nothing to check")
    stem = Path(model).stem
    return [Target(f"{stem}.{v}" if v else stem, model,
                   meta[f"tokenizer.chat_template.{v}" if v else "tokenizer.chat_template"], "file")
            for v in variants]


def sdist_targets() -> list[Target]:
    assigned = _assigned()["sdist"]
    out = []
    for path in sorted(templates_dir().glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        model = assigned.get(path.stem) or vocab_for(source)
        out.append(Target(f"tmpl-{path.stem}", model, source, path.name))
    return out


def all_targets() -> list[Target]:
    return gguf_targets() + sdist_targets()


def load_conversations(path: Path = CONVERSATIONS) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def instantiate(conv: dict[str, Any], tok: Tokenizer) -> list[dict[str, Any]]:
    """The conversation's messages with {bos}/{eos} replaced by the vocabulary's texts."""
    bos, eos = special_text(tok, "bos"), special_text(tok, "eos")
    text = json.dumps(conv["messages"], ensure_ascii=False).replace("{bos}", json.dumps(bos)[1:-1])
    messages: list[dict[str, Any]] = json.loads(text.replace("{eos}", json.dumps(eos)[1:-1]))
    return messages


@dataclass(frozen=True)
class Case:
    conversation: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    add_generation_prompt: bool

    @property
    def key(self) -> str:
        return f"{self.conversation}/{'gen' if self.add_generation_prompt else 'nogen'}"


def cases(target: Target, conversations: list[dict[str, Any]]) -> Iterator[Case]:
    tok = tokenizer_for(target.model)
    for conv in conversations:
        msgs = instantiate(conv, tok)
        for agp in (True, False):
            yield Case(conv["id"], msgs, conv.get("tools"), agp)
