"""The engine of `python -m harness run`: engine against live llama.cpp, corpora then fuzz.

For each model: load the engine (`--engine`, ours by default) and llama.cpp
(`harness.oracle.session.OracleSession`, crash-isolated, `--jobs` of them); compare the
vocabularies; compare every corpus case under the four add_special x
parse_special flags with their detokenizations; then let Hypothesis generate
`fuzz` inputs (`harness.inputs.strategies.fuzz_inputs`), checking each live and shrinking
the first input of each new difference to a minimal input (`harness.inputs.fuzz.hunt`). Every failing case is written to
`<report>/cases/<model>.jsonl` (the reproduce command replays it), and fuzz
failures also to `harness/data/corpora/found/<model>.jsonl`, which later runs include.

An engine that raises on a case is an engine error for that case; llama.cpp
dying on a case is an oracle crash for that case; the run goes on. A crash
that matches the known-crashes list (`RunConfig.known_crashes`, see
`harness.oracle.known_crashes`) is recorded as a known crash instead, which is not a
finding; the fuzzer hunts on past it. Unseeded, the run draws a seed (`RunConfig.seed_drawn`),
prints it and records it in the report: `--seed N` generates the same inputs again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from queue import Queue

from ..compare.findings import crash_finding
from ..compare.result import FINDINGS, ModelResult
from ..compare.subject import Subject, run_engine
from ..compare.verdict import finish
from ..errors import SetupError
from ..files import jsonl
from ..inputs import strategies
from ..inputs.corpus import CorpusError, default_corpora, load_corpus
from ..inputs.fuzz import Found, Hunt, hunt
from ..models.families import family_of
from ..models.model import Model, open_model
from ..models.paths import Fingerprint, attach_source, check_same, fingerprint
from ..oracle.known_crashes import NONE, KnownCrashes
from ..oracle.session import OracleCrash, OracleRefusal, OracleSession
from ..report import fuzz_summary
from ..subjects import capabilities as capmod
from ..subjects.spec import describe
from . import calls, check, documents, selection
from .config import RunConfig
from .engine import load_engine
from .outcomes import (
    both_refuse,
    close_engine,
    engine_load_error,
    engine_or_error,
    engine_vocab,
    last_line,
    refusal_expected_but_loaded,
    refusal_mismatch,
)
from .progress import Progress
from .shard import FUZZ, MODEL, Partition, Unit, case_part, partition
from .sweeps import sweep_cases
from .third_side import ReferenceSide, boundary_cases, check_spec, fuzz_specials, third_side

FOUND_NOTES = 10  # new differences of the fuzz named in the notes (all in the report's differences)


def gather_cases(model: Model, config: RunConfig) -> list[dict]:
    """Default corpora, --corpus files and this model's earlier finds, ids made unique; then the run's
    selection (`--case`, `--lf`, `-k`, `--ff`: `harness.runs.selection.choose`), which may leave none."""
    name = model.name
    cases: list[dict] = []
    try:
        if config.default_corpora:
            cases += default_corpora(model) + boundary_cases(config, model)
        for corpus in config.corpora:
            cases += _tagged(load_corpus(corpus), corpus)
        for folder in _found_folders(config) if config.default_corpora else ():
            found = folder / f"{name}.jsonl"
            if found.is_file():
                cases += _tagged(load_corpus(found), found)
        cases += sweep_cases(config, model)  # --sweeps: the differing inputs of each screen (harness.runs.sweeps)
    except CorpusError as exc:
        raise SetupError(str(exc)) from None
    cases = _unique(cases)
    if not cases and not config.fuzz and not config.case_ids:
        raise SetupError(f"{name}: no cases to check (the corpora are empty and --fuzz is 0)")
    cases = selection.choose(cases, name, config)
    if config.baseline is not None:  # --baseline: its differences' inputs, checked again
        cases = config.baseline.carry(name, cases)
    return cases


def _found_folders(config: RunConfig) -> list[Path]:
    """Where earlier fuzz finds are read from: the committed ones (ours), then this report's (`found_dir`)."""
    return list(dict.fromkeys([*config.found_corpora, *([config.found_dir] if config.found_dir else [])]))


