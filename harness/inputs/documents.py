"""Long documents for the corpora: the inputs on which the engines take their batch paths.

The engines switch paths on calls with many distinct words (SPM merges in numpy
rows from 640 distinct segments, UGM a batched Viterbi from 256 missing words once
3,000 have been met, WPM a batched greedy match from 2,000, BPE batched merges); a
sentence never reaches them. Every vocabulary gets the same few documents, shared
and deterministic, with only its own special tokens planted in context:

- `doc-diverse`: `harness/data/corpora/diverse.txt` whole (300,000 characters in 26 languages,
  most words occurring once; `corpora/build_diverse.py`), pinned by sha256;
- `doc-mixed`: about 96 KiB (past 64 KiB) built by a seeded builder from lines of
  the diverse text, code, numbers and dates, runs of whitespace (spaces, tabs,
  CR LF, blank lines) and the vocabulary's own control and user-defined tokens
  glued to words, spaced, at line starts and doubled;
- with `GGUF_PARITY_DOCUMENTS=full` (the nightly) also `doc-large`: about 900 KiB,
  the diverse lines shuffled and repeated around the mixed document.

`GGUF_PARITY_DOCUMENTS=mixed` keeps `doc-mixed` alone (the nightly's sweeps of pre-tokenizer
names, whose engines the shipped vocabularies' documents already take), `off` leaves them out.
A golden holds each document as its sha256 and size and llama.cpp's answer as a digest per block of ids
(`harness.golden.digest`); `attach_inputs` rebuilds the text at replay time and
refuses a document that is not the recorded one.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

from ..environment_vars import DOCUMENT_LEVELS, DOCUMENTS
from ..models.model import Model, as_model
from .cases import chosen_tokens, encodable, make_case

CORPORA_DIR = Path(__file__).resolve().parents[1] / "data" / "corpora"  # package data: ships in the wheel
DIVERSE = CORPORA_DIR / "diverse.txt"
DIVERSE_SHA256 = "261bf0319ec34e44b7428cdd604c6f3f0bdc85f439c37347f39825e0e9701253"
LEVEL_ENV = DOCUMENTS.name   # default, full, mixed or off
LEVELS = DOCUMENT_LEVELS
MIXED_BYTES = 96 << 10
LARGE_BYTES = 900 << 10
SEED = 29
SLOT = "\x00slot\x00"   # where a special token goes; never left in a document

CODE = (
    'def parse(path: str) -> dict[str, int]:\n    with open(path, "rb") as f:\n'
    '        return {k: v for k, v in load(f)}\n',
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\nreturn sum >> 3;\n",
    '{"id": 42, "name": "caf\u00e9", "tags": ["a", "b"], "ok": true, "ratio": 0.125}\n',
    "if [ -f ~/.bashrc ]; then source ~/.bashrc; fi && echo \"$HOME\" | tr a-z A-Z\n",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;\n",
    "<div class=\"note\">x &lt; y &amp;&amp; y &gt; z</div>\n",
    "    # a comment after four spaces\n        return self._cache.get(key, None)  # noqa\n",
)
SPACES = (" " * 2, " " * 7, " " * 33, "\t", "\t\t", "\r\n", "\n\n\n", " \n ", "\u00a0", "\u3000", "\n\t \n")


class DocumentError(ValueError):
    """A document that cannot be built as recorded (a changed corpus file); names it and what to do."""


def level() -> str:
    return DOCUMENTS.get()


def diverse_text() -> str:
    """harness/data/corpora/diverse.txt, checked against its pinned sha256."""
    data = DIVERSE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != DIVERSE_SHA256:
        raise DocumentError(f"{DIVERSE}: sha256 {digest[:16]}... is not the pinned {DIVERSE_SHA256[:16]}... "
                            "(rebuild it with python corpora/build_diverse.py, or re-pin and re-record the goldens)")
    return data.decode("utf-8")


def mixed_template(lines: list[str], size: int = MIXED_BYTES, seed: int = SEED) -> str:
    """The shared mixed document with `SLOT` where each vocabulary's special tokens go."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        kind = rng.choice(("prose", "prose", "prose", "code", "numbers", "spaces", "slot"))
        part = _part(kind, rng, lines)
        parts.append(part)
        total += len(part.encode("utf-8"))
    return "".join(parts)


