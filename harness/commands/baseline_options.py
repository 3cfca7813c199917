"""`--baseline REPORT`, shared by `run`, `compare` and `chat`: an earlier run to compare this one with.

The baseline is read (within bounds, checked like a `merge-reports` part) before any work, so a
baseline that is not a report is one line and exit 2 at once; `harness.runs.baseline` carries its
differences into the run and sorts them at the end (docs/differences.md, "Two runs compared").
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runs.baseline import Baseline
    from ..runs.config import RunConfig

HELP = ("an earlier run's report.json (or its folder): its differences are checked again in this run, and "
        "the run's are sorted into new, fixed, unchanged and not re-checked; the exit status is then 1 only "
        "for new ones (docs/differences.md)")


def add_arguments(parser: argparse.ArgumentParser, *, what: str = "report.json") -> None:
    parser.add_argument("--baseline", type=Path, default=None, metavar="REPORT",
                        help=HELP.replace("report.json", what))


def read(args: argparse.Namespace, prefer: str = "report.json") -> Baseline | None:
    """The `--baseline` read and checked (`SetupError` on anything wrong), or None without one."""
    if getattr(args, "baseline", None) is None:
        return None
    from ..runs.baseline import Baseline
    return Baseline.read(args.baseline, prefer)


def with_baseline(args: argparse.Namespace, config: RunConfig) -> RunConfig:
    """`config` with its baseline (`run`, `compare`)."""
    found = read(args)
    return config if found is None else dataclasses.replace(config, baseline=found)


def chat_carry(found: Baseline | None) -> Any:
    """The baseline's chat conversations as the `carry` of `harness.chat.run.live`, wired so that the
    baseline's comparison learns which were checked again; None without a baseline."""
    if found is None:
        return None
    from ..chat.baseline import ChatCarry
    carry = ChatCarry(found.chat_records)
    found.chat_evidence = carry.evidence
    return carry