def _tagged(cases: list[dict], path: Path) -> list[dict]:
    return [{**c, "source": path.stem} for c in cases]


def _unique(cases: list[dict]) -> list[dict]:
    """Drop exact repeats; rename a clashing id by prefixing its corpus name."""
    seen: dict[str, dict] = {}
    for case in cases:
        key = case["id"]
        if key in seen and seen[key].get("text") == case.get("text") and seen[key].get("bytes") == case.get("bytes"):
            continue
        if key in seen:
            key = f"{case.get('source', 'corpus')}:{key}"
        seen[key] = {k: v for k, v in case.items() if k != "source"} | {"id": key}
    return list(seen.values())


class OraclePool:
    """`jobs` oracle sessions for one model, shared by worker threads."""

    def __init__(self, path: Path, *, jobs: int, timeout: float, memory_limit: int | None = None,
                 known: Callable[[dict], bool] | None = None) -> None:
        self.sessions = [OracleSession(path, timeout=timeout, memory_limit=memory_limit, known=known)
                         for _ in range(max(jobs, 1))]
        self._free: Queue = Queue()
        for session in self.sessions:
            self._free.put(session)
        self.executor = ThreadPoolExecutor(max_workers=len(self.sessions))

    def evaluate(self, case: dict) -> tuple[dict | None, dict | None]:
        """(record, None) or (None, crash dict)."""
        session = self._free.get()
        try:
            return session.evaluate(case), None
        except (OracleCrash, OracleRefusal) as crash:
            return None, crash.as_dict()
        finally:
            self._free.put(session)

    def close(self) -> None:
        """Stop the workers; cases still queued (an interrupted run) are dropped, not run."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        for session in self.sessions:
            session.close()
        self.executor.shutdown(wait=True)

    def faults(self) -> list[dict]:
        """Harness faults of every session: worker deaths a fresh worker did not repeat."""
        return [fault for session in self.sessions for fault in session.faults]


def check_model(model: Model, config: RunConfig, factory, part: Partition | None = None,
                cases: list[dict] | None = None) -> ModelResult:
    """Everything `run` checks on one vocabulary, as a `ModelResult`; with `part`, only that shard's cases.

    `cases` are the model's gathered cases when the caller has them (`plan`).
    """
    path, name = model.path, model.name
    result = ModelResult(name, family_of(name))
    attach_source(result, path)
    cases = gather_cases(model, config) if cases is None else cases
    texts = documents.corpus_texts(cases)  # every shard composes its documents from the same texts
    if part is not None:
        cases = [c for c in cases if part.owns(name, str(c["id"]))]
    fuzz = config.fuzz if part is None or part.owns(name, FUZZ) else 0
    before = fingerprint(path)
    pool = OraclePool(path, jobs=config.jobs, timeout=config.timeout, memory_limit=config.memory_limit,
                      known=lambda crash: config.known_crashes.match(name, crash) is not None)
    try:
        loaded = _load_both(pool, factory, path, result, cases, known=config.known_crashes,
                            expect_refusal=config.expect_refusal, before=before)
        if loaded is None:
            check.settle(result, cases, config)  # an engine that cannot load: a known difference, or failing
            finish(result)
            return result
        if config.expect_refusal:
            refusal_expected_but_loaded(result)
            return result
        try:
            prepared = _prepare(model, loaded, config, result)
            with third_side(config, path, prepared, result) as (subject, third), \
                    Progress(total=len(cases) + fuzz, label=name, quiet=config.quiet) as bar:
                recorder = calls.Recorder(LiveExpected(pool))  # llama.cpp's records, for the calls phase
                check.judge_cases(subject, cases, recorder, result, bar, reference=third, tally=config.tally)
                later = (("fuzz", fuzz), ("long documents", config.long_docs), ("calls", config.calls))
                if not check.stopped(config, result, [phase for phase, asked in later if asked]):  # --maxfail
                    if fuzz:
                        _fuzz(subject, pool.sessions[0], config, result, bar, third)
                    if part is None or part.owns(name):  # the shard holding the model's own unit
                        _long_phases(subject, pool.sessions[0], config, result, third, texts, recorder)
        finally:
            _close(loaded[0], result)
    finally:
        pool.close()
        for fault in pool.faults():
            result.add_fault(fault)
        model.forget_metadata()  # a run holds all its models: only the one being checked keeps its metadata
    return check.conclude(result, cases, config)


def _load_both(pool: OraclePool, factory, path: Path, result: ModelResult, cases: list[dict], *,
               known: KnownCrashes = NONE, expect_refusal: bool = False, before: Fingerprint | None = None):
    """(engine, engine vocab, llama.cpp vocab, pieces), or None with the outcome recorded.

    Both refusing the file leaves the model not checked (agreement only with
    `expect_refusal`); one refusing is a finding. Both sides must have read the
    bytes the parent resolved (`before`): `SetupError` otherwise.
    """
    oracle = pool.sessions[0]
    asked = pool.executor.submit(lambda: (oracle.call("vocab"), oracle.call("pieces"), oracle.call("fingerprint")))
    engine, engine_error = engine_or_error(factory, path)  # meanwhile, in this process
    got = engine_vocab(engine) if engine is not None else None
    if before is not None:
        check_same(path, before, fingerprint(path), "the engine")
    try:
        vocab, pieces, seen = asked.result()
    except OracleCrash as crash:
        _close(engine, result)
        kind, entry = crash_finding(known, result.model, {"case_id": "<load>", "text": "", "command": None},
                                    crash.as_dict())
        result.add(kind, entry)
        result.notes.append("llama.cpp crashed loading the vocabulary")
        if kind == "known_oracle_crashes":  # not a finding, but nothing could be compared
            result.not_checked = f"llama.cpp crashes loading it (known crash {entry['known_crash']})"
        return None
    except OracleRefusal as refused:
        _close(engine, result)
        if engine is None:
            both_refuse(result, last_line(str(refused)), last_line(engine_error), expected=expect_refusal)
        else:
            refusal_mismatch(result, last_line(str(refused)))
        return None
    if before is not None:
        check_same(path, before, seen, "llama.cpp")
    if engine is None:
        engine_load_error(result, engine_error)
        check.engine_unloaded(result, cases)
        return None
    return engine, got, vocab, pieces


def _close(engine, result: ModelResult) -> None:
    if engine is not None:
        close_engine(engine, result)


class LiveExpected:
    """llama.cpp live as the expected side of the check (`harness.runs.check.Expected`): the pool's sessions."""

    def __init__(self, pool: OraclePool) -> None:
        self.pool = pool

    def ask(self, cases):
        futures = [self.pool.executor.submit(self.pool.evaluate, case) for case in cases]
        return [future.result for future in futures]  # llama.cpp works while the engine runs

    def engine_needed(self, case: dict) -> bool:
        return True


