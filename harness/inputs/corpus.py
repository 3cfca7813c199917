"""Inputs to record and compare: corpus files, llama.cpp's test vectors, per-vocabulary cases.

A case is a dict with an `"id"` and the input as `"text"` (a str) or `"bytes"`
(hex, for input that is not valid UTF-8); `case_input(case)` gives the exact
bytes handed to the tokenizer.  Two file formats are read:

- JSONL: one `{"id": ..., "text": ...}` or `{"id": ..., "bytes": "c3 28"}` per line;
- llama.cpp's `.inp` vectors: inputs separated by ``"\\n__ggml_vocab_test__\\n"``,
  split exactly as `tests/test-tokenizer-0.cpp` splits them (no empty tail
  entry); the sibling `.out` holds llama.cpp's expected ids (`inp_expected`).

`default_corpora(model)` is what `python -m harness record` uses: the model's
own `.inp` vectors (if any sit next to the GGUF), our edge-case and prose
corpora, and cases built from the vocabulary's own special and user-defined
tokens (read from the GGUF with `tokenizer.gguf.reader`, so the list is the same with
or without llama.cpp).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..files import input_limits, jsonl
from ..models.model import Model, as_model
from .cases import chosen_tokens, encodable, make_case

CORPORA_DIR = Path(__file__).resolve().parents[1] / "data" / "corpora"  # package data: ships in the wheel
DEFAULT_FILES = ("edge.jsonl", "prose.jsonl")
INP_SEPARATOR = b"\n__ggml_vocab_test__\n"



class CorpusError(ValueError):
    """A corpus file that cannot be read; the message names the file and line."""


def case_input(case: dict) -> bytes:
    """The exact bytes of a case's input."""
    if "bytes" in case:
        return bytes.fromhex(case["bytes"])
    return case["text"].encode("utf-8", "surrogateescape")


def load_corpus(path: str | os.PathLike) -> list[dict]:
    """Cases from a JSONL file or a llama.cpp `.inp` file (chosen by suffix)."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"no such corpus file: {path}")
    if path.suffix == ".inp":  # either reader refuses what is not a regular file (a FIFO, a device), in one line
        return load_inp(path)
    return _load_jsonl(path)


def _load_jsonl(path: Path) -> list[dict]:
    """Cases of a JSON Lines file, split on "\\n" only and bounded (`harness.files.jsonl`)."""
    cases, seen = [], set()
    try:
        for lineno, item in jsonl.read(path):
            case = _check_item(item, f"{path}:{lineno}")
            cases.append(case)
            if case["id"] in seen:
                raise CorpusError(f"{path}:{lineno}: duplicate id {case['id']!r}")
            seen.add(case["id"])
    except jsonl.JSONLError as exc:
        raise CorpusError(str(exc)) from None
    return cases


def _check_item(item, where: str) -> dict:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        raise CorpusError(f"{where}: expected an object with a string \"id\"")
    if isinstance(item.get("text"), str) == ("bytes" in item):
        raise CorpusError(f"{where}: give exactly one of \"text\" (str) or \"bytes\" (hex)")
    if "bytes" in item:
        try:
            bytes.fromhex(item["bytes"])
        except (TypeError, ValueError):
            raise CorpusError(f"{where}: \"bytes\" is not hex") from None
    elif not encodable(item["text"]):
        raise CorpusError(f"{where}: \"text\" has a lone surrogate; give such input as \"bytes\" (hex)")
    return {k: item[k] for k in ("id", "text", "bytes") if k in item}


def split_inp(raw: bytes) -> list[bytes]:
    """Split `.inp` contents as llama.cpp's test-tokenizer-0 does (a trailing separator adds nothing)."""
    parts, pos = [], 0
    while pos < len(raw):
        end = raw.find(INP_SEPARATOR, pos)
        if end < 0:
            parts.append(raw[pos:])
            break
        parts.append(raw[pos:end])
        pos = end + len(INP_SEPARATOR)
    return parts


