"""The message-level check: every target, every case, ours against llama.cpp's.

`live()` asks the chat helper; `offline()` replays `golden/chat/`. Both return a
`ChatSummary`: cases checked and matched, the findings, llama.cpp's own crashes and
hangs, and how often llama.cpp's legacy C API (`llama_chat_apply_template`) disagrees
with its own Jinja path (the figure the README quotes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EXIT_FOUND, EXIT_OK, EXIT_USAGE
from . import golden as chat_golden
from .bounds import NOT_ASKED, OVER_BUDGET, Bounds, not_asked, our_answer
from .cases import Case, Target, all_targets, cases, load_conversations, tokenizer_for
from .diff import MATCH, ORACLE, describe, product_answer, verdict
from .oracle import ChatAnswer, ChatOracle
from .strategies import sample


@dataclass
class ChatSummary:
    targets: int = 0
    cases: int = 0
    matched: int = 0
    oracle_errors: int = 0  # cases llama.cpp refuses (raise_exception or a failure): matched when we refuse too
    oracle_crashes: list[dict[str, Any]] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    legacy_recognised: int = 0
    legacy_differs: int = 0
    seconds: float = 0.0
    shard: dict[str, Any] | None = None  # `chat --shard K/N`: the partition's record (`harness.runs.shard`)
    not_asked: dict[str, int] = field(default_factory=dict)  # why -> cases never asked (`harness.chat.bounds`)
    deadline_passed: bool = False
    interrupted: str | None = None  # the signal that stopped the check: the counts are of what finished

    def add(self, target: Target, case: Case, expected: ChatAnswer, actual: ChatAnswer,
            reproduce: str | None = None) -> None:
        if NOT_ASKED in (expected.status, actual.status):  # never a match, never a finding of its own
            why = expected.error if expected.status == NOT_ASKED else actual.error
            self.not_asked[why] = self.not_asked.get(why, 0) + 1
            return
        self.cases += 1
        v = verdict(expected, actual)
        if v == ORACLE:
            self.oracle_crashes.append(describe(target, case, expected, actual, reproduce))
        elif v == MATCH:
            self.matched += 1
        else:
            finding = describe(target, case, expected, actual, reproduce)
            if actual.status == OVER_BUDGET:  # a bomb on our side: never "both refuse"
                finding["verdict"] = OVER_BUDGET
            self.findings.append(finding)
        if expected.status == "error":
            self.oracle_errors += 1
        if expected.legacy is not None and expected.status == "ok":
            self.legacy_recognised += 1
            self.legacy_differs += expected.legacy != expected.text

    def data(self) -> dict[str, Any]:
        """Plain data, as messages.json and a report's "messages" key hold it."""
        return dict(self.__dict__)

    @property
    def ok(self) -> bool:
        return not self.findings and not self.oracle_crashes

    def exit_status(self) -> int:
        """1 on a finding; 2 when cases were left unchecked (the deadline) with no finding to say why; else 0."""
        if self.deadline_passed or (self.ok and self.not_asked):
            return EXIT_USAGE
        return EXIT_OK if self.ok else EXIT_FOUND

    def lines(self) -> list[str]:
        """The summary lines; a `--shard` part names itself, so it never reads as the whole check."""
        head = "messages"
        if self.shard:
            head = (f"messages, shard {self.shard['index']}/{self.shard['count']} "
                    f"({self.shard['owned_units']} of {self.shard['units']} templates)")
        if self.interrupted:
            head = f"{head}, interrupted by {self.interrupted} (partial)"
        lines = [f"{head}: {self.targets} templates, {self.cases} cases, {self.matched} match, "
                 f"{len(self.findings)} differ, {len(self.oracle_crashes)} llama.cpp crash/hang "
                 f"({self.oracle_errors} refused by llama.cpp's Jinja path) in {self.seconds:.0f} s",
                 f"legacy llama_chat_apply_template: recognised {self.legacy_recognised} rendered cases, "
                 f"differs from the Jinja path on {self.legacy_differs}"]
        return lines + [f"not asked: {n} case(s): {why}" for why, n in self.not_asked.items()]


COUNTS = ("targets", "cases", "matched", "oracle_errors", "legacy_recognised", "legacy_differs", "seconds")