def _prepare(model: Model, loaded, config: RunConfig, result: ModelResult) -> Subject:
    """Both sides' token tables and the vocabulary diff (`harness.runs.check.subject`)."""
    engine, got, vocab, pieces = loaded
    if result.family == "other":
        result.family = vocab.get("vocab_type", "other")
    return check.subject(model=model, engine=engine, vocab=vocab, pieces=pieces,
                         got_vocab=lambda: got, config=config, result=result)


def _judge(subject: Subject, session: OracleSession, *, known_seen: dict[str, set], last: dict | None = None,
           third: ReferenceSide | None = None):
    """The verdict of llama.cpp and the engine on one generated case (a fuzz input, a document): its findings.

    A known llama.cpp crash counts as passing (the hunt goes on for real engine bugs); the input is
    noted in `known_seen` (entry id -> case ids). Each judgement leaves `(case, expected, got)` in
    `last["judged"]`, for the capability tally of the generated inputs (`_Tally`). With `third` (the
    original tokenizer) its findings count too, so a conversion finding is shrunk like a parity one (a
    decode one too); its outcome and decode are kept in `third.seen` for the count.
    """
    def judge(case: dict) -> list[tuple[str, dict]]:
        try:
            expected, crash = session.evaluate(case), None
        except (OracleCrash, OracleRefusal) as exc:
            expected, crash = None, exc.as_dict()
        got = run_engine(subject.engine, case)
        if last is not None:
            last["judged"] = (case, expected, got)
        ours = third.outcome(case) if third is not None else None
        found, decoded = check.judge_case(subject, case, expected, got, crash=crash, reference=third, ours=ours)
        if third is not None:
            third.seen[case["id"]] = (ours, decoded)
        for kind, entry in found:
            if kind == "known_oracle_crashes":
                known_seen.setdefault(entry["known_crash"], set()).add(case["id"])
        return [(kind, entry) for kind, entry in found if kind != "known_oracle_crashes"]
    return judge


