"""The engine of `python -m harness run`: engine against live llama.cpp, corpora then fuzz.

For each model: load the engine (`--engine`, ours by default) and llama.cpp
(`harness.oracle_session.OracleSession`, crash-isolated, `--jobs` of them); compare the
vocabularies; compare every corpus case under the four add_special x
parse_special flags with their detokenizations; then let Hypothesis generate
`fuzz` inputs (`harness.strategies.fuzz_inputs`), checking each live and shrinking
the first failure to a minimal input. Every failing case is written to
`<report>/cases/<model>.jsonl` (the reproduce command replays it), and fuzz
failures also to `corpora/found/<model>.jsonl`, which later runs include.

An engine that raises on a case is an engine error for that case; llama.cpp
dying on a case is an oracle crash for that case; the run goes on. A crash
that matches the known-crashes list (`RunConfig.known_crashes`, see
`harness.known_crashes`) is recorded as a known crash instead, which is not a
finding; the fuzzer hunts on past it.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Queue

from . import strategies
from .corpus import CorpusError, default_corpora, load_corpus
from .engine_spec import describe, load_engine
from .families import family_of
from .findings import (
    Subject,
    crash_finding,
    engine_table,
    findings,
    gguf_texts,
    reference_table,
    reproduce_command,
    run_engine,
    vocab_findings,
)
from .fuzz import hunt
from .known_crashes import NONE, KnownCrashes
from .models import SetupError, resolve, short_name
from .oracle_session import OracleCrash, OracleRefusal, OracleSession
from .outcomes import engine_load_error, engine_or_error, engine_vocab, last_line, refusal_mismatch, save_failing
from .progress import Progress
from .report import ModelResult
from .run_config import RunConfig


def gather_cases(path: Path, name: str, config: RunConfig) -> list[dict]:
    """Default corpora, --corpus files and this model's found corpus, ids made unique."""
    cases: list[dict] = []
    try:
        if config.default_corpora:
            cases += default_corpora(path)
        for corpus in config.corpora:
            cases += _tagged(load_corpus(corpus), corpus)
        found = config.found_dir / f"{name}.jsonl" if config.found_dir else None
        if config.default_corpora and found and found.is_file():
            cases += _tagged(load_corpus(found), found)
    except CorpusError as exc:
        raise SetupError(str(exc)) from None
    cases = _unique(cases)
    if config.case_ids:
        cases = [c for c in cases if c["id"] in config.case_ids]
    return cases


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

    def __init__(self, path: Path, *, jobs: int, timeout: float) -> None:
        self.sessions = [OracleSession(path, timeout=timeout) for _ in range(max(jobs, 1))]
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
        self.executor.shutdown(wait=True)
        for session in self.sessions:
            session.close()


def check_model(arg: str, config: RunConfig, factory) -> ModelResult:
    """Everything `run` checks on one vocabulary, as a `ModelResult`."""
    path = resolve(arg)
    name = short_name(path)
    result = ModelResult(name, family_of(name))
    cases = gather_cases(path, name, config)
    pool = OraclePool(path, jobs=config.jobs, timeout=config.timeout)
    try:
        loaded = _load_both(pool, factory, path, result, cases, known=config.known_crashes)
        if loaded is None:
            return result
        subject = _prepare(path, name, arg, loaded, config, result)
        with Progress(total=len(cases) + config.fuzz, label=name, quiet=config.quiet) as bar:
            _check_cases(subject, pool, cases, result, bar)
            if config.fuzz:
                _fuzz(subject, pool.sessions[0], config, result, bar)
    finally:
        pool.close()
    save_failing(result, cases, config)
    return result


def _load_both(pool: OraclePool, factory, path: Path, result: ModelResult, cases: list[dict], *,
               known: KnownCrashes = NONE):
    """(engine, engine vocab, llama.cpp vocab, pieces), or None with the outcome recorded.

    Both refusing the file is agreement (a note, no finding); one refusing is a finding.
    """
    oracle = pool.sessions[0]
    asked = pool.executor.submit(lambda: (oracle.call("vocab"), oracle.call("pieces")))
    engine, engine_error = engine_or_error(factory, path)  # meanwhile, in this process
    got = engine_vocab(engine) if engine is not None else None
    try:
        vocab, pieces = asked.result()
    except OracleCrash as crash:
        result.add(*crash_finding(known, result.model, {"case_id": "<load>", "text": "", "command": None},
                                  crash.as_dict()))
        result.notes.append("llama.cpp crashed loading the vocabulary")
        return None
    except OracleRefusal as refused:
        if engine is None:
            result.notes.append(f"both refuse the file: llama.cpp ({last_line(str(refused))}); "
                                f"engine ({last_line(engine_error)})")
        else:
            refusal_mismatch(result, last_line(str(refused)))
        return None
    if engine is None:  # nothing to compare: every case counts as failed, not as passed
        engine_load_error(result, engine_error)
        result.cases = len(cases)
        result.failing.update(c["id"] for c in cases)
        return None
    return engine, got, vocab, pieces


