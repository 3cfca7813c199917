"""Recording a model's outcome, shared by the live run and the golden replay.

An engine that cannot load, a refusal that differs between the two sides, an
engine's vocabulary record, and the failing cases written out next to the
report so that every reproduce command finds its input.
"""

from __future__ import annotations

from pathlib import Path

from ..compare.result import ModelResult
from ..files import jsonl
from ..golden.records import vocab_record
from ..inputs.corpus import load_corpus
from ..subjects.records import EngineError
from .config import RunConfig


def engine_or_error(factory, path: Path):
    """(engine handle, None) or (None, "Type: reason"); a factory's own exception reads as itself."""
    from ..subjects.guard import EngineLoadError
    try:
        return factory(path), None
    except EngineLoadError as exc:  # already phrased "Type: reason" (e.g. the child's UnsupportedVocab)
        return None, str(exc)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - an engine that cannot load is a finding (or agrees)
        return None, f"{type(exc).__name__}: {exc}"


def load_engine_for(factory, path: Path, result: ModelResult):
    """The engine for `path`, or None with an engine error recorded."""
    engine, error = engine_or_error(factory, path)
    if engine is None:
        engine_load_error(result, error)
    return engine


def close_engine(engine, result: ModelResult) -> None:
    """Close an engine handle; the engine flakes of its child (harness.subjects.client) go to `result`."""
    engine.close()
    for flake in getattr(engine, "flakes", ()):  # the in-process engine has none: no re-check, no flakes
        result.add_flake(flake)


def last_line(message: str, limit: int = 300) -> str:
    """The informative tail of a long message (llama.cpp's load log ends with the reason)."""
    lines = [line for line in str(message).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return ((errors or lines or [""])[-1])[:limit]


def engine_load_error(result: ModelResult, error: str) -> None:
    category = "unsupported" if error.startswith("UnsupportedVocab") else "engine error"
    result.add("engine_errors", {"case_id": "<load>", "text": "", "error": error, "command": None,
                                 "category": category})
    result.notes.append(f"engine failed to load: {error.split(':')[0]}")


def refusal_mismatch(result: ModelResult, reason: str) -> None:
    """llama.cpp refuses the file but the engine loads it: the engine should refuse too."""
    result.add("vocab_mismatches", {"field": "load", "token": None, "category": "vocabulary",
                                    "expected": f"llama.cpp refuses to load it: {reason}",
                                    "got": "the engine loads it"})


def both_refuse(result: ModelResult, llama: str, engine: str, *, expected: bool) -> None:
    """Neither side loads the file: not checked, unless the run was told to expect it (`harness.compare.verdict`)."""
    reason = f"both refuse the file: llama.cpp ({llama}); engine ({engine})"
    if expected:
        result.expected_refusal = reason
        result.notes.append(f"{reason}, as expected (--expect-refusal)")
    else:
        result.not_checked = reason


def refusal_expected_but_loaded(result: ModelResult) -> None:
    """--expect-refusal, yet both sides load the file: the expectation failed, a finding."""
    result.add("vocab_mismatches", {"field": "load", "token": None, "category": "vocabulary",
                                    "expected": "both refuse it (--expect-refusal)",
                                    "got": "llama.cpp and the engine both load it"})


def engine_vocab(engine) -> dict | EngineError:
    """The engine's vocabulary record from what it offers (a handle's `vocab()`)."""
    if hasattr(engine, "vocab"):
        return engine.vocab()
    try:
        return vocab_record(engine)
    except Exception as exc:  # noqa: BLE001
        return EngineError(f"{type(exc).__name__}: {exc}", "")


def save_failing(result: ModelResult, cases: list[dict], config: RunConfig) -> None:
    """The failing, known-crash and known-difference cases as a corpus file, so each reproduce command finds its
    input.

    A cases file this run read (`--corpus`, a reproduce command's own input) is never rewritten: its records
    stay, and a case it lacks is added at its end, so the next reproduce line still finds its case.
    """
    shown = result.failing | result.known_crash_ids | result.known_difference_ids
    failing = [c for c in cases if c["id"] in shown]
    extra = {e["case_id"]: e for e in result.mismatches + result.engine_errors + result.oracle_crashes
             + result.reference_findings + result.known_differences if e.get("fuzz")}
    # a generated case from its whole input (`result.inputs`): a long window's findings show only part of it
    failing += [result.inputs.get(i) or {"id": i, **({"bytes": e["bytes"]} if e.get("bytes") else {"text": e["text"]})}
                for i, e in extra.items()]
    if not failing:
        return
    path = config.report_dir / "cases" / f"{result.model}.jsonl"
    records = {c["id"]: {k: c[k] for k in ("id", "text", "bytes") if k in c} for c in failing}
    if _read_by_this_run(path, config):
        held = {c["id"] for c in load_corpus(path)}
        for case_id, record in records.items():
            if case_id not in held:
                jsonl.append(path, record)
        return
    jsonl.write(path, records.values())  # escaped line breaks: the reproduce command reads it back


def _read_by_this_run(path: Path, config: RunConfig) -> bool:
    """True when `path` is one of the corpora the run read (the same file, however named)."""
    if not path.exists():
        return False
    for corpus in config.corpora:
        try:
            if Path(corpus).exists() and path.samefile(corpus):
                return True
        except OSError:
            continue
    return False