class _Tally:
    """Each generated input (not a shrink step) counted as a case: the capability tally, the third side's
    classes and the progress bar; with `record`, a failing one kept for `flush`.

    The failing inputs wait for the next new difference's minimal input (or the hunt's end): recorded
    after it, so a difference's first input in the report is its minimal one (`harness.compare.item_verdicts`
    gives each difference one item, of its first input).
    """

    def __init__(self, subject: Subject, result: ModelResult, third: ReferenceSide | None, *,
                 bar: Progress | None = None, record: bool = True) -> None:
        self.subject, self.result, self.third, self.bar, self.record = subject, result, third, bar, record
        self.last: dict = {}  # `_judge` leaves the last judgement here
        self.ran = 0
        self.waiting: list[tuple[dict, list]] = []

    def flush(self) -> None:
        """Record the failing inputs kept so far (`_record_fuzz_input`)."""
        for case, findings in self.waiting:
            _record_fuzz_input(self.result, case, findings)
        self.waiting.clear()

    def __call__(self, case: dict, findings: list) -> None:
        _, expected, got = self.last.pop("judged", (case, None, None))
        self.ran += 1
        self.result.cases += 1
        capmod.tally_case(self.result, self.subject.engine.caps, case, expected, got)
        if self.third is not None and case["id"] in self.third.seen:
            self.third.count(expected, got, *self.third.seen.pop(case["id"]))
        if findings and self.record:
            self.waiting.append((case, findings))
        if self.bar is not None:
            self.bar.advance(note=f"{len(self.result.failing)} failing")


def _fuzz(subject: Subject, session: OracleSession, config: RunConfig, result: ModelResult,
          bar: Progress, third: ReferenceSide | None = None) -> None:
    """The hunt (`harness.inputs.fuzz.hunt`): `config.fuzz` inputs, the first of each new difference shrunk.

    Every generated input is a case (tallied; a failing one's findings recorded); each new difference's
    minimal input is recorded too, saved as a found case and, unless quiet, printed as Hypothesis prints
    a falsifying example. A known llama.cpp crash is passed over. How many inputs ran, how many distinct
    differences the hunt found, and why it stopped short of the budget, if it did, go to `result.fuzz`
    and the notes (`harness.report.fuzz_summary`).
    """
    known_seen: dict[str, set[str]] = {}
    tally = _Tally(subject, result, third, bar=bar)
    judge = _judge(subject, session, known_seen=known_seen, last=tally.last, third=third)
    found: list[Found] = []
    stopped: str | None = "when the run itself stopped (an interruption or an error)"
    if config.seed_drawn and not config.quiet:
        _say(bar, f"{subject.name}: fuzz seed {config.seed} (drawn; --seed {config.seed} generates the same inputs)")

    def on_found(new: Found) -> None:
        found.append(new)
        _record_fuzz_failure(config, result, new, bar=bar)
        tally.flush()

    try:
        outcome = hunt(strategies.fuzz_inputs(_view(subject, config, third)), judge, n=config.fuzz,
                       seed=config.seed, database=config.example_database, database_dir=config.hypothesis_db,
                       key=f"{subject.name}:False", on_example=tally, on_found=on_found)
        stopped = _stop_reason(outcome, config.fuzz - outcome.generated)
    finally:
        tally.flush()
        _record_fuzz_stop(result, asked=config.fuzz, ran=tally.ran, found=found, seed=config.seed,
                          stopped=stopped if tally.ran < config.fuzz else None)
        for entry_id, case_ids in sorted(known_seen.items()):
            result.notes.append(f"fuzz: {len(case_ids)} input(s) hit known llama.cpp crash {entry_id} "
                                "(passed over, not shrunk)")


