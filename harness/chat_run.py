"""The message-level check: every target, every case, ours against llama.cpp's.

`live()` asks the chat helper; `offline()` replays `golden/chat/`. Both return a
`ChatSummary`: cases checked and matched, the findings, llama.cpp's own crashes and
hangs, and how often llama.cpp's legacy C API (`llama_chat_apply_template`) disagrees
with its own Jinja path (the figure the README quotes).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import chat_golden
from .chat_cases import Case, Target, all_targets, cases, load_conversations, tokenizer_for
from .chat_diff import MATCH, ORACLE, describe, diff_html, diff_text, product_answer, verdict
from .chat_oracle import ChatAnswer, ChatOracle
from .chat_strategies import sample


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

    def add(self, target: Target, case: Case, expected: ChatAnswer, actual: ChatAnswer,
            reproduce: str | None = None) -> None:
        self.cases += 1
        v = verdict(expected, actual)
        if v == ORACLE:
            self.oracle_crashes.append(describe(target, case, expected, actual, reproduce))
        elif v == MATCH:
            self.matched += 1
        else:
            self.findings.append(describe(target, case, expected, actual, reproduce))
        if expected.status == "error":
            self.oracle_errors += 1
        if expected.legacy is not None and expected.status == "ok":
            self.legacy_recognised += 1
            self.legacy_differs += expected.legacy != expected.text

    @property
    def ok(self) -> bool:
        return not self.findings and not self.oracle_crashes

    def lines(self) -> list[str]:
        return [f"messages: {self.targets} templates, {self.cases} cases, {self.matched} match, "
                f"{len(self.findings)} differ, {len(self.oracle_crashes)} llama.cpp crash/hang "
                f"({self.oracle_errors} refused by llama.cpp's Jinja path) in {self.seconds:.0f} s",
                f"legacy llama_chat_apply_template: recognised {self.legacy_recognised} rendered cases, "
                f"differs from the Jinja path on {self.legacy_differs}"]


def select(names: Iterable[str] | None) -> list[Target]:
    targets = all_targets()
    if not names:
        return targets
    wanted = set(names)
    chosen = [t for t in targets if t.name in wanted or t.name.removeprefix("tmpl-") in wanted]
    missing = wanted - {t.name for t in chosen} - {t.name.removeprefix("tmpl-") for t in chosen}
    if missing:
        from .models import SetupError
        raise SetupError(f"unknown chat target(s) {sorted(missing)}; known: {', '.join(t.name for t in targets)}")
    return chosen


def live(targets: list[Target], oracle: ChatOracle, *, conversation: str | None = None, fuzz: int = 0,
         seed: int = 0, corpus: bool = True, log: Callable[[str], None] = print) -> ChatSummary:
    start = time.monotonic()
    convs = [c for c in load_conversations() if corpus and (conversation is None or c["id"] == conversation)]
    fuzzed = sample(fuzz, seed) if fuzz else []
    summary = ChatSummary(targets=len(targets))
    for target in targets:
        tok = tokenizer_for(target.model)
        before = len(summary.findings)
        fuzz_repro = f"python -m harness chat --target {target.name} --no-corpus --fuzz {fuzz} --seed {seed}"
        for case in [*cases(target, convs), *fuzzed]:
            expected = oracle.ask(chat_golden.oracle_request(target, case))
            repro = fuzz_repro if case.conversation.startswith("fuzz-") else None
            summary.add(target, case, expected, product_answer(tok, target, case), repro)
        log(f"  {target.name} ({target.model}): {len(summary.findings) - before} difference(s)")
    summary.seconds = time.monotonic() - start
    return summary


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


def write_report(summary: ChatSummary, out: Path) -> None:
    """messages.json and messages.html (the report's "messages" section) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    data = dict(summary.__dict__)
    (out / "messages.json").write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    from html import escape
    cards = []
    for f in summary.findings + summary.oracle_crashes:
        cards.append(f"<section class=card data-target='{escape(f['target'])}' data-verdict='{escape(f['verdict'])}'>"
                     f"<h3>{escape(f['target'])} <small>{escape(f['case'])} · {escape(f['verdict'])}</small></h3>"
                     f"{diff_html(f)}<pre>{escape(diff_text(f))}</pre></section>")
    body = "".join(cards) or "<p>No message-level differences.</p>"
    head = "".join(f"<p>{escape(line)}</p>" for line in summary.lines())
    (out / "messages.html").write_text(
        "<!doctype html><meta charset=utf-8><title>messages</title><style>del{background:#fdd}"
        "ins{background:#dfd}pre{white-space:pre-wrap}</style><h2>messages</h2>" + head + body, encoding="utf-8")


def run_messages(models: tuple[str, ...], report_dir: Path, *, fuzz: int, seed: int | None,
                 explicit: bool, log: Callable[[str], None] = print) -> bool | None:
    """`run --messages`: the chat templates of the selected models, live. None when skipped.

    By default (not `explicit`) it runs when the chat helper is already built, so that a
    plain `run` never starts a several-minute compile; `--messages` builds it if needed.
    """
    from . import chat_helper_build
    from .chat_cases import gguf_targets
    from .models import short_name
    targets = gguf_targets({short_name(m) for m in models})
    if not targets:
        return None
    if not explicit and not chat_helper_build.helper_path().is_file():
        log("messages: skipped (chat helper not built: python -m harness chat --build-helper)")
        return None
    with ChatOracle() as oracle:
        summary = live(targets, oracle, fuzz=fuzz, seed=seed or 0, log=lambda s: None)
    write_report(summary, report_dir)
    for line in summary.lines():
        log(line)
    log(f"messages: {report_dir / 'messages.html'}")
    return summary.ok
