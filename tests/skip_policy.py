"""Which skips the test suite allows, and the end-of-run line that counts them by group.

`nox -s tests` (`./quickstart.sh tests`) builds everything its tests need: the
shipped vocabularies (`harness fetch`), the synthetic ones (`harness synth`) and
the chat helper (`harness chat --build-helper`). A test that skips for one of
those is a test that silently did not run, so under the session (which sets
`GGUF_PARITY_STRICT_SKIPS=1`) such a skip fails the run. Only the optional
extras in `ALLOWED` may skip. A plain `pytest` on a half-set-up machine still
passes, and its last lines say what was skipped and what to build.

Every skip reason in tests/ and conftest.py is one of these:

- allowed (`ALLOWED`): the `nightly` marker; an optional peer that is not
  installed (transformers/torch, the `peers` extra; another llama.cpp release's
  venv, `llama.cpp@VERSION`; Node.js for the Node reference child, and npm for
  `node-llama-cpp@VERSION`); chromium
  for the browser test (the session installs it only as root with apt); a
  platform without /proc.
- planned, so failing under the session (`PLANNED`, for the message): a
  vocabulary not fetched, a synthetic vocabulary not built, the chat helper not
  built, llama-cpp-python not installed.
- anything else (a missing golden, a test extra not installed, no g++, a module
  that does not import, ...) is unplanned too, and is shown with its own reason.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field

import pytest

STRICT_ENV = "GGUF_PARITY_STRICT_SKIPS"

ALLOWED: dict[str, re.Pattern[str]] = {
    "nightly": re.compile(r"^nightly test: run with --nightly"),
    "optional peer": re.compile(r"could not import '(transformers|torch)'"
                                r"|^llama-cpp-python \S+ venv not built"
                                r"|^node is not installed|^npm is not installed"),
    "no chromium": re.compile(r"^chromium is not installed"),
    "no /proc": re.compile(r"^reads /proc$"),
}
"""Skip groups allowed under the session: the documented optional extras, by reason (regex)."""

PLANNED: dict[str, re.Pattern[str]] = {
    "synthetic vocabulary not built (python -m harness synth)": re.compile(r"harness synth"),
    "chat helper not built (python -m harness chat --build-helper)": re.compile(r"--build-helper"),
    "vocabulary not fetched (python -m harness fetch)": re.compile(r"harness fetch"),
    "llama-cpp-python not installed": re.compile(r"llama-cpp-python is not installed"
                                                 r"|could not import 'harness\.oracle\.(llama|session)'"),
}
"""Skips for what the tests session builds itself: each one fails the session."""


def reason_of(report: pytest.TestReport | pytest.CollectReport) -> str:
    """A skipped report's reason, without pytest's "Skipped: " prefix."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def group_of(reason: str) -> tuple[str, bool]:
    """(group name, allowed) for a skip reason."""
    for name, pattern in ALLOWED.items():
        if pattern.search(reason):
            return name, True
    for name, pattern in PLANNED.items():
        if pattern.search(reason):
            return name, False
    return reason, False


@dataclass
class Skips:
    """The run's skips: group -> count, and the unplanned ones' test ids."""

    counts: Counter[str] = field(default_factory=Counter)
    allowed: dict[str, bool] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, nodeid: str, reason: str) -> None:
        group, allowed = group_of(reason)
        self.counts[group] += 1
        self.allowed[group] = allowed
        self.examples.setdefault(group, []).append(nodeid)

    def ranked(self) -> list[tuple[str, int]]:
        """Groups by count, largest first, ties by name: the same order however the reports arrived (xdist)."""
        return sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))

    @property
    def unplanned(self) -> int:
        return sum(n for group, n in self.counts.items() if not self.allowed[group])

    def summary(self) -> str:
        """`skipped: 260 nightly, 2 optional peer, 5 UNPLANNED` (allowed groups first)."""
        parts = [f"{n} {g}" for g, n in self.ranked() if self.allowed[g]]
        if self.unplanned:
            parts.append(f"{self.unplanned} UNPLANNED")
        return "skipped: " + (", ".join(parts) if parts else "none")

    def unplanned_lines(self) -> list[str]:
        lines = []
        for group, n in self.ranked():
            if not self.allowed[group]:
                first = self.examples[group]
                more = f" and {len(first) - 2} more" if len(first) > 2 else ""
                lines.append(f"unplanned skip: {n} x {group} [{', '.join(first[:2])}{more}]")
        return lines


WORKER_KEY = "gguf_parity_collect_skips"
"""Where an xdist worker hands its module-level skips to the controller (`config.workeroutput`)."""


class SkipPolicy:
    """The plugin: records every skip, prints the groups at the end, fails a strict run on an unplanned one.

    Under pytest-xdist every worker collects every module, and the controller is
    forwarded only one collect report per distinct skip text, so two modules
    skipped by the same helper line would count once. So a module-level skip is
    kept by node id: each worker hands its own over at the end
    (`config.workeroutput`), and the controller counts each module once, as a
    serial run does. Test skips reach the controller once each in any case.
    """

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.skips = Skips()
        self.module_skips: dict[str, str] = {}   # node id -> reason, counted once at the end

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skips.add(report.nodeid, reason_of(report))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:
            self.module_skips.setdefault(report.nodeid, reason_of(report))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """xdist controller: a worker's module-level skips (pytest-xdist's hook)."""
        for nodeid, reason in getattr(node, "workeroutput", {}).get(WORKER_KEY, {}).items():
            self.module_skips.setdefault(nodeid, reason)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:   # an xdist worker: the controller counts and judges
            workeroutput[WORKER_KEY] = dict(self.module_skips)
            return
        for nodeid, reason in sorted(self.module_skips.items()):
            self.skips.add(nodeid, reason)
        self.module_skips.clear()
        if self.strict and self.skips.unplanned and session.exitstatus in (
                pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        skips = self.skips
        if not skips.counts:
            return
        for line in skips.unplanned_lines():
            terminalreporter.write_line(line, red=self.strict, yellow=not self.strict)
        terminalreporter.write_line(skips.summary())
        if skips.unplanned:
            tail = (f"`nox -s tests` sets up what they need, so the run fails ({STRICT_ENV}=1; "
                    "allowed skips: tests/skip_policy.py)" if self.strict
                    else "build what they name, or run `./quickstart.sh tests`, which does")
            terminalreporter.write_line(f"{skips.unplanned} unplanned skip(s): {tail}",
                                        red=self.strict, yellow=not self.strict)


def pytest_configure(config: pytest.Config) -> None:
    """Loaded with `pytest_plugins = ["tests.skip_policy"]` (conftest.py); strict when the env var is 1."""
    config.pluginmanager.register(SkipPolicy(strict=os.environ.get(STRICT_ENV) == "1"), "gguf-parity-skips")