def _view(subject: Subject, config: RunConfig, third: ReferenceSide | None) -> strategies.VocabView:
    """What the vocabulary-aware strategies draw from: the model's pieces and special tokens."""
    view = strategies.vocab_view(name=subject.name, texts=subject.table.texts, attrs=subject.table.attrs,
                                 pieces=subject.table.pieces)
    extra = fuzz_specials(config, subject.model) if third is not None else ()
    if extra:  # the original's own tokens the GGUF does not hold the same way (harness.runs.third_side)
        view = replace(view, specials=view.specials + extra)
    return view


def _long_phases(subject: Subject, session: OracleSession, config: RunConfig, result: ModelResult,
                 third: ReferenceSide | None, texts: tuple[str, ...], recorder: calls.Recorder) -> None:
    """Long documents judged live whatever the shorter cases did, then many calls of the one engine object
    against the records kept.

    A document that only repeats a difference the run has seen already is recorded (shown windowed), not
    cut: a short case is the better reproduction. One that shows a new difference is cut to its smallest
    window showing it (`harness.runs.documents`).
    """
    if config.long_docs > 0:
        tally = _Tally(subject, result, third, record=False)  # documents records its own, windowed
        judge = _judge(subject, session, known_seen={}, last=tally.last, third=third)
        known = {entry["signature"] for kind in FINDINGS for entry in getattr(result, kind) if entry.get("signature")}
        documents.check_documents(subject.name, judge, _view(subject, config, third), texts, result,
                                  docs=config.long_docs, max_bytes=config.long_bytes, seed=config.seed,
                                  database=config.example_database, database_dir=config.hypothesis_db,
                                  known=known, on_example=tally)
    calls.check_calls(subject, recorder, config.calls, result, seed=config.seed)


def _stop_reason(outcome: Hunt, budget: int) -> str | None:
    """Why a hunt ended with `budget` inputs left (None when it ran them all)."""
    if budget <= 0:
        return None
    if outcome.notes:
        return f"Hypothesis stopped: {outcome.notes[0]}"
    return "Hypothesis generated no further distinct input"


def _record_fuzz_stop(result: ModelResult, *, asked: int, ran: int, stopped: str | None, found: list[Found],
                      seed: int | None) -> None:
    differences = len({sig for new in found for sig in new.new})
    result.fuzz = fuzz_summary.block(asked, ran, stopped, differences=differences, seed=seed)
    shrunk = sum(len(new.new) for new in found if new.shrunk)
    result.notes.append(f"fuzz: {ran} of {asked} inputs ran, {differences} distinct difference(s) found"
                        + (f" ({shrunk} shrunk)" if differences else "") + (f", stopped {stopped}" if stopped else ""))


def _record_fuzz_input(result: ModelResult, case: dict, findings: list) -> None:
    """A failing generated input: its findings (each `fuzz`), and the whole input for the cases file."""
    if case["id"] in result.inputs:
        return
    result.inputs[case["id"]] = case
    for kind, entry in findings:
        result.add(kind, {**entry, "fuzz": True})


