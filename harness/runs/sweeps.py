"""The sweeps of a three-way run (`run --reference`, `--sweeps`): every input screened three ways, batched.

A sweep (`harness.inputs.sweeps`: added tokens with whitespace around them, every vocabulary
entry, every code point, ASCII pairs) holds up to hundreds of thousands of inputs, too many to
judge one by one as a corpus case is judged (about 7 ms a case three ways). So each is
screened first, in batches, on the three sides at once: llama.cpp in a worker of its own
(`tokenize_many`, one request per `BATCH` inputs, its time inside llama.cpp's calls measured per
call), the original in its reference child (`evaluate_many`, the child's batching), and the engine
under test (ours through `Tokenizer.tokenize_batch`, any other through `evaluate_many`). The screen
compares the ids under the four flag pairs. An input on which a side differs, fails or crashes
becomes a case, `sweep-NAME-N` (N its index in the sweep), judged by the check like every
gathered case: every layer compared, findings signed, conversion causes searched, the case
written to the cases file for its reproduce line. `PER_KIND` cases are kept per kind of
difference and `MAX_CASES` per sweep; the other differing inputs are counted.

What the screen found is the sweep's block (`SweepPlan.done`), put into the model's
`reference.sweeps` and its notes: inputs asked, agree, differ, not applicable (the original
could be asked no pair), not checked (a side stopped), cases judged, and the time of each side.
"Agree" there means the ids agreed three ways on every flag pair compared; detokenize and the
original's decode are compared on the judged cases only.
"""

from __future__ import annotations

import base64
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..compare.findings import EngineError
from ..inputs import boundaries, derived
from ..inputs import sweeps as generators
from ..inputs.cases import make_case
from ..models.model import Model
from ..oracle.session import OracleCrash, OracleRefusal, OracleSession
from ..references import added, specs
from ..references.classify import FLAG_PAIRS, outcome_ids
from ..subjects import wire
from ..subjects.client import ChildFailure
from ..subjects.guard import InProcessEngine
from .engine import load_engine

BATCH = 1024  # inputs per batch at most (one llama.cpp request, one engine batch, 1/64 the reference requests)
FIRST_BATCH = 16  # the first batch of a sweep; then doubled or halved to take about BATCH_SECONDS
BATCH_SECONDS = 2.0  # so that a time budget is kept, and an interrupted run waits for little
MAX_CASES = 32  # differing inputs of one sweep judged as cases (each costs a whole case three ways)
PER_KIND = 2  # of them, at most this many per kind of difference
MAX_FAILED_CALLS = 24  # llama.cpp batches that may crash or hang in one sweep before the rest is not checked
Ids = list[list[int] | None] | None
Pairs = tuple[tuple[bool, bool], ...]


@dataclass
class SweepPlan:
    """What `--sweeps` asked (`sizes`: sweep -> at most this many inputs, None for all; `seconds`: the time all of
    a model's screens may take, None for no limit), and per model what the screens found (`done`: model name ->
    sweep -> its block; `found`: the cases they made), filled when the model's cases are gathered."""

    sizes: dict[str, int | None]
    seconds: float | None = None
    done: dict[str, dict[str, dict]] = field(default_factory=dict)
    found: dict[str, list[dict]] = field(default_factory=dict)


def sweep_cases(config: Any, model: Model) -> list[dict]:
    """The differing inputs of every sweep `config.sweeps` asks for, as cases; the screens' blocks kept in
    `config.sweeps.done[model.name]`. None without `--reference` or with no sweep asked. Each sweep may take
    an even share of what is left of the time budget."""
    plan: SweepPlan | None = getattr(config, "sweeps", None)
    if plan is None or not plan.sizes or not config.reference:
        return []
    if model.name in plan.found:  # gathered once already (a selection, a shard plan): the screen is not redone
        return list(plan.found[model.name])
    blocks: dict[str, dict] = {}
    cases: list[dict] = []
    plan.done[model.name], plan.found[model.name] = blocks, cases
    try:
        sides = Sides.open(config, model)
    except _NotScreened as exc:
        for name in plan.sizes:
            blocks[name] = {"not_run": str(exc)}
        return []
    end = None if plan.seconds is None else time.monotonic() + plan.seconds
    try:
        for left, (name, size) in zip(range(len(plan.sizes), 0, -1), plan.sizes.items(), strict=True):
            everything = _inputs(name, config, model, sides)
            items = generators.sized(generators.screen_order(everything, ordered=name == "added"), size)
            deadline = None if end is None else time.monotonic() + max(end - time.monotonic(), 0.0) / left
            block, found = screen(sides, name, items, deadline=deadline)
            blocks[name] = {**block, "of": len(everything)}
            cases += found
            if not config.quiet:
                print(summary_line(model.name, name, blocks[name]), file=sys.stderr, flush=True)
    finally:
        sides.close()
    return list(cases)


