"""Hypothesis as a bug hunter: generate inputs, judge each live, shrink the first failure.

`hunt(strategy, judge, n=..., seed=..., key=...)` runs up to `n` examples of
`strategy`; `judge(case)` returns the findings for one input (empty when it
passes). The first failing input is shrunk by Hypothesis to a minimal one,
and `Hunt` carries that minimal case, its findings, and how many examples
were generated before the first failure.

With a `seed` the hunt is reproducible and the example database is not used
(a stored example would change what runs); without one, failures are saved
to and replayed from the project's `.hypothesis/` database, keyed per model.
Settings profiles: `ci` (small, fast), `nightly` (large) and `dev`; the
profile named by ``$GGUF_PARITY_HYPOTHESIS_PROFILE`` is loaded by
`load_profile()` (default `ci`). The example database lives in the project's
``.hypothesis/`` folder (git-ignored).

Judgements are memoised, and shrinking stops asking llama.cpp once
`shrink_budget` distinct inputs have been judged, so a hunt's cost is bounded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import HypothesisException

from . import models, strategies

PROFILE_ENV = "GGUF_PARITY_HYPOTHESIS_PROFILE"
DB_ENV = "GGUF_PARITY_HYPOTHESIS_DB"


# --- settings profiles and the example database ---------------------------------------------

def database_dir() -> Path:
    return Path(os.environ.get(DB_ENV) or models.project_root() / ".hypothesis" / "examples")


def example_database() -> DirectoryBasedExampleDatabase:
    return DirectoryBasedExampleDatabase(str(database_dir()))


def _register_profiles() -> None:
    common = settings(deadline=None, print_blob=True,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                             HealthCheck.filter_too_much])
    settings.register_profile("ci", common, max_examples=25)
    settings.register_profile("dev", common, max_examples=200)
    settings.register_profile("nightly", common, max_examples=3000)


_register_profiles()


def load_profile(name: str | None = None) -> str:
    """Load `name`, else ``$GGUF_PARITY_HYPOTHESIS_PROFILE``, else `ci`; returns the name loaded."""
    name = name or os.environ.get(PROFILE_ENV) or "ci"
    settings.load_profile(name)
    return name


@dataclass(frozen=True)
class Hunt:
    """The outcome: examples generated, and the minimal failing case with its findings (or None)."""

    generated: int
    case: dict | None
    findings: list


class _Failure(Exception):
    def __init__(self, case: dict) -> None:
        super().__init__(case["id"])
        self.case = case


def hunt(strategy, judge: Callable[[dict], list], *, n: int, seed: int | None, key: str,
         shrink_budget: int = 150, on_example: Callable[[], None] | None = None) -> Hunt:
    """Run the hunt; see the module docstring."""
    memo: dict[str, list] = {}
    state = {"generated": 0, "failed": False}

    def failing(value) -> dict | None:
        case = strategies.as_case(value)
        if case["id"] not in memo:
            if state["failed"] and len(memo) >= n + shrink_budget:
                return None  # budget spent: unseen shrink candidates count as passing
            memo[case["id"]] = judge(case)
            if not state["failed"]:
                state["generated"] += 1
                if on_example:
                    on_example()
        if memo[case["id"]]:
            state["failed"] = True
            return case
        return None

    def probe(value) -> None:
        case = failing(value)
        if case is not None:
            raise _Failure(case)

    test = _wrap(probe, strategy, n=n, seed=seed, key=key)
    try:
        test()
    except _Failure as failure:
        return Hunt(state["generated"], failure.case, memo[failure.case["id"]])
    except HypothesisException as exc:  # e.g. Unsatisfiable: report nothing found, say why
        return Hunt(state["generated"], None, [("note", str(exc))])
    return Hunt(state["generated"], None, [])


def _wrap(probe, strategy, *, n: int, seed: int | None, key: str):
    database = None if seed is not None else example_database()
    phases = [Phase.generate, Phase.shrink] if seed is not None else [Phase.reuse, Phase.generate, Phase.shrink]
    test = settings(max_examples=max(n, 1), database=database, deadline=None, phases=phases,
                    verbosity=Verbosity.quiet, report_multiple_bugs=False, derandomize=False,
                    suppress_health_check=list(HealthCheck))(given(strategy)(probe))
    test.hypothesis.inner_test._hypothesis_internal_add_digest = f"gguf-parity:{key}".encode()
    return hypothesis_seed(seed)(test) if seed is not None else test
