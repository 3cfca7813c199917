"""Hypothesis as a bug hunter: generate inputs, judge each live, shrink the first input of each new difference.

`hunt(strategy, judge, n=..., seed=..., key=...)` generates `n` distinct inputs of `strategy`, each
judged once by `judge(case)` (its findings, `(kind, entry)`; empty when it passes). Each finding shows
a difference signature (`harness.compare.signature`: the entry's `signature`). The hunt runs in rounds,
each one Hypothesis search (as `hypothesis.find`, `_find`) whose predicate is "this input shows a
signature not seen yet": the first input of a new signature ends the round's generation, Hypothesis
shrinks it to a minimal input still showing each of its new signatures, and that input is a `Found`
(its signatures are seen from then on); the next round goes on generating. An input whose findings
only repeat signatures already seen passes the predicate: it is judged, counted and handed to
`on_example` with its findings (the caller records them), never shrunk. So the hunt spends its whole
budget whatever it finds, and `Hunt` carries how many inputs were generated, how many failed, and each
difference found with its minimal input.

A seeded hunt is reproducible: round 0 runs with `seed` itself (as `hypothesis.seed(N)`), round k with
a seed derived from it (`round_seed`). With `database` (default: when unseeded) each round first
replays its own entries of the example database (Hypothesis's reuse phase: round 0 under the key hunts
have always used, `gguf-parity:<key>`, round k under `gguf-parity:<key>:<k>`) and saves what it shrinks
there: an entry that no longer fails, or whose difference an earlier round found already, is deleted by
Hypothesis. Settings profiles: `ci` (small, fast), `nightly` (large) and `dev`; the profile named by
``$GGUF_PARITY_HYPOTHESIS_PROFILE`` is loaded by `load_profile()` (default `ci`). The example database
lives in the project's ``.hypothesis/`` folder (git-ignored); with ``$GGUF_PARITY_HYPOTHESIS_GITHUB``
set to ``OWNER/REPO`` (or ``OWNER/REPO/ARTIFACT``) it also replays, read-only, the examples the
nightly workflow shares as a GitHub Actions artifact (Hypothesis's `GitHubArtifactDatabase`; needs
``$GITHUB_TOKEN``; see docs/sharding.md for how the workflows upload it).

The cost is bounded: every input is judged once (memoised by its case id), the budget counts distinct
generated inputs, a shrink judges at most `shrink_budget` new inputs, and a hunt at most `shrink_total`
in all (after that, new differences are kept as generated, not shrunk).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
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
from ..environment_vars import HYPOTHESIS_DB, HYPOTHESIS_GITHUB, HYPOTHESIS_PROFILE, github_artifact
from ..errors import SetupError
from . import strategies

PROFILE_ENV = HYPOTHESIS_PROFILE.name
DB_ENV = HYPOTHESIS_DB.name
GITHUB_ENV = HYPOTHESIS_GITHUB.name  # OWNER/REPO[/ARTIFACT]: the nightly's shared examples
GITHUB_ARTIFACT = "hypothesis-example-db"
SHRINK_BUDGET = 150   # new inputs judged while shrinking one difference, at most
SHRINK_TOTAL = 1200   # new inputs judged while shrinking, in one hunt, at most
ROUND_SLACK = 10      # examples a round may run past its budget (inputs generated again cost nothing)


# --- settings profiles and the example database ---------------------------------------------

def database_dir() -> Path:
    return HYPOTHESIS_DB.get() or project_root() / ".hypothesis" / "examples"


def example_database(directory: Path | None = None) -> ExampleDatabase:
    """The local database (in `directory`, else `database_dir()`); with ``$GGUF_PARITY_HYPOTHESIS_GITHUB``,
    also the shared one, read-only.

    New failures are saved only locally: the nightly workflow uploads that folder
    as the next shared artifact, a pull request's run uploads nothing.
    """
    local = DirectoryBasedExampleDatabase(str(directory or database_dir()))
    shared = shared_database(HYPOTHESIS_GITHUB.get() or "")
    return local if shared is None else MultiplexedDatabase(local, shared)


def shared_database(spec: str) -> ReadOnlyDatabase | None:
    """`OWNER/REPO[/ARTIFACT]` as a read-only `GitHubArtifactDatabase`; None for ""; `SetupError` if malformed."""
    if not spec.strip():
        return None
    try:
        parts = github_artifact(spec).split("/")
    except ValueError as exc:
        raise SetupError(f"${GITHUB_ENV}={spec!r}: {exc}") from None
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
    name = name or HYPOTHESIS_PROFILE.get() or "ci"
    settings.load_profile(name)
    return name


@dataclass(frozen=True)
class Found:
    """One new difference: the input that shows it (minimal when shrunk), its findings, the signatures it was
    the first to show (`new`), how many inputs had been generated when it was found, and whether it was shrunk."""

    case: dict
    findings: list
    new: tuple[str, ...]
    after: int
    shrunk: bool


@dataclass(frozen=True)
class Hunt:
    """The outcome: inputs generated (the budget spent), how many failed, each new difference found, and
    why Hypothesis stopped early, if it did (`notes`)."""

    generated: int
    failing: int = 0
    found: tuple[Found, ...] = ()
    notes: tuple[str, ...] = ()


def finding_signature(finding: Any) -> str:
    """The signature a finding `(kind, entry)` shows: the entry's `signature`, else the finding itself."""
    kind, entry = finding
    return str(entry["signature"]) if isinstance(entry, dict) and entry.get("signature") else f"{kind}:{entry}"