def merge(parts: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """Several messages.json (complete `--shard` parts in shard order give the unsharded one): counts
    added, findings, crashes and three-way blocks joined in order; the merged data and its lines."""
    summary = ChatSummary()
    for part in parts:
        for key in COUNTS:
            setattr(summary, key, getattr(summary, key) + part[key])
        summary.findings += part["findings"]
        summary.oracle_crashes += part["oracle_crashes"]
        for why, n in (part.get("not_asked") or {}).items():  # never asked in a part: never asked in the whole
            summary.not_asked[why] = summary.not_asked.get(why, 0) + n
        summary.deadline_passed = summary.deadline_passed or bool(part.get("deadline_passed"))
        summary.interrupted = summary.interrupted or part.get("interrupted")
    blocks = [block for part in parts for block in part.get("three_way") or []]
    data = {**summary.data(), "three_way": blocks}
    return data, summary.lines() + [line for block in blocks for line in block.get("lines", [])]


def select(names: Iterable[str] | None) -> list[Target]:
    targets = all_targets()
    if not names:
        return targets
    wanted = set(names)
    chosen = [t for t in targets if t.name in wanted or t.name.removeprefix("tmpl-") in wanted]
    missing = wanted - {t.name for t in chosen} - {t.name.removeprefix("tmpl-") for t in chosen}
    if missing:
        from ..errors import SetupError
        raise SetupError(f"unknown chat target(s) {sorted(missing)}; known: {', '.join(t.name for t in targets)}")
    return chosen


def live(targets: list[Target], oracle: ChatOracle, *, conversation: str | None = None, fuzz: int = 0,
         seed: int = 0, corpus: bool = True, log: Callable[[str], None] = print,
         summary: ChatSummary | None = None, bounds: Bounds | None = None,
         carry: Callable[[Target, list[Case]], list[Case]] | None = None) -> ChatSummary:
    """Every case of every target, ours against llama.cpp's helper, into `summary` (filled as it goes,
    so an interrupted check keeps what finished) under `bounds` (a deadline, a template that hangs
    asked no more: `harness.chat.bounds`). `carry` (`--baseline`: `harness.chat.baseline.ChatCarry`)
    adds a baseline's conversations to each target's cases."""
    start = time.monotonic()
    bounds = bounds or Bounds()
    convs = [c for c in load_conversations() if corpus and (conversation is None or c["id"] == conversation)]
    fuzzed = [c for c in (sample(fuzz, seed) if fuzz else []) if conversation in (None, c.conversation)]
    summary = summary if summary is not None else ChatSummary()
    summary.targets += len(targets)
    try:
        for target in targets:
            before = len(summary.findings)
            todo = [*cases(target, convs), *fuzzed]
            _live_target(target, oracle, summary, bounds, carry(target, todo) if carry else todo, fuzzed,
                         f"python -m harness chat {target.selector} --no-corpus --fuzz {fuzz} --seed {seed}")
            log(f"  {target.name} ({target.model}): {len(summary.findings) - before} difference(s)")
    finally:
        summary.seconds += time.monotonic() - start
        summary.deadline_passed = summary.deadline_passed or bounds.passed
    return summary


def _live_target(target: Target, oracle: ChatOracle, summary: ChatSummary, bounds: Bounds, todo: list[Case],
                 fuzzed: list[Case], fuzz_repro: str) -> None:
    """One target's cases: llama.cpp's helper, then ours, each case judged as it comes."""
    tok = tokenizer_for(target.model)
    for case in todo:
        why = bounds.why_not(target.name)
        if why is not None:
            summary.add(target, case, not_asked(why), not_asked(why))
            continue
        expected = oracle.ask(chat_golden.oracle_request(target, case))
        bounds.note(target.name, "llama.cpp", case.key, expected)
        actual = our_answer(product_answer(tok, target, case)) if expected.status != "hang" else ChatAnswer(
            "not rendered", error="llama.cpp's helper hung on this case, so ours was not rendered")
        bounds.note(target.name, "ours", case.key, actual)
        repro = f"{fuzz_repro} --conversation {case.conversation}" if case in fuzzed else None
        summary.add(target, case, expected, actual, repro)


def offline(targets: list[Target], golden_dir: Path = chat_golden.GOLDEN_DIR) -> ChatSummary:
    start = time.monotonic()
    summary = ChatSummary()
    for target in targets:
        path = chat_golden.golden_path(target, golden_dir)
        if not path.is_file():
            continue
        summary.targets += 1
        data = chat_golden.load(path)
        checked, findings = chat_golden.replay(target, data)
        summary.cases += checked
        summary.matched += checked - len(findings)
        summary.findings += findings
        for entry in data["cases"]:
            summary.oracle_errors += entry["status"] == "error"
            if entry["status"] == "ok" and entry.get("legacy") is not None:
                summary.legacy_recognised += 1
                summary.legacy_differs += entry["legacy"] != entry.get("text")
    summary.seconds = time.monotonic() - start
    return summary


def write_report(summary: ChatSummary, out: Path, three_way: Sequence[Any] = ()) -> Path:
    """messages.json and messages.html in `out`; the page's path. `three_way`: `ThreeWay` results."""
    from ..report.messages import write
    data, lines = with_three_way(summary, list(three_way))
    return write(data, lines, out)


def with_three_way(summary: ChatSummary, blocks: list[Any]) -> tuple[dict[str, Any], list[str]]:
    """The summary's data and lines with the three-way blocks (`harness.chat.three_way.ThreeWay`) added."""
    data = {**summary.data(), "three_way": [{**b.data(), "lines": b.lines()} for b in blocks]}
    return data, summary.lines() + [line for b in blocks for line in b.lines()]


def original_folder(reference: str | None) -> Path | None:
    """The original's folder of an `hf:` reference (the only kind that carries a chat template), or None."""
    if not reference or not reference.startswith("hf:"):
        return None
    from .original import folder_of
    return folder_of(reference)


def run_messages(models: tuple[str, ...], report_dir: Path, *, fuzz: int, seed: int | None,
                 explicit: bool, reference: str | None = None, log: Callable[[str], None] = print,
                 carry: Callable[[Target, list[Case]], list[Case]] | None = None) -> tuple[dict, bool] | None:
    """`run --messages`: the chat templates of the selected models, live. None when skipped.

    Writes messages.json and messages.html in `report_dir`; gives the report's "messages"
    section and whether every message agreed, for `harness.runs.finish.run_and_report` to put
    into report.json and report.html when it writes them (once).

    With an `hf:` `reference`, each GGUF file among `models` is checked three ways against the
    original folder (`harness.chat.three_way`): its templates, and every conversation rendered by
    transformers, llama.cpp and us; our side against llama.cpp's counts as in the two-way check.

    By default (not `explicit`) it runs when the chat helper is already built, so that a
    plain `run` never starts a several-minute compile; `--messages` builds it if needed.
    """
    from ..models.shipped import short_name
    from . import helper_build as chat_helper_build
    from .cases import gguf_targets
    targets = gguf_targets({short_name(m) for m in models})
    folder = original_folder(reference)
    files = [Path(m) for m in models if folder is not None and Path(m).is_file()]
    if not targets and not files:
        return None
    if not explicit and not chat_helper_build.helper_path().is_file():
        log("messages: skipped (chat helper not built: python -m harness chat --build-helper)")
        return None
    bounds = Bounds()
    with ChatOracle() as oracle:
        summary = live(targets, oracle, fuzz=fuzz, seed=seed or 0, log=lambda s: None, bounds=bounds, carry=carry)
        blocks = three_ways(files, folder, oracle, summary, fuzz=fuzz, seed=seed or 0, log=log, bounds=bounds)
    write_report(summary, report_dir, blocks)
    data, lines = with_three_way(summary, blocks)
    for line in lines:
        log(line)
    log(f"messages: {report_dir / 'report.html'}#messages (and messages.json, messages.html)")
    return {**data, "lines": lines}, summary.exit_status() == EXIT_OK and all(b.ok for b in blocks)


def three_ways(files: list[Path], folder: Path | None, oracle: ChatOracle, summary: ChatSummary, *,
               fuzz: int, seed: int, log: Callable[[str], None] = print, bounds: Bounds | None = None,
               blocks: list[Any] | None = None, timeout: float | None = None) -> list[Any]:
    """The three-way check of each GGUF in `files` against `folder` (none without transformers: said why),
    each block appended to `blocks` as it starts (an interrupted check keeps what finished)."""
    blocks = [] if blocks is None else blocks
    if folder is None or not files:
        return blocks
    from . import three_way
    from .transformers_side import missing
    reason = missing()
    if reason:
        log(f"messages three ways: not checked ({reason})")
        return blocks
    bounds = bounds or Bounds()
    for gguf in files:
        start = time.monotonic()
        try:
            block = three_way.check(gguf, folder, fuzz=fuzz, seed=seed, oracle=oracle, on_case=summary.add,
                                    log=lambda s: None, bounds=bounds, blocks=blocks,
                                    **({"timeout": timeout} if timeout else {}))
            summary.targets += len(block.checked)
        finally:
            summary.seconds += time.monotonic() - start
            summary.deadline_passed = summary.deadline_passed or bounds.passed
    return blocks