def _record_fuzz_failure(config: RunConfig, result: ModelResult, found: Found, *, bar: Progress | None = None) -> None:
    """A new difference's input (shrunk, unless the shrink budget was spent): recorded, saved as a found case,
    noted (the first `FOUND_NOTES`), and printed as Hypothesis prints a falsifying example, unless quiet."""
    _record_fuzz_input(result, found.case, found.findings)
    _append_found(config, result.model, found.case)
    shown = _clip(repr(strategies.case_input(found.case)))
    how = "shrunk to" if found.shrunk else "as generated (not shrunk):"
    titles = {str(e.get("signature")): str(e.get("signature_title") or e.get("signature"))
              for _, e in found.findings if isinstance(e, dict)}
    named = [f"{titles.get(sig, sig)} [{sig}]" for sig in found.new]
    if sum(note.startswith("fuzz: new difference") for note in result.notes) < FOUND_NOTES:
        result.notes.append(f"fuzz: new difference {'; '.join(named)} after {found.after} input(s), {how} {shown}")
    if config.quiet:
        return
    command = next((e.get("command") for _, e in found.findings if isinstance(e, dict) and e.get("command")), None)
    state = "shrunk" if found.shrunk else "not shrunk"
    lines = [f"Falsifying example ({result.model}, after {found.after} of {config.fuzz} inputs, {state}): {shown}",
             *(f"    {name}" for name in named), *([f"    reproduce: {command}"] if command else [])]
    _say(bar, "\n".join(lines))


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def _say(bar: Progress | None, text: str) -> None:
    """A line on stderr above the progress bar (cleared first on a terminal, redrawn after)."""
    stream = bar.stream if bar is not None else sys.stderr
    if bar is not None and bar.tty and not bar.quiet:
        stream.write("\r\x1b[2K")
    print(text, file=stream, flush=True)
    if bar is not None:
        bar.advance(0)


def _append_found(config: RunConfig, name: str, case: dict) -> None:
    if config.found_dir is None:
        return
    path = config.found_dir / f"{name}.jsonl"
    known = {c["id"] for c in load_corpus(path)} if path.is_file() else set()
    if case["id"] in known:
        return
    jsonl.append(path, case)  # escaped line breaks: later runs read it back


Gathered = dict[str, tuple[Model, list[dict]]]  # a --model argument -> its model and its cases


def plan(config: RunConfig) -> tuple[Partition, Gathered]:
    """Shard `config.shard` of the run's units (`harness.runs.shard`), and every model with its gathered cases.

    Units, in the run's order: per model its `MODEL` unit, one per case, and a
    `FUZZ` unit weighing the fuzz budget (the hunt runs whole in one shard).
    """
    if config.shard is None:
        raise ValueError("plan() needs a RunConfig with a shard")
    units: list[Unit] = []
    gathered: Gathered = {}
    for arg in config.models:
        model = open_model(arg)
        cases = gather_cases(model, config)
        model.forget_metadata()  # read again by its check: every model is planned before the first is checked
        gathered[arg] = model, cases
        units += [Unit(model.name, MODEL), *(Unit(model.name, str(c["id"])) for c in cases)]
        if config.fuzz:
            units.append(Unit(model.name, FUZZ, config.fuzz))
    return partition("run", units, config.shard), gathered


def run(config: RunConfig, results: list[ModelResult] | None = None,
        sharded: tuple[Partition, Gathered] | None = None) -> list[ModelResult]:
    """Check every model of `config`; a `SetupError` for a bad name, path or corpus.

    Each finished model is appended to `results` as it finishes, so a caller
    stopped by a signal still has them for a partial report. `sharded` (from
    `plan`) limits the run to one shard: models it holds nothing of are skipped.
    """
    factory = load_engine(config.engine, args=dict(config.engine_args), timeout=config.engine_timeout)
    check_spec(config)  # a bad --reference or a missing library: exit 2 before any work
    part, gathered = sharded if sharded is not None else (None, {})
    # each model resolved once, before any work (a bad name or file fails fast), with its cases when planned
    models = {arg: gathered[arg] if arg in gathered else (open_model(arg), None) for arg in config.models}
    for corpus in config.corpora:
        if not Path(corpus).is_file():
            raise SetupError(f"no such corpus file: {corpus}")
    results = [] if results is None else results
    for arg, (model, cases) in selection.chosen(models, config, gather_cases).items():
        if part is not None and not part.items(model.name):
            continue
        if config.tally is not None and config.tally.reached:  # --maxfail: the run stopped
            config.tally.not_started.append(model.name)
            continue
        if not config.quiet:
            print(f"checking {arg} with {describe(config.engine)}", file=sys.stderr)
        result = check_model(model, config, factory, part=part, cases=cases)
        if part is not None and not part.owns(result.model):
            case_part(result)
        results.append(result)
    return results