def _inputs(name: str, config: Any, model: Model, sides: Sides) -> list[generators.Item]:
    """A sweep's full list of (index, text) for this model."""
    if name == "added":
        return generators.added_inputs(_added_tokens(config.reference, model))
    if name == "vocab":
        return generators.vocab_inputs(sides.pieces(), skip=_control_ids(model))
    if name == "unicode":
        from tokenizer import unicode as uni
        extra = [cp for points in derived.UNICODE_VERSIONS.values() for cp in points]
        return generators.unicode_inputs(generators.unicode_points(uni.flags_array(), extra))
    return generators.ascii_inputs()


def _added_tokens(spec: str, model: Model) -> list[str]:
    """The added sweep's tokens in priority order: the original's that the GGUF does not hold the same way
    (`boundaries.reference_specials`), then the original's other added and special tokens, then the GGUF's
    own, each group in `spread_order`."""
    tokens = added.texts(spec)
    odd = boundaries.reference_specials(model, tokens, max_special=len(tokens) + 1)
    groups = [odd, [t for t, _ in tokens], _gguf_specials(model)]
    out: list[str] = []
    for group in groups:
        unique = list(dict.fromkeys(group))
        out += [unique[j] for j in generators.spread_order(len(unique))]
    return list(dict.fromkeys(out))


def _gguf_specials(model: Model) -> list[str]:
    """The GGUF's CONTROL, USER_DEFINED and UNKNOWN tokens, spelled as the input that holds them."""
    found = boundaries._token_lists(model)
    if found is None:
        return []
    kinds = (boundaries.UNKNOWN, boundaries.CONTROL, boundaries.USER_DEFINED)
    return [boundaries.spelled(text) for text, kind in zip(*found, strict=False) if kind in kinds]


def _control_ids(model: Model) -> list[int]:
    found = boundaries._token_lists(model)
    if found is None:
        return []
    return [i for i, kind in enumerate(found[1]) if kind in (boundaries.UNKNOWN, boundaries.CONTROL)]


class _NotScreened(Exception):
    """A side could not be started: the sweeps are not run (the check itself records why)."""


class Sides:
    """llama.cpp (a worker of its own), the engine under test and the original, for one model's screens."""

    def __init__(self, llama: OracleSession, engine: Any, original: Any) -> None:
        self.llama, self.engine, self.original = llama, engine, original
        self.inputs: dict[str, list[generators.Item]] = {}
        self._pieces: list[bytes] | None = None
        self.pool = ThreadPoolExecutor(max_workers=2)

    @classmethod
    def open(cls, config: Any, model: Model) -> Sides:
        llama = OracleSession(model.path, timeout=config.timeout, memory_limit=config.memory_limit)
        engine = original = None
        try:
            llama.call("ping")
            engine = load_engine(config.engine, args=dict(config.engine_args),
                                 timeout=config.engine_timeout)(model.path)
            original = specs.reference_factory(config.reference, args=dict(config.reference_args),
                                               timeout=config.engine_timeout)(model.path)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the check loads each side again and says why
            for side in (engine, original):
                if side is not None:
                    side.close()
            llama.close()
            raise _NotScreened(f"a side could not be started: {type(exc).__name__}: {exc}"[:300]) from None
        return cls(llama, engine, original)

    def pieces(self) -> list[bytes]:
        """llama.cpp's piece of every token (special=True), asked once."""
        if self._pieces is None:
            self._pieces = self.llama.call("pieces")
        return self._pieces

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        for side in (self.engine, self.original):
            side.close()
        self.llama.close()


@dataclass
class _Tally:
    """One sweep's screen as it goes."""

    name: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("inputs", "agree", "differ", "not_applicable", "not_checked"), 0))
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("llama.cpp", "engine", "original"), 0.0))
    llama_calls: int = 0
    llama_inside: float = 0.0
    failed_calls: int = 0
    kinds: dict[tuple, int] = field(default_factory=dict)
    cases: list[dict] = field(default_factory=list)

    def took(self, side: str, value: Any, spent: float) -> Any:
        """`value`, with the `spent` seconds added to `side`'s time."""
        self.seconds[side] += spent
        return value

    def keep(self, index: int, text: str, kind: tuple) -> None:
        """A differing input made a case, unless its kind or the sweep has enough."""
        if len(self.cases) >= MAX_CASES or self.kinds.get(kind, 0) >= PER_KIND:
            return
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.cases.append(make_case(f"sweep-{self.name}-{index:04d}", text))


def pairs_of(name: str) -> tuple[tuple[bool, bool], ...]:
    """The flag pairs a sweep screens under: all four for the added tokens (add_special and parse_special are
    about them), (False, False) for the others (plain text: a BOS or EOS is the default cases' to check)."""
    return FLAG_PAIRS if name == "added" else ((False, False),)