def hunt(strategy: SearchStrategy[Any], judge: Callable[[dict], list], *, n: int, seed: int | None, key: str,
         database: bool | None = None, database_dir: Path | None = None, shrink: bool = True,
         shrink_budget: int = SHRINK_BUDGET, shrink_total: int = SHRINK_TOTAL, known: Iterable[str] = (),
         prefix: str = "fuzz", on_example: Callable[[dict, list], None] | None = None,
         on_found: Callable[[Found], None] | None = None) -> Hunt:
    """Generate `n` distinct inputs, each judged once; see the module docstring.

    `on_example(case, findings)` is called for each generated input once judged, `on_found(found)` for each
    new difference once shrunk (`shrink` false: as generated; a long document is shrunk by
    `harness.inputs.shrink` instead). `known` signatures count as seen already. `database` (default: when
    unseeded) replays and saves failures in the example database, under `key` (one key per round: `_key`):
    the one in `database_dir`, else the project's (`example_database`).
    """
    search = _Search(judge, n, known=known, shrink_budget=shrink_budget, prefix=prefix, on_example=on_example)
    found: list[Found] = []
    notes: list[str] = []
    use_database = seed is None if database is None else database
    for index in range(2 * n + 64):  # each round generates or finds something, else it is the last
        if search.generated >= n:
            break
        before = (search.generated, len(found))
        search.start_round()
        shrinking = shrink and search.shrunk_total < shrink_total
        try:
            value = _find(strategy, search.fails, _settings(n - search.generated, database=use_database,
                                                            directory=database_dir, shrink=shrinking,
                                                            key=_key(key, index)),
                          seed=None if seed is None else round_seed(seed, index))
        except (NoSuchExample, _BudgetSpent):
            value = None
        except HypothesisException as exc:  # e.g. Unsatisfiable: nothing more to find; say why
            notes.append(str(exc))
            break
        if value is not None:
            found.append(search.conclude(value, shrunk=shrinking))
            if on_found:
                on_found(found[-1])
        if (search.generated, len(found)) == before:
            break  # Hypothesis generated no input it had not generated before
    for late in search.unfound():  # seen in a generated input, never the first of a shrunk one: as generated
        found.append(late)
        if on_found:
            on_found(late)
    return Hunt(search.generated, search.failing, tuple(found), tuple(notes))


def round_seed(seed: int, index: int) -> int:
    """Round `index`'s seed: `seed` itself first (so `--seed N` starts as `hypothesis.seed(N)` does), then
    derived from it, so a seeded hunt is the same hunt every time."""
    if index == 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}:{index}".encode()).digest()[:8], "big")


def _key(key: str, index: int) -> bytes:
    """Round `index`'s entries in the example database: round 0 keeps the key hunts have always used."""
    return f"gguf-parity:{key}".encode() if index == 0 else f"gguf-parity:{key}:{index}".encode()


class _BudgetSpent(BaseException):
    """Ends a round from inside its predicate once the budget is spent. A predicate answering False instead
    would make Hypothesis delete every database entry it replays after that as no longer failing; a
    `BaseException` is not a test failure to Hypothesis (it passes through `find`, as KeyboardInterrupt does)."""


