"""What the mutation self-test was asked to run (`Settings`) and what one detector found (`Verdict`).

Shared by `harness.selftest.run` (which runs the detectors) and `harness.selftest.report`
(which draws the kill table), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..environment import project_root

DETECTORS = ("vectors", "golden", "live", "live+fuzz")
MAIN_JOB = ("golden", "live+fuzz")                        # what ./quickstart.sh parity runs


@dataclass(frozen=True)
class Settings:
    scope: str = "main"
    detectors: tuple[str, ...] = DETECTORS
    fuzz: int = 20
    seed: int = 0
    jobs: int = 1
    timeout: float = 900.0
    baseline: bool = True
    root: Path = field(default_factory=project_root)
    prior: dict[str, Any] = field(default_factory=dict)   # an earlier selftest.json to reuse (--reuse)
    likely_only: bool = False   # only each mutant's likely vocabularies (--likely-only: a cheaper, weaker run)
    until_main_kill: bool = False   # a mutant the main job has killed runs no further detector (--until-main-kill)


@dataclass
class Verdict:
    """One detector on one mutant."""

    outcome: str                    # killed | survived | timeout (inconclusive) | not-run | skipped
    vocab: str | None = None        # the vocabulary that killed it
    tried: list[str] = field(default_factory=list)
    seconds: float = 0.0
    detail: str = ""
    implied: bool = False

    @property
    def killed(self) -> bool:
        """A timeout is no kill: on a loaded machine it says nothing about the mutant."""
        return self.outcome == "killed"


SKIPPED = "not run: the main job already kills it"   # a skipped Verdict's detail (--until-main-kill)
