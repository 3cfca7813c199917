"""The per-model check that `run` (live) and `compare` (golden replay) both fill in.

Once both sides are loaded, a model is checked the same way whatever the expected side is:
1. `subject()`: the reference token table from the GGUF and the expected vocabulary record,
   the engine's table, the reproduce command; the vocabulary judged and tallied;
2. `judge_cases()`: every case asked of the expected side and of the engine (batched), then
   judged (`harness.compare.findings.findings`) and tallied per capability;
3. `conclude()`: the failing cases written beside the report, the model marked not checked
   when nothing was compared.

Where the expected side comes from is the only difference, behind `Expected`: llama.cpp
live (`harness.runs.live.LiveExpected`), a golden file (`harness.runs.replay.GoldenExpected`),
and, as a third side, the model's original tokenizer (`--reference`,
`harness.runs.third_side.ReferenceSide`): asked for its ids and its decode of llama.cpp's
ids beside the expected side, each case then counted per class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..compare.findings import EngineError, findings, vocab_findings
from ..compare.result import ModelResult
from ..compare.subject import Subject, engine_table, gguf_texts, reference_table, reproduce_command
from ..compare.verdict import finish
from ..golden import digest
from ..models.model import Model
from ..subjects import capabilities as capmod
from . import selection
from .config import RunConfig
from .outcomes import save_failing
from .progress import Progress

if TYPE_CHECKING:
    from .selection import Tally
    from .third_side import ReferenceSide

CHUNK = 64  # cases judged at a time under --maxfail (without it, all at once)

# One case's expected answer: (llama.cpp's record, None), or (None, the crash it met).
Answer = tuple[dict | None, dict | None]


class Expected(Protocol):
    """The expected side of a check: what the engine is held to, case by case."""

    def ask(self, cases: Sequence[dict]) -> list[Callable[[], Answer]]:
        """Start answering every case (work may run while the engine runs); one call per case, in order."""
        ...

    def engine_needed(self, case: dict) -> bool:
        """Whether the engine must run on `case` (not when the expected side is a recorded crash)."""
        ...


def subject(*, model: Model, engine, vocab: dict, pieces: list[bytes] | None,
            got_vocab: Callable[[], dict | EngineError], config: RunConfig, result: ModelResult) -> Subject:
    """Both sides' token tables and the vocabulary judged: the model ready for its cases.

    `vocab` and `pieces` are the expected side's vocabulary record (pieces when it has them);
    `got_vocab` gives the engine's, when the side asks for it (live: read at load, meanwhile).
    """
    table = reference_table(gguf_texts(model), vocab, pieces)
    cases_file = config.report_dir / "cases" / f"{model.name}.jsonl"
    made = Subject(model=model, engine=engine, table=table, engine_table=engine_table(engine, table),
                   command=reproduce_command(arg=model.arg, engine=config.engine, cases_file=cases_file,
                                             engine_args=config.engine_args),
                   known=config.known_crashes)
    capmod.start(result, engine.caps)
    found = vocab_findings(made, vocab, got_vocab())
    for kind, entry in found:
        result.add(kind, entry)
    capmod.tally_vocab(result, engine.caps, found)
    return made


def judge_cases(subject: Subject, cases: Sequence[dict], expected: Expected, result: ModelResult,
                bar: Progress, reference: ReferenceSide | None = None, tally: Tally | None = None) -> None:
    """Every case judged: the expected side asked first, then the engine batched, then each case in order.

    With a `reference` (the original tokenizer, `run` / `compare --reference`), it is asked too,
    each case is judged three ways, and the original decodes llama.cpp's ids beside llama.cpp's
    detokenize (`harness.runs.third_side`). With `--maxfail` (`tally.limit`) the cases go in chunks
    of `CHUNK`, and the first chunk after which the run's failing cases reach the limit is the last.
    """
    limited = tally is not None and tally.limit is not None
    step = CHUNK if limited else max(len(cases), 1)
    for start in range(0, len(cases), step):
        _judge_chunk(subject, cases[start:start + step], expected, result, bar, reference)
        if tally is not None and limited:
            tally.count(result.model, tally.failing_now(result))
            if tally.reached and start + step < len(cases):
                left = [str(c["id"]) for c in cases[start + step:]]
                tally.left[result.model] = left
                result.notes.append(f"stopped after {sum(tally.failing.values())} failing case(s) (--maxfail "
                                    f"{tally.limit}): {len(left)} of {len(cases)} cases not checked")
                return


def _judge_chunk(subject: Subject, cases: Sequence[dict], expected: Expected, result: ModelResult,
                 bar: Progress, reference: ReferenceSide | None) -> None:
    answers = expected.ask(cases)
    asked = [case for case in cases if expected.engine_needed(case)]
    got_of = dict(zip((c["id"] for c in asked), subject.engine.evaluate_many(asked), strict=True))
    theirs = reference.outcomes(list(cases)) if reference is not None else [None] * len(cases)
    for case, answer, ours in zip(cases, answers, theirs, strict=True):
        record, crash = answer()
        got = got_of.get(case["id"])
        if record is not None and "digest" in record and isinstance(got, dict):
            record = digest.resolve(record, got)  # a document's golden: digests per block, filled from ours
        result.cases += 1
        found, decoded = judge_case(subject, case, record, got, crash=crash, reference=reference, ours=ours)
        if reference is not None:
            reference.count(record, got, ours, decoded)
        for kind, entry in found:
            result.add(kind, entry)
        capmod.tally_case(result, subject.engine.caps, case, record, got)
        bar.advance(note=f"{len(result.failing)} failing")


def judge_case(subject: Subject, case: dict, record: dict | None, got: Any, *, crash: dict | None = None,
               reference: ReferenceSide | None = None, ours: Any = None) -> tuple[list[tuple[str, dict]], Any]:
    """One case's findings, the one judge of golden, live and fuzzed cases: the engine's outcome `got`
    against the expected `record` (or llama.cpp's `crash`), and with a `reference` the original's
    outcome `ours` too. Returns the findings and the original's decode of llama.cpp's ids (None
    without a reference), which the caller counts: live and replay at once, the fuzzer for the
    cases it keeps."""
    found = findings(subject, case, record, got, crash=crash)
    if reference is None:
        return found, None
    return reference.judge(subject, case, record, got, ours, found)


def engine_unloaded(result: ModelResult, cases: Sequence[dict]) -> ModelResult:
    """The engine did not load: nothing to compare, so every case counts as failed, not as passed."""
    result.cases = len(cases)
    result.failing.update(c["id"] for c in cases)
    capmod.tally_unloaded(result, len(cases))
    return result


def conclude(result: ModelResult, cases: list[dict], config: RunConfig) -> ModelResult:
    """The known differences sorted out (`settle`), the failing cases saved for their reproduce commands;
    not checked when nothing was compared."""
    settle(result, cases, config)
    save_failing(result, cases, config)
    finish(result)
    return result


def settle(result: ModelResult, cases: Sequence[dict], config: RunConfig) -> None:
    """The findings `--expected-differences` names moved aside (`harness.compare.expected`), each entry's status
    given; then the model's failing cases counted for `--maxfail`."""
    tally = config.tally
    if config.expected is not None:
        left = set(tally.left.get(result.model, ())) if tally is not None else set()
        judged = {str(c["id"]) for c in cases} - left | set(result.inputs)
        cut = bool(left or (tally is not None and result.model in tally.phases))
        config.expected.sort_out(result, judged=judged,
                                 whole=not (cut or config.shard or selection.narrowed(config)))
    if tally is not None:
        tally.count(result.model, len(result.failing))


def stopped(config: RunConfig, result: ModelResult, phases: list[str]) -> bool:
    """True when `--maxfail` was reached: the model's later `phases` are then not run (noted, and in the tally)."""
    tally = config.tally
    if tally is None or not tally.reached:
        return False
    if phases:
        tally.phases[result.model] = phases
        result.notes.append(f"stopped (--maxfail {tally.limit}): {', '.join(phases)} not run")
    return True