def _prepare(path: Path, name: str, arg: str, loaded, config: RunConfig, result: ModelResult) -> Subject:
    """Both sides' token tables and the vocabulary diff."""
    engine, got, vocab, pieces = loaded
    if result.family == "other":
        result.family = vocab.get("vocab_type", "other")
    table = reference_table(gguf_texts(path), vocab, pieces)
    cases_file = config.report_dir / "cases" / f"{name}.jsonl"
    subject = Subject(name=name, arg=arg, path=path, engine=engine, table=table,
                      engine_table=engine_table(engine, table),
                      command=reproduce_command(arg=arg, engine=config.engine, cases_file=cases_file),
                      known=config.known_crashes)
    for kind, entry in vocab_findings(subject, vocab, got):
        result.add(kind, entry)
    return subject


def _check_cases(subject: Subject, pool: OraclePool, cases: list[dict], result: ModelResult,
                 bar: Progress) -> None:
    futures = [pool.executor.submit(pool.evaluate, case) for case in cases]
    for case, future in zip(cases, futures):
        got = run_engine(subject.engine, case)
        expected, crash = future.result()
        result.cases += 1
        for kind, entry in findings(subject, case, expected, got, crash=crash):
            result.add(kind, entry)
        bar.advance(note=f"{len(result.failing)} failing")


def _judge(subject: Subject, session: OracleSession, *, ignore_crashes: bool, known_seen: dict[str, set]):
    """The fuzz verdict for one case: its findings; crashes count as passing when ignored.

    A known llama.cpp crash always counts as passing (the hunt goes on for real
    engine bugs); the input is noted in `known_seen` (entry id -> case ids).
    """
    def judge(case: dict) -> list[tuple[str, dict]]:
        try:
            expected, crash = session.evaluate(case), None
        except (OracleCrash, OracleRefusal) as exc:
            expected, crash = None, exc.as_dict()
        if crash is not None and ignore_crashes:
            return []
        found = findings(subject, case, expected, run_engine(subject.engine, case), crash=crash)
        for kind, entry in found:
            if kind == "known_oracle_crashes":
                known_seen.setdefault(entry["known_crash"], set()).add(case["id"])
        return [(kind, entry) for kind, entry in found if kind != "known_oracle_crashes"]
    return judge


def _fuzz(subject: Subject, session: OracleSession, config: RunConfig, result: ModelResult,
          bar: Progress) -> None:
    """Hunt for a failure; if the first one is only llama.cpp crashing, hunt on past crashes.

    llama.cpp aborts on some inputs for whole vocabulary families; without the
    second hunt such a crash would hide every engine bug behind it.
    """
    view = strategies.vocab_view(name=subject.name, texts=subject.table.texts, attrs=subject.table.attrs,
                           pieces=subject.table.pieces)
    budget, ignore_crashes = config.fuzz, False
    known_seen: dict[str, set[str]] = {}
    try:
        while budget > 0:
            seed = None if config.seed is None else config.seed + int(ignore_crashes)
            judge = _judge(subject, session, ignore_crashes=ignore_crashes, known_seen=known_seen)
            outcome = hunt(strategies.fuzz_inputs(view), judge, n=budget, seed=seed,
                           key=f"{subject.name}:{ignore_crashes}",
                           on_example=lambda: bar.advance(note=f"{len(result.failing)} failing"))
            result.cases += outcome.generated
            budget -= outcome.generated
            if outcome.case is None:
                return
            _record_fuzz_failure(config, result, outcome)
            if ignore_crashes or any(kind != "oracle_crashes" for kind, _ in outcome.findings):
                return
            ignore_crashes = True
    finally:
        for entry_id, case_ids in sorted(known_seen.items()):
            result.notes.append(f"fuzz: {len(case_ids)} input(s) hit known llama.cpp crash {entry_id} "
                                "(passed over, not shrunk)")


def _record_fuzz_failure(config: RunConfig, result: ModelResult, outcome) -> None:
    for kind, entry in outcome.findings:
        result.add(kind, {**entry, "fuzz": True})
    result.notes.append(f"fuzz: minimal failing input {outcome.case['id']} after {outcome.generated} examples")
    _append_found(config, result.model, outcome.case)


def _append_found(config: RunConfig, name: str, case: dict) -> None:
    if config.found_dir is None:
        return
    path = config.found_dir / f"{name}.jsonl"
    known = {c["id"] for c in load_corpus(path)} if path.is_file() else set()
    if case["id"] in known:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(case, ensure_ascii=False) + "\n")


def run(config: RunConfig) -> list[ModelResult]:
    """Check every model of `config`; a `SetupError` for a bad name, path or corpus."""
    factory = load_engine(config.engine)
    for arg in config.models:
        resolve(arg)  # fail fast on a bad name or file before any work
    for corpus in config.corpora:
        if not Path(corpus).is_file():
            raise SetupError(f"no such corpus file: {corpus}")
    results = []
    for arg in config.models:
        if not config.quiet:
            print(f"checking {arg} with {describe(config.engine)}", file=sys.stderr)
        results.append(check_model(arg, config, factory))
    return results
