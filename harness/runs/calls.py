"""The many-calls phase of the live run: one engine object asked thousands of calls in a row.

A server's tokenizer lives for millions of calls: a cache that evicts wrongly, a counter that
wraps, state that one call leaves for the next show only after many. `check_calls` asks the
engine under test, again and again, the corpus cases it already agreed on (in order, then
reversed, then shuffled), `config.calls` tokenize calls in all (a case is one call per
add_special x parse_special pair, each with its detokenizations), and compares every answer
with llama.cpp's record of that case from the corpus phase (`Recorder`): no new oracle calls.
A text of `ONCE_BYTES` or more (the corpora's documents) is asked in the first pass only: the
phase counts calls, and each further pass over a 900 KiB document cost the nightly seconds per
vocabulary for four calls, as many as a sentence's.

The first case that now differs is a finding on that case (the same text agreed before),
with the call it came at, and a reproduce command that asks that one text as many times
(`--case ID --calls N`). A contained engine (`cmd:`, `MODULE:CALLABLE`) is one child process
for the whole phase, as it is for the run: its object sees every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from random import Random

from ..compare.result import ModelResult
from ..compare.subject import Subject
from ..golden.records import FLAGS
from ..inputs.corpus import case_input
from .check import Answer, Expected, judge_case

CHUNK = 256  # cases asked of the engine per evaluate_many: the engine batches them as in the corpus phase
ROUND = 1000  # the reproduce command's --calls is rounded up to this
ONCE_BYTES = 16 << 10  # a text this long is asked in the first pass only


class Recorder:
    """An `Expected` side that keeps llama.cpp's record of every case it answers, for `check_calls`."""

    def __init__(self, inner: Expected) -> None:
        self.inner = inner
        self.records: dict[str, tuple[dict, dict]] = {}  # case id -> (case, llama.cpp's record)

    def ask(self, cases: Sequence[dict]) -> list[Callable[[], Answer]]:
        return [self._keeping(case, answer) for case, answer in zip(cases, self.inner.ask(cases), strict=True)]

    def engine_needed(self, case: dict) -> bool:
        return self.inner.engine_needed(case)

    def _keeping(self, case: dict, answer: Callable[[], Answer]) -> Callable[[], Answer]:
        def get() -> Answer:
            record, crash = answer()
            if record is not None:
                self.records[str(case["id"])] = (case, record)
            return record, crash
        return get


def call_order(n: int, count: int, seed: int | None, once: frozenset[int] = frozenset()) -> Iterator[int]:
    """`count` indices into `n` texts: in order, then reversed, then shuffled (seeded), pass after pass;
    the indices in `once` in the first pass only."""
    order, rng, passes = list(range(n)), Random(0 if seed is None else seed), 0
    while count > 0 and order:
        if passes == 1:
            order = [i for i in order if i not in once]
            order.reverse()
        elif passes > 1:
            rng.shuffle(order)
        yield from order[:count]
        count -= len(order)
        passes += 1


def check_calls(subject: Subject, recorder: Recorder, calls: int, result: ModelResult, *,
                seed: int | None = None) -> None:
    """Up to `calls` tokenize calls of the engine on texts it agreed on; the first that now differs is a finding."""
    if calls <= 0:
        return
    agreed = [pair for case_id, pair in recorder.records.items() if case_id not in result.failing]
    if not agreed:
        result.notes.append("calls: not checked (no case agreed with llama.cpp before the phase)")
        return
    before = result.cases * len(FLAGS)  # about: every case judged so far was one call per flag pair
    once = frozenset(i for i, (case, _) in enumerate(agreed) if len(case_input(case)) >= ONCE_BYTES)
    if len(once) == len(agreed):  # long texts alone (a reproduce command's one document): each asked again
        once = frozenset()
    order = list(call_order(len(agreed), -(-calls // len(FLAGS)), seed, once))
    for start in range(0, len(order), CHUNK):
        chunk = [agreed[i] for i in order[start:start + CHUNK]]
        answers = subject.engine.evaluate_many([case for case, _ in chunk])
        for offset, ((case, record), got) in enumerate(zip(chunk, answers, strict=True)):
            found, _ = judge_case(subject, case, record, got)
            if found:
                _report(subject, result, found, case, call=before + (start + offset) * len(FLAGS) + 1,
                        phase_call=(start + offset) * len(FLAGS) + 1)
                return
    long = f"; the {len(once)} of {ONCE_BYTES >> 10} KiB or more in the first pass only" if once else ""
    result.notes.append(f"calls: {len(order) * len(FLAGS):,} tokenize calls of one engine object in a row "
                        f"({len(agreed)} texts, in order, reversed, shuffled{long}) agreed with llama.cpp's records")


def _report(subject: Subject, result: ModelResult, found: list, case: dict, *, call: int, phase_call: int) -> None:
    """The first case that changed its answer, as findings with the call it came at and a short reproduction."""
    again = -(-(call + len(FLAGS)) // ROUND) * ROUND
    command = f"{subject.command(str(case['id']))} --calls {again}"
    where = {"call": call, "phase_call": phase_call}
    for kind, entry in found:
        result.add(kind, {**entry, "command": command, "calls": where})
    result.notes.append(f"calls: case {case['id']} agreed with llama.cpp in the corpus phase, then differed at "
                        f"about call {call:,} of the same engine object ({phase_call:,} calls into this phase): "
                        f"state carried between calls. Reproduce (one text asked {again:,} times): {command}")