def screen(sides: Sides, name: str, items: list[generators.Item],
           deadline: float | None = None) -> tuple[dict, list[dict]]:
    """One sweep screened three ways, in batches sized to take about `BATCH_SECONDS` each, until `deadline`
    (`time.monotonic()`), if any: (its block, the cases of its differing inputs)."""
    tally, pairs, size, at = _Tally(name), pairs_of(name), FIRST_BATCH, 0
    start = time.perf_counter()
    while at < len(items) and (deadline is None or time.monotonic() < deadline):
        batch = items[at:at + size]
        began = time.perf_counter()
        llama = sides.pool.submit(_timed, _llama_ids, sides.llama, [text for _, text in batch], pairs, tally)
        original = sides.pool.submit(_timed, _original_ids, sides.original, batch, pairs)
        engine = tally.took("engine", *_timed(_engine_ids, sides.engine, batch, pairs))  # meanwhile, here
        theirs = tally.took("llama.cpp", *llama.result())
        ours = tally.took("original", *original.result())
        for (index, text), e, lids, o in zip(batch, engine, theirs, ours, strict=True):
            _judge(tally, index, text, e, lids, o)
        at += len(batch)
        spent = time.perf_counter() - began
        size = _next_size(size, spent)
    stopped = len(items) - at
    tally.counts["not_checked"] += stopped
    per_call = round(tally.llama_inside / tally.llama_calls * 1e6, 2) if tally.llama_calls else None
    block = {**tally.counts, "asked": len(items), "cases": len(tally.cases), "flag_pairs": [list(p) for p in pairs],
             "seconds": round(time.perf_counter() - start, 3),
             "sides_seconds": {k: round(v, 3) for k, v in tally.seconds.items()},
             "llama_cpp_calls": tally.llama_calls, "llama_cpp_us_per_call": per_call,
             "checked": "ids three ways under flag_pairs (every layer, every pair on the judged cases)"}
    if stopped:
        block["stopped"] = f"the time budget ran out: {stopped:,} of {len(items):,} inputs not checked"
    return block, tally.cases


