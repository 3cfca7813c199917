"""One vocabulary under test: its engine, its reference token table, and how a case is judged.

A `Subject` holds what every comparison of one model needs. `findings()` turns
a reference record (llama.cpp's, live or golden) and the engine's outcome for
one case into a list of `(kind, entry)` findings, kinds as in
`harness.report.build.LISTS`; it has no side effects, so the fuzzer can call it on
every example and only keep the minimal failure.
"""

from __future__ import annotations

import shlex
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..golden.records import evaluate_case, field_bytes, unpack_array
from ..oracle.known_crashes import NONE, KnownCrashes
from ..subjects.records import EngineError
from . import long_inputs
from .diff import TokenTable, diff_encoding

ERROR_TAIL = 20000  # report.json keeps the traceback in full; this only bounds a runaway one


@dataclass(frozen=True)
class Subject:
    """A model under test: display name, how it was named, the engine and both sides' tables."""

    name: str
    arg: str
    path: Path
    engine: Any
    table: TokenTable
    engine_table: TokenTable
    command: Callable[[str], str]
    known: KnownCrashes = NONE


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


def case_fields(case: dict, subject: Subject) -> dict:
    """The fields every finding about `case` carries."""
    return {"case_id": case["id"], "text": case.get("text", ""), "bytes": case.get("bytes"),
            "command": subject.command(case["id"])}


def crash_info(crash: dict) -> dict:
    """A worker crash record (live or golden, `harness.oracle.workers`) with a one-line `reason` added."""
    kind, timeout = crash.get("kind"), crash.get("timeout")
    timeout = f"{timeout:g}" if isinstance(timeout, (int, float)) else timeout
    reason = {"signal": f"killed by {crash.get('signal')}", "exit": f"exit status {crash.get('exit')}",
              "timeout": f"timeout after {timeout}s", "error": "llama.cpp error"}.get(str(kind), str(kind))
    return {**crash, "reason": reason}


def crash_finding(known: KnownCrashes, model: str, base: dict, crash: dict) -> tuple[str, dict]:
    """An oracle crash as a finding: `known_oracle_crashes` (with the entry id) when the list has it."""
    info = crash_info(crash)
    entry = known.match(model, info)
    if entry is None:
        return "oracle_crashes", {**base, "crash": info}
    return "known_oracle_crashes", {**base, "crash": info, "known_crash": entry.id}


def detok_map(encoding: dict) -> dict[tuple[bool, bool], bytes]:
    return {(d["remove_special"], d["unparse_special"]): field_bytes(d)
            for d in encoding.get("detokenize", [])}


def findings(subject: Subject, case: dict, expected: dict | None, got: dict | EngineError | None,
             *, crash: dict | None = None) -> list[tuple[str, dict]]:
    """What is wrong with the engine's outcome `got` against llama.cpp's record `expected`.

    With a `crash` (llama.cpp's), the case is that crash alone: `expected` and
    `got` are not read, and the engine need not have run (`got` None).
    """
    base = case_fields(case, subject)
    if crash is not None:
        return [crash_finding(subject.known, subject.name, base, crash)]
    if isinstance(got, EngineError):
        return [("engine_errors", {**base, "error": got.error, "traceback": got.traceback,
                                   "capability": got.capability})]
    if not isinstance(got, dict):  # not applicable: counted apart, neither passed nor failed
        return []
    if expected is None:
        raise ValueError("findings() needs both outcomes unless llama.cpp crashed")
    out = []
    for exp, eng in zip(expected["encode"], got["encode"], strict=True):
        offered = "detokenize" in eng  # an engine without detokenize is compared on ids only
        detok = (detok_map(exp), detok_map(eng)) if offered else (None, None)
        found: dict | None
        if exp["ids"] is None:  # a document's golden: only the first differing block is known
            found = long_inputs.digest_mismatch(exp, eng["ids"], *detok)
        else:
            found = diff_encoding(exp["ids"], eng["ids"], subject.table, got_table=subject.engine_table,
                                  expected_detok=detok[0], got_detok=detok[1])
        flags = {"add_special": exp["add_special"], "parse_special": exp["parse_special"]}
        if found:
            out.append(("mismatches", long_inputs.trimmed({**base, **flags, **found}, subject.engine_table)))
        if "detokenize_error" in eng:
            out.append(("engine_errors", {**base, **flags, **eng["detokenize_error"], "capability": "detokenize"}))
    return out


# --- token tables -----------------------------------------------------------------------------

def gguf_texts(path: Path) -> list[bytes]:
    """Every token's exact text from the GGUF file (what llama_vocab_get_text returns)."""
    from tokenizer.gguf import reader as gguf
    tokens = gguf.read(path).metadata.get("tokenizer.ggml.tokens") or []
    return [gguf.as_bytes(t) for t in tokens]


def reference_table(texts: list[bytes], vocab: dict, pieces: list[bytes] | None) -> TokenTable:
    """llama.cpp's side: GGUF texts, the attrs from its vocab record, its pieces if known."""
    attrs = unpack_array(vocab["attrs"], "<i4").tolist() if "attrs" in vocab else []
    specials = vocab.get("specials", {})
    edges = frozenset(v for k, v in specials.items() if k in ("bos", "eos", "sep") and v is not None)
    return TokenTable(texts=texts, attrs=attrs, pieces=pieces or texts, edge_ids=edges)


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
    """A function case_id -> the shell command that re-runs exactly that case (same engine and options)."""
    parts = ["python", "-m", "harness", "run", "--model", arg, "--corpus", str(cases_file),
             "--no-default-corpora"]
    if engine:
        parts += ["--engine", engine]
    for key, value in engine_args:
        parts += ["--engine-arg", f"{key}={value}"]
    prefix = shlex.join(parts)
    return lambda case_id: f"{prefix} --case {shlex.quote(case_id)}"


def vocab_findings(subject: Subject, expected: dict, got: dict | EngineError) -> list[tuple[str, dict]]:
    """Vocabulary differences (flags, special ids, per-token text/score/attr/pieces) as findings."""
    from ..subjects.records import diff_offered
    if isinstance(got, EngineError):
        return [("engine_errors", {"case_id": "<vocab>", "text": "", "error": got.error,
                                   "traceback": got.traceback, "command": None, "capability": "vocabulary"})]
    rows = diff_offered(expected, got)
    return [("vocab_mismatches", _vocab_entry(subject, row, expected, got)) for row in rows]


def _vocab_entry(subject: Subject, row: dict, expected: dict, got: dict) -> dict:
    token = row.get("token")
    entry = {"field": row["field"], "token": token, "category": "vocabulary"}
    if token is None:
        entry.update(token=row.get("block"), expected=row["expected"], got=row["got"])
        return entry
    entry["sides"] = True
    entry["expected"] = _token_side(subject.table, expected, token, row["expected"])
    entry["got"] = _token_side(subject.engine_table, got, token, row["got"])
    return entry


def _token_side(table: TokenTable, vocab: dict, token: int, value) -> dict:
    from .diff import visible
    scores = unpack_array(vocab["scores"], "<f4")
    return {"text": visible(table.text(token)), "score": float(scores[token]) if token < len(scores) else None,
            "attr": table.attr(token), "value": value}
