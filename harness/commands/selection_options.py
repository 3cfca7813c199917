"""The options `run` and `compare` share with pytest (-k, --lf, --ff, -x, --maxfail) and
`--expected-differences FILE` (docs/run-options.md).

What they become in a `RunConfig` is `harness.runs.config.selection_fields`; how cases are chosen
and a run stops, `harness.runs.selection`; how a known difference is matched, `harness.compare.expected`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("as pytest has them (docs/run-options.md)")
    group.add_argument("--lf", "--last-failed", dest="last_failed", action="store_true",
                       help="only the cases that failed in the last run's report (the --report folder: its "
                            "findings/ and cases/), a model that failed whole checked whole; everything when "
                            "nothing failed there (no fuzz, long documents or calls unless asked)")
    group.add_argument("--ff", "--failed-first", dest="failed_first", action="store_true",
                       help="the cases that failed in the last run's report first, then the rest")
    group.add_argument("-x", "--exitfirst", dest="maxfail", action="store_const", const=1,
                       help="stop after the first failing case (--maxfail 1)")
    group.add_argument("--maxfail", dest="maxfail", type=int, default=None, metavar="N",
                       help="stop once N cases have failed: what is left is reported as not checked, never as "
                            "passing (cases are judged 64 at a time; the fuzz and long phases are not begun)")
    group.add_argument("-k", dest="keyword", default=None, metavar="EXPRESSION",
                       help="only the cases whose id (or model name) matches: words as substrings, ignoring "
                            "case, with and, or, not and parentheses (pytest's -k)")
    group.add_argument("--expected-differences", type=Path, default=None, metavar="FILE",
                       help="the engine's known differences (TOML or JSON: a signature or a case id, optional "
                            "model and flags, a reason, an upstream link): listed as known, not failing; an "
                            "entry that no longer shows is reported fixed")


def meta(config) -> dict[str, Any]:
    """report.json's meta for these options, known before the run (the expected-differences file's entries)."""
    described = config.expected.describe() if config.expected is not None else None
    return {"expected_differences": described} if described else {}


def recorded(work: Callable[[list], object], config, meta: dict[str, Any]) -> Callable[[list], object]:
    """`work` that writes, as it ends (interrupted or not), what the selection left out and where `--maxfail`
    stopped into `meta["selection"]` (`harness.runs.selection.Tally.describe`)."""
    def run(results: list) -> object:
        try:
            return work(results)
        finally:
            if config.tally is not None:
                meta["selection"] = config.tally.describe()
    return run
