"""The engine of `python -m harness compare`: an engine against golden files, no llama.cpp needed.

Each golden (`golden/*.json[.gz]`, written by `python -m harness record`)
holds llama.cpp's vocabulary record and its outcome for every case. The
engine is loaded on the same GGUF file (found by name in the vocabulary cache
or the synthetic folder, checked by sha256), then judged case by case exactly
as `run` judges it live (`harness.findings.findings`). A case on which llama.cpp
crashed while recording stays an oracle crash in the report, or a known crash
when it matches the known-crashes list (`RunConfig.known_crashes`).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from .engine_spec import load_engine
from .families import family_of
from .findings import (
    Subject,
    engine_table,
    findings,
    gguf_texts,
    reference_table,
    reproduce_command,
    run_engine,
    vocab_findings,
)
from .golden import GoldenError, golden_files, load_golden
from .models import SetupError, models_dir, resolve, short_name
from .outcomes import engine_or_error, engine_vocab, load_engine_for, refusal_mismatch, save_failing
from .progress import Progress
from .report import ModelResult
from .run_config import RunConfig


def _can_validate() -> bool:
    """The schema check needs jsonschema (a test extra); without it goldens are read unchecked."""
    import importlib.util
    return importlib.util.find_spec("jsonschema") is not None


def gguf_candidates(name: str) -> list[Path]:
    """Where the GGUF a golden was recorded from may be: the cache, the synthetic folder."""
    places = [models_dir() / name]
    try:
        from .synth import synthetic_dir
        places.append(synthetic_dir() / name)
    except ImportError:  # pragma: no cover - synth is optional
        pass
    return places


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def locate(header: dict) -> Path | None:
    """The GGUF file a golden header names, if present with the recorded sha256."""
    for path in gguf_candidates(header["file"]):
        if path.is_file() and (not header.get("sha256") or _sha256(path) == header["sha256"]):
            return path
    return None


def selected_goldens(directory: Path, names: tuple[str, ...]) -> list[Path]:
    """Golden files in `directory`, only those of `names` (short names) when given."""
    if not directory.is_dir():
        raise SetupError(f"no golden directory {directory}; record with: python -m harness record")
    files = golden_files(directory)
    if names:
        files = [f for f in files if short_name(f.name.removesuffix(".gz").removesuffix(".json")) in names]
    if not files:
        raise SetupError(f"no golden files{' for ' + ', '.join(names) if names else ''} in {directory}")
    return files


def compare_golden(golden_file: Path, config: RunConfig, factory) -> ModelResult | None:
    """One golden against the engine; None (with a message) when its GGUF is not here."""
    try:
        golden = load_golden(golden_file, check=_can_validate())
    except GoldenError as exc:
        raise SetupError(str(exc)) from None
    path = locate(golden["gguf"])
    name = short_name(golden["gguf"]["file"])
    if path is None:
        print(f"skipping {golden_file.name}: {golden['gguf']['file']} with the recorded sha256 is not "
              "in the cache (python -m harness fetch / python -m harness synth)", file=sys.stderr)
        return None
    result = ModelResult(name, family_of(name))
    if golden.get("vocab") is None:  # llama.cpp refused the file when recording
        _judge_refusal(factory, path, result, golden.get("load_error"))
        return result
    if result.family == "other":
        result.family = golden["vocab"].get("vocab_type", "other")
    engine = load_engine_for(factory, path, result)
    if engine is None:  # nothing to compare: every case counts as failed, not as passed
        result.cases = len(golden["cases"])
        result.failing.update(c["id"] for c in golden["cases"])
        return result
    subject = _subject(name, path, engine, golden, config)
    for kind, entry in vocab_findings(subject, golden["vocab"], engine_vocab(engine)):
        result.add(kind, entry)
    _judge_cases(subject, golden["cases"], result, config)
    save_failing(result, golden["cases"], config)
    return result


def _judge_refusal(factory, path: Path, result: ModelResult, load_error) -> None:
    """llama.cpp refused this file: the engine must refuse it too."""
    engine, error = engine_or_error(factory, path)
    if engine is None:
        result.notes.append(f"both refuse the file: llama.cpp ({load_error}); engine ({error})")
    else:
        refusal_mismatch(result, str(load_error))


def _model_arg(name: str, path: Path) -> str:
    """The short name when it resolves to `path` (readable commands), else the path."""
    try:
        return name if resolve(name).resolve() == path.resolve() else str(path)
    except SetupError:
        return str(path)


def _subject(name: str, path: Path, engine, golden: dict, config: RunConfig) -> Subject:
    table = reference_table(gguf_texts(path), golden["vocab"], None)
    cases_file = config.report_dir / "cases" / f"{name}.jsonl"
    arg = _model_arg(name, path)
    return Subject(name=name, arg=arg, path=path, engine=engine, table=table,
                   engine_table=engine_table(engine, table),
                   command=reproduce_command(arg=arg, engine=config.engine, cases_file=cases_file),
                   known=config.known_crashes)


def _judge_cases(subject: Subject, cases: list[dict], result: ModelResult, config: RunConfig) -> None:
    with Progress(total=len(cases), label=subject.name, quiet=config.quiet) as bar:
        for case in cases:
            result.cases += 1
            crash = case.get("crash")
            got = None if crash else run_engine(subject.engine, case)  # findings() reads no got with a crash
            for kind, entry in findings(subject, case, case, got, crash=crash):
                result.add(kind, entry)
            bar.advance(note=f"{len(result.failing)} failing")


def compare(golden_dir: Path, config: RunConfig) -> list[ModelResult]:
    """Every selected golden in `golden_dir` against the engine of `config`."""
    factory = load_engine(config.engine)
    results = []
    for golden_file in selected_goldens(golden_dir, config.models):
        result = compare_golden(golden_file, config, factory)
        if result is not None:
            results.append(result)
    if not results:
        raise SetupError(f"none of the goldens in {golden_dir} has its GGUF here; run: python -m harness fetch")
    return results