def _next_size(size: int, spent: float) -> int:
    """The next batch's size: doubled after a quick batch, halved after a slow one (1 to `BATCH`)."""
    if spent < BATCH_SECONDS / 2:
        return min(size * 2, BATCH)
    return max(size // 2, 1) if spent > 2 * BATCH_SECONDS else size


def _timed(function, *args) -> tuple[Any, float]:
    start = time.perf_counter()
    return function(*args), time.perf_counter() - start


def _judge(tally: _Tally, index: int, text: str, engine: Any, llama: Any, original: Any) -> None:
    """One input counted; a differing one offered as a case, keyed by where and how the sides part."""
    if llama is _STOPPED:
        tally.counts["not_checked"] += 1
        return
    tally.counts["inputs"] += 1
    failed = [side for side, ids in (("llama.cpp", llama), ("engine", engine)) if ids is None]
    if isinstance(original, EngineError):
        failed.append("original")
    if failed:
        tally.counts["differ"] += 1
        tally.keep(index, text, ("failed", *failed))
        return
    kind = _difference(engine, llama, original)
    if kind is not None:
        tally.counts["differ"] += 1
        tally.keep(index, text, kind)
    elif all(ids is None for ids in original):
        tally.counts["not_applicable"] += 1
    else:
        tally.counts["agree"] += 1


def _difference(engine: list, llama: list, original: list) -> tuple | None:
    """None when the three agree on every pair compared; else the kind: which sides part under which pairs,
    and the two ids where llama.cpp and the other side first part."""
    pattern, first = [], None
    for ours, theirs, orig in zip(engine, llama, original, strict=True):
        marks = (ours != theirs, orig is not None and orig != theirs, orig is not None and orig != ours)
        pattern.append(marks)
        if first is None and any(marks):
            other = orig if marks[1] else ours
            at = next((i for i, (a, b) in enumerate(zip(theirs, other, strict=False)) if a != b),
                      min(len(theirs), len(other)))
            first = (theirs[at] if at < len(theirs) else None, other[at] if at < len(other) else None)
    return None if first is None else (tuple(pattern), first)


_STOPPED = object()  # llama.cpp was not asked: the sweep stopped after too many failed batches


def _llama_ids(session: OracleSession, texts: list[str], pairs: Pairs, tally: _Tally) -> list[Any]:
    """llama.cpp's ids under `pairs` for each text; None for a text it crashed or hung on (a batch that fails is
    halved until the text is found), `_STOPPED` once `MAX_FAILED_CALLS` batches failed."""
    if tally.failed_calls >= MAX_FAILED_CALLS:
        return [_STOPPED] * len(texts)
    try:
        reply = session.call("tokenize_many", texts, [list(pair) for pair in pairs])
    except (OracleCrash, OracleRefusal):
        tally.failed_calls += 1
        if len(texts) == 1:
            return [None]
        half = len(texts) // 2
        return _llama_ids(session, texts[:half], pairs, tally) + _llama_ids(session, texts[half:], pairs, tally)
    tally.llama_calls += int(reply["calls"])
    tally.llama_inside += float(reply["seconds"])
    return [[list(ids) for ids in row] for row in reply["ids"]]


def _original_ids(original: Any, batch: list[generators.Item], pairs: Pairs) -> list[Any]:
    """The original's ids under `pairs` for each input (None for a pair it cannot express), or its error: one
    `tokenize` request per batch to the reference child; a request the child fails is asked again case by
    case through the client (`evaluate_many`: restarts and flakes as for any case)."""
    request = {"op": "tokenize", "inputs": [_b64(text) for _, text in batch], "flags": [list(p) for p in pairs]}
    try:
        reply = original.call(request)
    except ChildFailure:
        reply = None
    results = reply.get("results") if isinstance(reply, dict) and reply.get("ok") else None
    if isinstance(results, list) and len(results) == len(batch):
        return [_reference_item(row, text, len(pairs), original) for row, (_, text) in zip(results, batch, strict=True)]
    outcomes = original.evaluate_many([{"id": str(index), "text": text} for index, text in batch])
    return [o if isinstance(o, EngineError) else _picked(outcome_ids(o), pairs) for o in outcomes]


def _reference_item(row: object, text: str, n: int, original: Any) -> Any:
    """One input's reply from the reference child: ids per pair (None where not applicable), or an EngineError."""
    if not isinstance(row, list) or len(row) != n:
        return EngineError(f"ProtocolError: expected {n} results for the input, got {str(row)[:200]}", "")
    out: list[list[int] | None] = []
    for item in row:
        error = item.get("error") if isinstance(item, dict) else item
        if isinstance(error, dict) and error.get("type") == specs.NOT_APPLICABLE_TYPE:
            out.append(None)
            continue
        ids = item.get("ids") if isinstance(item, dict) and "error" not in item else None
        bad = wire.ids_problem(ids, size=len(text.encode("utf-8")), n_tokens=getattr(original, "id_bound", None))
        if bad:
            return EngineError(f"ContractError: tokenize: {bad}" if ids is not None else str(error)[:300], "")
        out.append([int(i) for i in ids])  # type: ignore[union-attr]
    return out


def _picked(ids: Ids, pairs: Pairs) -> list[list[int] | None]:
    """Ids per flag pair (all four, or None) narrowed to `pairs`."""
    return [None if ids is None else ids[FLAG_PAIRS.index(pair)] for pair in pairs]


def _engine_ids(engine: Any, batch: list[generators.Item], pairs: Pairs) -> list[Any]:
    """The engine's ids under `pairs` for each input (None where it failed): ours through its batch call, any
    other through `evaluate_many`."""
    texts = [text for _, text in batch]
    fast = getattr(getattr(engine, "engine", None), "tokenize_batch", None)
    if callable(fast) and isinstance(engine, InProcessEngine):
        try:
            per_pair = [fast(texts, add_special=a, parse_special=p) for a, p in pairs]
            return [[[int(t) for t in per_pair[k][i]] for k in range(len(pairs))] for i in range(len(texts))]
        except (Exception, SystemExit):  # noqa: BLE001 - an input it refuses: asked one by one below
            pass
    outcomes = engine.evaluate_many([{"id": str(index), "text": text} for index, text in batch])
    return [None if outcome_ids(o) is None else _picked(outcome_ids(o), pairs) for o in outcomes]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def summary_line(model: str, name: str, block: dict) -> str:
    """One line for stderr and the notes."""
    if "not_run" in block:
        return f"{model}: sweep {name} not run ({block['not_run']})"
    per_call = block.get("llama_cpp_us_per_call")
    shown = f", llama.cpp {per_call:.1f} us per call" if per_call is not None else ""
    why = " (time budget)" if block.get("stopped") else ""
    return (f"{model}: sweep {name}: {block['inputs']:,} of {block['of']:,} inputs checked in {block['seconds']:.1f} s"
            f"{shown}: {block['agree']:,} agree, {block['differ']:,} differ ({block['cases']} judged as cases), "
            f"{block['not_applicable']:,} not applicable, {block['not_checked']:,} not checked{why}")


def attach(config: Any, result: Any) -> None:
    """The model's sweep blocks into `result.reference["sweeps"]`, one note line each."""
    plan: SweepPlan | None = getattr(config, "sweeps", None)
    blocks = plan.done.get(result.model) if plan is not None else None
    if not blocks:
        return
    result.reference["sweeps"] = {name: dict(block) for name, block in blocks.items()}
    result.notes += [summary_line(result.model, name, block) for name, block in blocks.items()]
