"""The engine of `python -m harness compare`: an engine against golden files, no llama.cpp needed.

Each golden (`golden/*.json[.gz]`, written by `python -m harness record`)
holds llama.cpp's vocabulary record and its outcome for every case. The
engine is loaded on the same GGUF file (found by name in the vocabulary cache
or the synthetic folder, checked by sha256), then judged case by case exactly
as `run` judges it live (`harness.compare.findings.findings`). A case on which llama.cpp
crashed while recording stays an oracle crash in the report, or a known crash
when it matches the known-crashes list (`RunConfig.known_crashes`).

With `--reference SPEC` the model's original tokenizer is the third side, as in
`run --reference` (`harness.runs.third_side`): the golden's llama.cpp records are
the middle truth, and the original is asked live beside the engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..compare.result import ModelResult
from ..compare.verdict import finish
from ..errors import SetupError
from ..golden.files import GoldenError, golden_files, read_golden, unpack_golden
from ..golden.identity import mismatch
from ..inputs import documents
from ..models.families import family_of
from ..models.model import Model
from ..models.paths import attach_source, resolve
from ..models.shipped import models_dir, short_name
from . import check, selection
from .config import RunConfig
from .engine import load_engine
from .outcomes import (
    both_refuse,
    close_engine,
    engine_or_error,
    engine_vocab,
    load_engine_for,
    refusal_mismatch,
)
from .progress import Progress
from .shard import MODEL, Partition, Unit, case_part, partition
from .third_side import check_spec, third_side


def _can_validate() -> bool:
    """The schema check needs jsonschema (a test extra); without it goldens are read unchecked."""
    import importlib.util
    return importlib.util.find_spec("jsonschema") is not None


def gguf_candidates(name: str, golden_dir: Path | None = None) -> list[Path]:
    """Where the GGUF a golden was recorded from may be: beside the golden, the cache, the synthetic folder."""
    places = [golden_dir / name] if golden_dir is not None else []
    places.append(models_dir() / name)
    try:
        from ..models.synth import synthetic_dir
        places.append(synthetic_dir() / name)
    except ImportError:  # pragma: no cover - synth is optional
        pass
    return places


def locate(header: dict, golden_dir: Path | None = None, given: Path | None = None) -> tuple[Path | None, str]:
    """(the GGUF file a golden header names, "") or (None, what was looked for and where).

    `given` (`--model PATH`) is the only candidate when there is one; a file
    that is there but not the recorded one is named with what differs
    (`harness.golden.identity`).
    """
    places = [given] if given is not None else gguf_candidates(header["file"], golden_dir)
    seen = []
    for path in places:
        if not path.is_file():
            continue
        reason = mismatch(header, path)
        if reason is None:
            return path, ""
        seen.append(f"{path} is not it: {reason}")
    wanted = f"{header['file']} ({header.get('size', '?'):,} bytes)" if isinstance(header.get("size"), int) \
        else header["file"]
    looked = "; ".join(seen) if seen else "looked in " + ", ".join(str(p.parent) for p in places)
    return None, f"{wanted}: {looked}"


def _stem(golden_file: Path) -> str:
    return golden_file.name.removesuffix(".gz").removesuffix(".json")


MISSING = "its GGUF is not here:"


def selected_goldens(directory: Path, names: tuple[str, ...],
                     paths: tuple[Path, ...] = ()) -> list[tuple[Path, Path | None]]:
    """(golden file, --model PATH or None) pairs: those of `names` (short names) and `paths`, or all."""
    if not directory.is_dir():
        raise SetupError(f"no golden directory {directory}; record with: python -m harness record")
    files = golden_files(directory)
    chosen: list[tuple[Path, Path | None]] = [
        (f, None) for f in files if not (names or paths) or short_name(_stem(f)) in names]
    for path in paths:
        match = [f for f in files if _stem(f) == path.name.removesuffix(".gguf")]
        if not match and len(files) == 1:
            match = files
        if not match:
            raise SetupError(f"--model {path}: no golden for it in {directory} (looked for "
                             f"{path.name.removesuffix('.gguf')}.json[.gz]; record one with: "
                             f"python -m harness record --model {path} --out {directory})")
        chosen.append((match[0], path))
    if not chosen:
        raise SetupError(f"no golden files{' for ' + ', '.join(names) if names else ''} in {directory}")
    return chosen


def read_packed(golden_file: Path) -> dict:
    """The golden as on disk, cases packed (`harness.golden.files.read_golden`); `SetupError` if unreadable."""
    try:
        return read_golden(golden_file)
    except GoldenError as exc:
        raise SetupError(str(exc)) from None


def _unpack(golden_file: Path, read: dict) -> dict:
    try:
        return unpack_golden(read, golden_file, check=_can_validate())
    except GoldenError as exc:
        raise SetupError(str(exc)) from None


def compare_golden(golden_file: Path, config: RunConfig, factory, given: Path | None = None,
                   part: Partition | None = None, read: dict | None = None) -> ModelResult:
    """One golden against the engine; not checked (with a message) when its GGUF is not here.

    With `given` (`--model PATH`) that file must be the recorded one: a set-up error otherwise.
    With `part` (a shard, `harness.runs.shard`) only its cases are judged. `read` is the file
    as `plan` read it (`harness.golden.files.read_golden`), so that it is not read again; it is
    unpacked in place.
    """
    golden = _unpack(golden_file, read_packed(golden_file) if read is None else read)
    name = short_name(golden["gguf"]["file"])
    if part is not None:  # units are keyed by the golden's file name (`plan`)
        key = short_name(_stem(golden_file))
        golden = {**golden, "cases": [c for c in golden["cases"] if part.owns(key, str(c["id"]))]}
    path, why = locate(golden["gguf"], golden_file.parent, given)
    if path is None and given is not None:
        raise SetupError(f"--model {given}: not the file {golden_file.name} was recorded from: {why}")
    result = ModelResult(name, family_of(name))
    attach_source(result, path, golden["gguf"].get("source"))
    if path is None:  # selected but not compared: listed as not checked, never as passing
        result.not_checked = (f"{MISSING} {why} (give --model PATH, or python -m harness fetch / "
                              "python -m harness synth)")
        print(f"skipping {golden_file.name}: {result.not_checked}", file=sys.stderr)
        return result
    if golden.get("vocab") is None:  # llama.cpp refused the file when recording
        _judge_refusal(factory, path, result, golden.get("load_error"), expected=config.expect_refusal)
        finish(result)
        return result
    if result.family == "other":
        result.family = golden["vocab"].get("vocab_type", "other")
    model = Model(_model_arg(name, path), path, name)  # the GGUF's metadata read once, below
    try:  # a long document is recorded by its sha256: rebuild its text (harness.inputs.documents)
        golden["cases"] = documents.attach_inputs(golden["cases"], model)
    except documents.DocumentError as exc:
        raise SetupError(str(exc)) from None
    golden["cases"] = _selected(golden["cases"], name, config)  # -k, --lf, --ff (harness.runs.selection)
    if config.baseline is not None:  # --baseline: which of its differences' inputs the goldens hold
        config.baseline.note(name, golden["cases"])
    engine = load_engine_for(factory, path, result)
    if engine is None:
        check.engine_unloaded(result, golden["cases"])
        check.settle(result, golden["cases"], config)
        return result
    try:
        prepared = check.subject(model=model, engine=engine, vocab=golden["vocab"], pieces=None,
                                 got_vocab=lambda: engine_vocab(engine), config=config, result=result)
        with third_side(config, path, prepared, result) as (subject, third), \
                Progress(total=len(golden["cases"]), label=name, quiet=config.quiet) as bar:
            check.judge_cases(subject, golden["cases"], GoldenExpected(), result, bar, reference=third,
                              tally=config.tally)
    finally:
        close_engine(engine, result)
    return check.conclude(result, golden["cases"], config)


class LeftOut(Exception):
    """A golden the run's selection keeps no case of (`-k`): not replayed, named in the selection's tally."""


def _selected(cases: list[dict], name: str, config: RunConfig) -> list[dict]:
    """The recorded cases the selection keeps (never one the golden does not hold); `LeftOut` for none."""
    chosen = selection.choose(cases, name, config, extra=False)
    if not chosen and cases and (config.keyword or config.last_failed):
        raise LeftOut(f"-k {config.keyword!r} keeps none of its cases" if config.keyword
                      else "--lf: none of its failed cases is in the golden")
    return chosen


class GoldenExpected:
    """A golden file as the expected side of the check (`harness.runs.check.Expected`): llama.cpp, recorded."""

    def ask(self, cases):
        return [lambda case=case: (None, case["crash"]) if case.get("crash") else (case, None) for case in cases]

    def engine_needed(self, case: dict) -> bool:
        return not case.get("crash")  # llama.cpp crashed on it while recording: nothing to compare


def _judge_refusal(factory, path: Path, result: ModelResult, load_error, *, expected: bool) -> None:
    """llama.cpp refused this file: the engine must refuse it too (agreement only if `expected`)."""
    engine, error = engine_or_error(factory, path)
    if engine is not None:
        close_engine(engine, result)
    if engine is None:
        both_refuse(result, str((load_error or {}).get("message", load_error)), str(error), expected=expected)
    else:
        refusal_mismatch(result, str(load_error))


def _model_arg(name: str, path: Path) -> str:
    """The short name when it resolves to `path` (readable commands), else the path."""
    try:
        return name if resolve(name).resolve() == path.resolve() else str(path)
    except SetupError:
        return str(path)


def chosen_goldens(golden_dir: Path, config: RunConfig) -> list[tuple[Path, Path | None]]:
    names = tuple(m for m in config.models if not _is_path(m))
    paths = tuple(resolve(m) for m in config.models if _is_path(m))  # a cut file or URL: its vocab-only copy
    return selected_goldens(golden_dir, names, paths)


def plan(golden_dir: Path, config: RunConfig) -> tuple[Partition, dict[Path, dict]]:
    """Shard `config.shard` of the replay, and the goldens it holds units of, as read for the plan.

    Units: per golden its `MODEL` unit, then one unit per recorded case. Every golden is read
    to list its case ids (packed: `harness.golden.files.read_golden`); those of this shard are
    kept for `compare`, which then reads no file a second time.
    """
    if config.shard is None:
        raise ValueError("plan() needs a RunConfig with a shard")
    units: list[Unit] = []
    read: dict[Path, dict] = {}
    for golden_file, _ in chosen_goldens(golden_dir, config):
        read[golden_file] = read_packed(golden_file)
        name = short_name(_stem(golden_file))
        units += [Unit(name, MODEL), *(Unit(name, case_id) for case_id in case_ids(golden_file, read[golden_file]))]
    part = partition("compare", units, config.shard)
    return part, {f: golden for f, golden in read.items() if part.items(short_name(_stem(f)))}


def case_ids(golden_file: Path, golden: dict) -> list[str]:
    """The ids of a packed golden's cases; `SetupError` for cases that are not objects with an id."""
    cases = golden.get("cases") or []
    if not isinstance(cases, list) or not all(isinstance(c, dict) and "id" in c for c in cases):
        raise SetupError(f"{golden_file}: not a golden file (its cases are not a list of objects with an id)")
    return [str(c["id"]) for c in cases]