def _part(kind: str, rng: random.Random, lines: list[str]) -> str:
    if kind == "prose":
        return rng.choice(lines) + rng.choice(("\n", " ", "\n\n"))
    if kind == "code":
        return rng.choice(CODE)
    if kind == "numbers":
        return " ".join(_number(rng) for _ in range(rng.randint(3, 12))) + rng.choice((". ", "\n"))
    if kind == "spaces":
        return "word" + rng.choice(SPACES) + rng.choice(("end", "12", "(", "Über", ""))
    templates = ("Hello{t}world ", " {t} ", "\n{t}line ", "{t}{t}", "The end. {t}", "({t})")
    return rng.choice(templates).replace("{t}", SLOT)


def _number(rng: random.Random) -> str:
    forms = (
        lambda: str(rng.randint(0, 9)),
        lambda: str(rng.randint(10, 10**6)),
        lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(7, 40))),
        lambda: f"{rng.randint(0, 9999)}.{rng.randint(0, 999):03d}",
        lambda: f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        lambda: f"{rng.randint(1, 999):,}".replace(",", rng.choice((",", " ", "\u202f"))) + "\u20ac",
        lambda: "\u0661\u0662\u0663" if rng.random() < 0.5 else "\u0967\u0968\u0969",
    )
    return rng.choice(forms)()


def plant(template: str, tokens: list[str]) -> str:
    """`template` with its slots filled by `tokens` in turn (none: the slots are dropped)."""
    pieces = template.split(SLOT)
    if not tokens:
        return "".join(pieces)
    out = [pieces[0]]
    for k, piece in enumerate(pieces[1:]):
        out += [tokens[k % len(tokens)], piece]
    return "".join(out)


def large_document(lines: list[str], mixed: str, size: int = LARGE_BYTES, seed: int = SEED) -> str:
    """At most `size` bytes, cut at a line end: the mixed document, then the diverse lines shuffled, twice."""
    rng = random.Random(seed + 1)
    parts = [mixed, "\n"]
    for _ in range(2):
        shuffled = lines[:]
        rng.shuffle(shuffled)
        parts += ["\n".join(shuffled), "\n"]
    data = "".join(parts).encode("utf-8")[:size]
    return data[:data.rfind(b"\n") + 1].decode("utf-8")


def documents(model: Model | str | os.PathLike | None, level_name: str | None = None) -> list[dict]:
    """The document cases for one vocabulary, each with its `"document"` identity (sha256, size)."""
    level_name = level() if level_name is None else level_name
    if level_name == "off":
        return []
    diverse = diverse_text()
    lines = [line for line in diverse.split("\n") if line]
    tokens = special_texts(model) if model is not None else []
    mixed = plant(mixed_template(lines), tokens)
    docs = [("doc-diverse", diverse), ("doc-mixed", mixed)]
    if level_name == "mixed":
        docs = docs[1:]
    if level_name == "full":
        docs.append(("doc-large", large_document(lines, mixed)))
    return [document_case(case_id, text) for case_id, text in docs]


def document_case(case_id: str, text: str) -> dict:
    """A case whose input is a document: `{"id", "text", "document": {"sha256", "size"}}`."""
    case = make_case(case_id, text)
    data = text.encode("utf-8")
    case["document"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    return case


def special_texts(model: Model | str | os.PathLike) -> list[str]:
    """The texts of the vocabulary's chosen control and user-defined tokens (`corpus.vocab_cases`' choice)."""
    return [text for _, text in chosen_tokens(model) if encodable(text)]


def attach_inputs(cases: list[dict], model: Model | str | os.PathLike) -> list[dict]:
    """Golden cases with each recorded document's text rebuilt; `DocumentError` for one that is not the recorded one."""
    wanted = [c for c in cases if "document" in c]
    if not wanted:
        return cases
    model = as_model(model)
    built = {c["id"]: c for c in documents(model, "full" if any(c["id"] == "doc-large" for c in wanted) else "default")}
    out = []
    for case in cases:
        if "document" in case:
            doc = built.get(case["id"])
            if doc is None or doc["document"] != case["document"]:
                raise DocumentError(f"{model.path.name}: case {case['id']}: the document built now is not the "
                                    f"recorded one (sha256 {case['document']['sha256'][:16]}..., "
                                    f"{case['document']['size']:,} bytes); re-record the golden with "
                                    f"python -m harness record --model {model.name}")
            case = {**case, "text": doc["text"]}
        out.append(case)
    return out
