"""The vocabulary under test: its engine, both sides' token tables, and the command that re-runs a case.

A `Subject` holds what every comparison of one model needs (`harness.compare.findings` judges a
case with it); `run_engine` asks its engine for one case, every fault caught; the token tables
give each id its text, attributes and piece, llama.cpp's from the GGUF and its vocab record, the
engine's read lazily from the engine.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..golden.records import evaluate_case, unpack_array
from ..models.model import Model
from ..oracle.known_crashes import NONE, KnownCrashes
from ..subjects.records import EngineError
from .diff import TokenTable
from .spelling import spelled_pieces

ERROR_TAIL = 20000  # report.json keeps the traceback in full; this only bounds a runaway one


@dataclass(frozen=True)
class Subject:
    """A model under test (`harness.models.model.Model`: its name, how it was named, its file), the engine
    and both sides' tables."""

    model: Model
    engine: Any
    table: TokenTable
    engine_table: TokenTable
    command: Callable[[str], str]
    known: KnownCrashes = NONE

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def arg(self) -> str:
        return self.model.arg

    @property
    def path(self) -> Path:
        return self.model.path


def run_engine(engine, case: dict):
    """One case through an engine handle (`harness.subjects.guard`): a record, an `EngineError` or not applicable.

    A bare engine object (tests, old callers) is called in-process, every fault caught.
    """
    if hasattr(engine, "evaluate_one"):
        return engine.evaluate_one(case)
    try:
        return evaluate_case(engine, case)
    except Exception as exc:  # noqa: BLE001 - an engine error is a finding, not a harness failure
        return EngineError(f"{type(exc).__name__}: {exc}", traceback.format_exc()[-ERROR_TAIL:])


# --- token tables -----------------------------------------------------------------------------

def gguf_texts(model: Model) -> list[bytes]:
    """Every token's exact text from the GGUF file (what llama_vocab_get_text returns)."""
    from tokenizer.gguf import reader as gguf
    tokens = model.require_metadata().get("tokenizer.ggml.tokens") or []
    return [gguf.as_bytes(t) for t in tokens]


def reference_table(texts: list[bytes], vocab: dict, pieces: list[bytes] | None) -> TokenTable:
    """llama.cpp's side: GGUF texts, the attrs from its vocab record, its pieces if known."""
    attrs = unpack_array(vocab["attrs"], "<i4").tolist() if "attrs" in vocab else []
    specials = vocab.get("specials", {})
    edges = frozenset(v for k, v in specials.items() if k in ("bos", "eos", "sep") and v is not None)
    if pieces is None:  # a golden replay: spelled from the GGUF as llama.cpp spells them (harness.compare.spelling)
        pieces = spelled_pieces(texts, attrs, str(vocab.get("vocab_type", "")), str(vocab.get("pre") or ""))
    return TokenTable(texts=texts, attrs=attrs, pieces=pieces, edge_ids=edges)


class _PerToken:
    """A read-only sequence whose items are computed on first use (for display of a few ids)."""

    def __init__(self, n: int, read: Callable[[int], Any]) -> None:
        self._n, self._read = n, read
        self._cache: dict[int, Any] = {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, token: int) -> Any:
        if token not in self._cache:
            self._cache[token] = self._read(token)
        return self._cache[token]


def _safe(read: Callable[[int], Any], fallback: Callable[[int], Any]) -> Callable[[int], Any]:
    def get(token: int) -> Any:
        try:
            return read(token)
        except Exception:  # noqa: BLE001 - display only; the vocabulary diff reports the real problem
            return fallback(token)
    return get


def engine_table(engine, fallback: TokenTable) -> TokenTable:
    """The engine's own view of its tokens, read lazily; the reference's where the engine fails."""
    if engine is None:
        return fallback
    try:
        n = int(engine.n_tokens)
    except Exception:  # noqa: BLE001
        return fallback
    return TokenTable(
        texts=cast("Sequence[bytes]", _PerToken(n, _safe(lambda t: bytes(engine.token_text(t)), fallback.text))),
        attrs=cast("Sequence[int]", _PerToken(n, _safe(lambda t: int(engine.token_attr(t)), fallback.attr))),
        pieces=cast("Sequence[bytes]", _PerToken(
            n, _safe(lambda t: bytes(engine.token_to_piece(t, special=True)), fallback.piece))),
        edge_ids=fallback.edge_ids)


def reproduce_command(*, arg: str, engine: str | None, cases_file: Path,
                      engine_args: tuple[tuple[str, str], ...] = ()) -> Callable[[str], str]:
    """A function case_id -> the shell command that re-runs exactly that case (same engine and options).

    The command reads the case from `cases_file` (`<report>/cases/<model>.jsonl`) and writes its own report
    into `<report>/reproduce/<the case id as a folder name>`, so running it neither replaces the report it
    came from nor rewrites the cases file the next reproduce line reads.
    """
    parts = ["python", "-m", "harness", "run", "--model", arg, "--corpus", str(cases_file),
             "--no-default-corpora"]
    if engine:
        parts += ["--engine", engine]
    for key, value in engine_args:
        parts += ["--engine-arg", f"{key}={value}"]
    prefix = shlex.join(parts)
    reports = cases_file.parent.parent / "reproduce"
    return lambda case_id: (f"{prefix} --case {shlex.quote(case_id)} "
                            f"--report {shlex.quote(str(reports / folder_name(case_id)))}")


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
NAME_LIMIT = 60  # characters of a case id kept in its folder's name


def folder_name(case_id: str) -> str:
    """A case id as one folder name: letters, digits, `.`, `_` and `-` kept, any other run as `_`, at most
    `NAME_LIMIT` characters; when that changed it, a digest of the id follows, so two ids never share a folder."""
    name = _UNSAFE_NAME.sub("_", case_id).strip("._")[:NAME_LIMIT]
    if name == case_id and name:
        return name
    digest = hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name or 'case'}-{digest}"