class _Search:
    """The state of one hunt across its rounds: every input judged once (memo of its findings), the
    generated count, the shrink budgets, and the signatures done (shown by a found input, or known)."""

    def __init__(self, judge: Callable[[dict], list], n: int, *, known: Iterable[str], shrink_budget: int,
                 prefix: str, on_example: Callable[[dict, list], None] | None) -> None:
        self.judge, self.n, self.prefix, self.on_example = judge, n, prefix, on_example
        self.shrink_budget = shrink_budget
        self.done: set[str] = set(known)
        self.memo: dict[str, list] = {}  # case id -> its findings: every input is judged once
        self.first: dict[str, tuple[dict, list, int]] = {}  # a signature not done: its first generated input
        self.generated = self.failing = self.shrunk_total = 0
        self.target: frozenset[str] | None = None  # the new signatures of the round's first hit, once found
        self.round_shrunk = 0

    def start_round(self) -> None:
        self.target, self.round_shrunk = None, 0

    def fails(self, value: Any) -> bool:
        """The predicate of a round: `value` shows a signature not done yet. That input's new signatures
        are the round's target: every later call is a shrink step (judged within the round's budget,
        unjudged: passing), accepted when it shows every signature of the target, so the minimal input
        still shows each difference the first one did."""
        case = strategies.as_case(value, prefix=self.prefix)
        findings = self.memo.get(case["id"])
        if findings is None:
            findings = self._generate(case) if self.target is None else self._shrink_step(case)
            if findings is None:
                return False  # the shrink budget spent: an unseen input counts as passing, unjudged
            self.memo[case["id"]] = findings
        sigs = {finding_signature(f) for f in findings}
        if self.target is None:
            self.target = frozenset(sigs - self.done) or None
            return self.target is not None
        return self.target <= sigs

    def _generate(self, case: dict) -> list:
        if self.generated >= self.n:
            raise _BudgetSpent
        self.generated += 1
        findings = self.judge(case)
        self.failing += bool(findings)
        for sig in map(finding_signature, findings):
            if sig not in self.done and sig not in self.first:
                self.first[sig] = (case, findings, self.generated)
        if self.on_example:
            self.on_example(case, findings)
        return findings

    def _shrink_step(self, case: dict) -> list | None:
        if self.round_shrunk >= self.shrink_budget:
            return None
        self.round_shrunk += 1
        self.shrunk_total += 1
        return self.judge(case)

    def conclude(self, value: Any, *, shrunk: bool) -> Found:
        """The round's minimal input as a `Found`; its signatures are done from now on."""
        case = strategies.as_case(value, prefix=self.prefix)
        findings = self.memo[case["id"]]
        sigs = [finding_signature(f) for f in findings]
        new = tuple(dict.fromkeys(s for s in sigs if s not in self.done))
        self.done.update(sigs)
        for sig in sigs:
            self.first.pop(sig, None)
        return Found(case, findings, new, self.generated, shrunk)

    def unfound(self) -> list[Found]:
        """Signatures seen in generated inputs but never the first of a found one (the budget ended first):
        each input that first showed some, as generated, not shrunk."""
        by_case: dict[str, tuple[dict, list, int, list[str]]] = {}
        for sig, (case, findings, after) in self.first.items():
            by_case.setdefault(case["id"], (case, findings, after, []))[3].append(sig)
        self.done.update(self.first)
        self.first.clear()
        return [Found(case, findings, tuple(sigs), after, False) for case, findings, after, sigs in by_case.values()]


class _Found(Exception):
    """Raised by a round's test on an input its predicate accepts (as `hypothesis.find` does)."""


def _find(strategy: SearchStrategy[Any], condition: Callable[[Any], bool], config: settings, *,
          seed: int | None) -> Any:
    """`hypothesis.find`, whose seed leaves the example database on.

    Hypothesis turns the database off for a seeded test (`hypothesis.seed`, and so `find(random=...)`);
    these settings, applied after the seed, turn it back on when they carry one, so an unseeded run can
    both replay the database and generate from its drawn seed. `seed(N)` is what `find(random=R)` ran
    with `R.getrandbits(64) == N`. Raises `NoSuchExample` when no input is accepted.
    """
    last: list = []

    @given(strategy)
    def test(value: Any) -> None:
        if condition(value):
            last[:] = [value]
            raise _Found

    run = test if seed is None else hypothesis.seed(seed % (1 << 64))(test)
    try:
        config(run)()
    except _Found:
        return last[0]
    raise NoSuchExample(repr(strategy))


class _Keyed(ExampleDatabase):
    """`database` with one test's keys under `key`: its primary entries under `key`, its sub-keys
    (`.secondary`, `.pareto`) under `key.secondary`, `key.pareto`, whatever the test function's digest.

    So a round's entries are found again by the same model and round (`hunt`'s `_key`), as they were
    when `hypothesis.find` took them under its `database_key`."""

    SUB_KEYS = (b"secondary", b"pareto")

    def __init__(self, database: ExampleDatabase, key: bytes) -> None:
        super().__init__()
        self.database, self.key = database, key

    def _mapped(self, key: bytes) -> bytes:
        sub = next((s for s in self.SUB_KEYS if key.endswith(b"." + s)), None)
        return self.key if sub is None else self.key + b"." + sub

    def save(self, key: bytes, value: bytes) -> None:
        self.database.save(self._mapped(key), value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.database.fetch(self._mapped(key))

    def delete(self, key: bytes, value: bytes) -> None:
        self.database.delete(self._mapped(key), value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.database.move(self._mapped(src), self._mapped(dest), value)


def _settings(n: int, *, database: bool, shrink: bool, key: bytes, directory: Path | None = None) -> settings:
    """A round of up to `n` new inputs, quiet, no deadline, one failure reported (as `hypothesis.find` has
    it); with `database`, round `key`'s entries of the example database (in `directory`, else the project's)
    replayed before generating, and
    what the round finds saved there.

    Hypothesis counts an input generated again (the memo's) as an example too: the round may run a few more,
    which cost no judgement (`_Search`: an input past the budget counts as passing, unjudged).
    """
    phases = ([Phase.reuse] if database else []) + [Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=max(n, 1) + ROUND_SLACK, database=_Keyed(example_database(directory), key) if database
                    else None, deadline=None, phases=phases, verbosity=Verbosity.quiet, derandomize=False,
                    report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