def compare(golden_dir: Path, config: RunConfig, results: list[ModelResult] | None = None,
            sharded: tuple[Partition, dict[Path, dict]] | None = None) -> list[ModelResult]:
    """Every selected golden in `golden_dir` against the engine of `config`, appended to `results`.

    With `sharded` (from `plan`) only that shard's share: goldens it holds nothing of are skipped,
    and the others are replayed from what `plan` read.
    """
    check_spec(config)  # a bad --reference or a missing library: exit 2 before any work
    factory = load_engine(config.engine, args=dict(config.engine_args), timeout=config.engine_timeout)
    results = [] if results is None else results
    part, read = sharded if sharded is not None else (None, {})
    everything = selection.everything_line(config)
    if everything and not config.quiet:
        print(everything, file=sys.stderr)
    goldens = selection.first_failed(chosen_goldens(golden_dir, config), lambda g: short_name(_stem(g[0])), config)
    for golden_file, given in goldens:
        key = short_name(_stem(golden_file))
        if part is not None and not part.items(key):
            continue
        if _left_out(key, config):
            continue
        try:
            result = compare_golden(golden_file, config, factory, given, part=part,
                                    read=read.pop(golden_file, None))
        except LeftOut as exc:
            _leave_out(key, str(exc), config)
            continue
        if part is not None and not part.owns(key):
            case_part(result)
        results.append(result)
    if config.tally is not None and config.tally.left_out and not results:
        raise SetupError("the selection leaves no case to check: " + "; ".join(
            f"{m}: {why}" for m, why in list(config.tally.left_out.items())[:3]))
    if results and all(r.not_checked and r.not_checked.startswith(MISSING) for r in results):
        raise SetupError(f"none of the goldens in {golden_dir} has its GGUF here (see above); give --model PATH "
                         "or run: python -m harness fetch")
    return results


def _left_out(key: str, config: RunConfig) -> bool:
    """True for a golden not to replay: `--lf` leaves its model out, or `--maxfail` stopped the run."""
    tally = config.tally
    if tally is not None and tally.reached:
        tally.not_started.append(key)
        return True
    why = selection.wanted(key, config)
    if why is not None:
        _leave_out(key, why, config)
    return why is not None


def _leave_out(key: str, why: str, config: RunConfig) -> None:
    if config.tally is not None:
        config.tally.left_out[key] = why
    if not config.quiet:
        print(f"{key}: left out ({why})", file=sys.stderr)


def _is_path(model: str) -> bool:
    """A --model value naming a file (it exists, or looks like a path) rather than a vocabulary name."""
    return model.endswith(".gguf") or "/" in model or Path(model).is_file()