def load_inp(path: str | os.PathLike) -> list[dict]:
    """Cases from a llama.cpp `.inp` file, ids `inp-000`, `inp-001`, ..."""
    try:
        raw = input_limits.read_capped(path, input_limits.MAX_CORPUS_BYTES, ".inp corpus")
    except ValueError as exc:
        raise CorpusError(str(exc)) from None
    parts = split_inp(raw)
    for i, part in enumerate(parts):
        if len(part) > input_limits.MAX_LINE_BYTES:
            raise CorpusError(f"{path}: input {i} is {len(part):,} bytes, over the limit of "
                              f"{input_limits.MAX_LINE_BYTES:,}")
    return [make_case(f"inp-{i:03d}", data) for i, data in enumerate(parts)]


def inp_expected(path: str | os.PathLike) -> list[tuple[dict, list[int]]]:
    """`.inp` cases paired with the ids in the sibling `.out` (add_special=False, parse_special=False)."""
    path = Path(path)
    out = path.with_suffix(".out")
    cases = load_inp(path)
    try:
        lines = input_limits.read_capped(out, input_limits.MAX_CORPUS_BYTES, ".out ids").decode("ascii").split("\n")
    except ValueError as exc:  # over the limit, not a file, not ASCII: one line naming the file
        raise CorpusError(f"{out}: {exc}" if isinstance(exc, UnicodeDecodeError) else str(exc)) from None
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(cases):
        raise CorpusError(f"{out}: {len(lines)} lines for {len(cases)} inputs in {path.name}")
    return [(case, _ids(line, f"{out}:{n}")) for n, (case, line) in enumerate(zip(cases, lines), 1)]


def _ids(line: str, where: str) -> list[int]:
    try:
        return [int(t) for t in line.split()]
    except ValueError:
        raise CorpusError(f"{where}: not a line of token ids") from None


def inp_path(model: Model | str | os.PathLike) -> Path | None:
    """The `.inp` vectors next to a GGUF file, if there are any."""
    candidate = Path(f"{as_model(model).path}.inp")
    return candidate if candidate.is_file() else None


def vocab_cases(model: Model | str | os.PathLike) -> list[dict]:
    """Cases around the vocabulary's own control and user-defined tokens, and its byte fallback.

    Each chosen token appears bare, between spaces, glued to words, doubled,
    after a newline and at the end of a sentence, so the special-token
    partition, lstrip/rstrip handling and parse_special are all exercised.
    """
    cases = []
    for token_id, text in chosen_tokens(model):
        for variant, template in _VARIANTS.items():
            cases.append(make_case(f"vocab-{token_id}-{variant}", template.format(t=text)))
    return cases


_VARIANTS = {
    "bare": "{t}",
    "spaced": " {t} ",
    "glued": "Hello{t}world",
    "double": "{t}{t}",
    "line": "first line\n{t}second",
    "tail": "The end. {t}",
}


def default_corpora(model: Model | str | os.PathLike) -> list[dict]:
    """The default cases for one vocabulary: `.inp` vectors, edge, prose, vocabulary, boundary and document cases.

    The vocabulary, boundary and document cases are drawn from the GGUF's metadata, read once (`Model.metadata`).
    """
    model = as_model(model)
    cases = []
    inp = inp_path(model)
    if inp is not None:
        cases += load_inp(inp)
    for name in DEFAULT_FILES:
        stem = Path(name).stem
        cases += [{**c, "id": f"{stem}-{c['id']}"} for c in load_corpus(CORPORA_DIR / name)]
    cases += vocab_cases(model)
    from . import boundaries  # the rules' edges: a packed slice by default, all with GGUF_PARITY_BOUNDARIES=full
    cases += boundaries.cases(model, boundaries.level())
    from . import documents  # long documents: the engines' batch paths (GGUF_PARITY_DOCUMENTS=off leaves them out)
    cases += documents.documents(model)
    return unique_ids(cases)


def unique_ids(cases: list[dict]) -> list[dict]:
    """Refuse duplicate ids: they would make a golden ambiguous."""
    seen = set()
    for case in cases:
        if case["id"] in seen:
            raise CorpusError(f"duplicate case id {case['id']!r}")
        seen.add(case["id"])
    return cases
