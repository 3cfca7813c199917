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
``.hypothesis/`` folder (git-ignored); with ``$GGUF_PARITY_HYPOTHESIS_GITHUB``
set to ``OWNER/REPO`` (or ``OWNER/REPO/ARTIFACT``) it also replays, read-only,
the examples the nightly workflow shares as a GitHub Actions artifact
(Hypothesis's `GitHubArtifactDatabase`; needs ``$GITHUB_TOKEN``; see
docs/sharding.md for how the workflows upload it).

Judgements are memoised, and shrinking stops asking llama.cpp once
`shrink_budget` distinct inputs have been judged, so a hunt's cost is bounded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, find, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    GitHubArtifactDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)
from hypothesis.errors import HypothesisException, NoSuchExample
from hypothesis.strategies import SearchStrategy

from ..environment import project_root
from ..errors import SetupError
from . import strategies

PROFILE_ENV = "GGUF_PARITY_HYPOTHESIS_PROFILE"
DB_ENV = "GGUF_PARITY_HYPOTHESIS_DB"
GITHUB_ENV = "GGUF_PARITY_HYPOTHESIS_GITHUB"  # OWNER/REPO[/ARTIFACT]: the nightly's shared examples
GITHUB_ARTIFACT = "hypothesis-example-db"


# --- settings profiles and the example database ---------------------------------------------

def database_dir() -> Path:
    return Path(os.environ.get(DB_ENV) or project_root() / ".hypothesis" / "examples")


def example_database() -> ExampleDatabase:
    """The local database; with ``$GGUF_PARITY_HYPOTHESIS_GITHUB``, also the shared one, read-only.

    New failures are saved only locally: the nightly workflow uploads that folder
    as the next shared artifact, a pull request's run uploads nothing.
    """
    local = DirectoryBasedExampleDatabase(str(database_dir()))
    shared = shared_database(os.environ.get(GITHUB_ENV, ""))
    return local if shared is None else MultiplexedDatabase(local, shared)


def shared_database(spec: str) -> ReadOnlyDatabase | None:
    """`OWNER/REPO[/ARTIFACT]` as a read-only `GitHubArtifactDatabase`; None for ""; `SetupError` if malformed."""
    if not spec.strip():
        return None
    parts = spec.strip().split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise SetupError(f"${GITHUB_ENV}={spec!r}: expected OWNER/REPO or OWNER/REPO/ARTIFACT")
    artifact = parts[2] if len(parts) == 3 else GITHUB_ARTIFACT
    return ReadOnlyDatabase(GitHubArtifactDatabase(parts[0], parts[1], artifact_name=artifact))


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


def hunt(strategy: SearchStrategy[Any], judge: Callable[[dict], list], *, n: int, seed: int | None, key: str,
         shrink_budget: int = 150, on_example: Callable[[], None] | None = None, shrink: bool = True) -> Hunt:
    """Run the hunt; see the module docstring.

    With `shrink` false the first failing input is returned as found (a long document is
    shrunk by `harness.inputs.shrink` instead, a window at a time).

    Hypothesis' public `find` does the search and the shrinking; `database_key`
    names this model's entries in the example database.
    """
    memo: dict[str, list] = {}
    state = {"generated": 0, "failed": False}

    def fails(value: Any) -> bool:
        case = strategies.as_case(value)
        if case["id"] not in memo:
            if state["failed"] and len(memo) >= n + shrink_budget:
                return False  # budget spent: unseen shrink candidates count as passing
            memo[case["id"]] = judge(case)
            if not state["failed"]:
                state["generated"] += 1
                if on_example:
                    on_example()
        if memo[case["id"]]:
            state["failed"] = True
        return bool(memo[case["id"]])

    try:
        value = find(strategy, fails, settings=_settings(n, seed, shrink=shrink),
                     random=None if seed is None else _SeedAsIs(seed),
                     database_key=None if seed is not None else f"gguf-parity:{key}".encode())
    except NoSuchExample:
        return Hunt(state["generated"], None, [])
    except HypothesisException as exc:  # e.g. Unsatisfiable: report nothing found, say why
        return Hunt(state["generated"], None, [("note", str(exc))])
    case = strategies.as_case(value)
    return Hunt(state["generated"], case, memo[case["id"]])


class _SeedAsIs(Random):
    """`find(random=...)` seeds its run with one `getrandbits(64)` draw; this one returns `seed`
    itself, so `--seed N` runs exactly what `hypothesis.seed(N)` ran before (same inputs)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self._seed = seed

    def getrandbits(self, k: int, /) -> int:
        return self._seed % (1 << k)


def _settings(n: int, seed: int | None, *, shrink: bool = True) -> settings:
    """Up to `n` examples, quiet, no deadline; with a `seed`, no example database (it would change what runs)."""
    database = None if seed is not None else example_database()
    phases = [Phase.generate] if seed is not None else [Phase.reuse, Phase.generate]
    phases += [Phase.shrink] if shrink else []
    return settings(max_examples=max(n, 1), database=database, deadline=None, phases=phases,
                    verbosity=Verbosity.quiet, derandomize=False)
