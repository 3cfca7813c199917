"""Measure the harness's own power: plant curated bugs in tokenizer/ and count which detectors catch them.

Each mutant of tests/mutants/*.toml is applied to a scratch copy of the
project (the working tree is never touched), then each detector runs there:
llama.cpp's own .inp/.out vectors, the golden replay (`compare --golden`),
the live run over the default corpora, and live plus fuzz (the main job's
`--fuzz 20 --seed 0`). A detector stops at the first vocabulary that kills
the mutant (its likely vocabularies go first). Prints the kill table and
writes selftest.json, selftest.html and selftest.md to --report DIR.

    python -m harness selftest --jobs 2                  # every mutant (tens of minutes)
    python -m harness selftest --mutant bpe-rank-tie-rightmost --detector golden
    python -m harness selftest --list
    python -m harness selftest --until-main-kill --detector golden --detector live+fuzz   # the nightly's

With --until-main-kill the detectors run in the order given, and a mutant that
golden or live+fuzz (or live, which implies it) has killed runs no further
detector: those are "not run (the main job already kills it)", counted neither
as kills nor as survivals, and each rate reads "k/n run". Every detector's
baseline runs only when a mutant first needs it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import EXIT_FOUND, EXIT_OK, SetupError
from ..files.atomic import check_output_folder, write_text_atomic
from ..runs import shard as sharding
from ..selftest.mutants import MutantError, load, select
from ..selftest.report import MAIN, html_page, markdown, text_table
from ..selftest.run import DETECTORS, Settings, load_prior, write_json
from ..selftest.run import run as run_selftest

# What `selftest` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "the main job (golden or live+fuzz; with --scope nightly or without those detectors: any selected "
       "detector) kills every selected mutant, a documented blind spot (blind_spot in mutants.toml) excepted",
    1: "another mutant survives, or only timed out",
}

SELFTEST_FILES = ("selftest.json", "selftest.html", "selftest.md")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mutant", action="append", default=[], metavar="ID",
                        help="only this mutant (repeatable; default all)")
    parser.add_argument("--detector", action="append", default=[], choices=DETECTORS,
                        help="only this detector (repeatable; default all four)")
    parser.add_argument("--scope", choices=("main", "nightly"), default="main",
                        help="vocabularies: main = the 19 shipped and the sensitivity family (the main job); "
                             "nightly adds the RWKV and PLaMo-2 families")
    parser.add_argument("--fuzz", type=int, default=20, metavar="N", help="fuzzed inputs per vocabulary for live+fuzz")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="fuzz seed (default 0, as the main job)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="mutants judged in parallel")
    parser.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS",
                        help="per detector and vocabulary; a run past it is inconclusive (timeout), not a kill")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false",
                        help="skip checking that every detector passes on the unmutated code first")
    parser.add_argument("--report", type=Path, default=Path("reports/selftest"), metavar="DIR",
                        help="where selftest.json and selftest.html go (default reports/selftest)")
    parser.add_argument("--reuse", type=Path, default=None, metavar="JSON",
                        help="take the verdicts of an earlier selftest.json (same scope, fuzz, seed) and run only "
                             "the detectors it lacks; its detectors join the table")
    parser.add_argument("--likely-only", action="store_true",
                        help="run each mutant only on its likely vocabularies (cheaper; a survivor then means "
                             "'not killed there', not 'not killed by the main job')")
    parser.add_argument("--until-main-kill", action="store_true",
                        help="run the detectors in the order given and stop on a mutant once the main job "
                             "(golden or live+fuzz) kills it: the rest are 'not run', and each rate counts "
                             "only the mutants its detector ran on (k/n run)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    sharding.add_option(parser)


def run(args: argparse.Namespace) -> int:
    try:
        mutants = select(load(), args.mutant)
    except MutantError as exc:
        raise SetupError(str(exc)) from None
    part = _shard(mutants, args.shard)
    if part is not None:
        mutants = [m for m in mutants if part.owns(m.id)]
    if args.list:
        for m in mutants:
            print(f"{m.id:40} {m.area:18} {m.description}")
        print(f"{len(mutants)} mutants")
        return EXIT_OK
    if args.jobs < 1 or args.fuzz < 0 or args.timeout <= 0:
        raise SetupError("--jobs must be at least 1, --fuzz 0 or more, --timeout positive")
    check_output_folder(args.report, "--report", files=SELFTEST_FILES)  # before the hour of mutants
    detectors = chosen(args.detector, args.until_main_kill)
    settings = Settings(scope=args.scope, detectors=detectors, fuzz=args.fuzz, seed=args.seed,
                        jobs=args.jobs, timeout=args.timeout, baseline=args.baseline, likely_only=args.likely_only,
                        until_main_kill=args.until_main_kill)
    if args.reuse is not None:
        try:
            prior = load_prior(args.reuse, settings)
        except (OSError, ValueError) as exc:
            raise SetupError(f"--reuse: {exc}") from None
        # its detectors: those with a baseline, and (lazy baselines) those it only recorded as skipped
        reused = set(prior.get("vocabularies", {})) | set(prior.get("settings", {}).get("detectors", ()))
        detectors = (*detectors, *(d for d in DETECTORS if d in reused and d not in detectors))
        if not args.until_main_kill:
            detectors = tuple(d for d in DETECTORS if d in detectors)
        settings = replace(settings, detectors=detectors, prior=prior)
    json_path = args.report / "selftest.json"
    of = f" (shard {part.shard}: {len(mutants)} of {part.units} mutants)" if part is not None else ""
    print(f"selftest: {len(mutants)} mutants x {len(detectors)} detectors, scope {args.scope}, "
          f"jobs {args.jobs}{of}", flush=True)
    report = run_selftest(mutants, settings, out_json=json_path, say=lambda line: print(line, flush=True))
    if part is not None:
        report["shard"] = part.meta()
    args.report.mkdir(parents=True, exist_ok=True)
    write_json(json_path, report)
    html_path = write_text_atomic(args.report / "selftest.html", html_page(report), "--report")
    write_text_atomic(args.report / "selftest.md", markdown(report), "--report")
    print(text_table(report))
    print(f"report: {html_path}")
    return verdict(report)


def chosen(named: list[str], in_order: bool) -> tuple[str, ...]:
    """The detectors to run: all four by default; those named, in the order named with
    --until-main-kill (which stops at the main job's kill), else in the usual order."""
    if not named:
        return DETECTORS
    if in_order:
        return tuple(dict.fromkeys(named))
    return tuple(d for d in DETECTORS if d in named)


def verdict(report: dict[str, Any]) -> int:
    """The self-test's exit status from its report (a shard's, the merged one), the reasons printed."""
    verdict_col = MAIN if MAIN in report["columns"] and report["settings"]["scope"] == "main" else None
    survivors, blind = split_survivors(report, verdict_col)
    unsure = [r["id"] for r in report["mutants"]
              if all(c["outcome"] == "timeout" for c in ([r["results"][verdict_col]] if verdict_col
                                                         else r["results"].values()))]
    for mutant, why in blind.items():
        print(f"known blind spot, survives as documented: {mutant} ({why})")
    if survivors:
        print(f"{len(survivors)} mutants survive: {', '.join(survivors)}", file=sys.stderr)
    if unsure:  # a verdict is a claim: a mutant nobody could judge is not reported as killed
        print(f"{len(unsure)} mutants could not be judged (timeout): {', '.join(unsure)}", file=sys.stderr)
    return EXIT_FOUND if survivors or unsure else EXIT_OK


def _shard(mutants: list, text: str | None) -> sharding.Partition | None:
    """`--shard K/N` over the selected mutants, one unit each in their listed order (`harness.runs.shard`).

    Each shard also runs the baseline (every detector on the unmutated code) for its own mutants.
    """
    shard = sharding.from_text(text)
    if shard is None:
        return None
    return sharding.partition("selftest", [sharding.Unit(m.id, sharding.MODEL) for m in mutants], shard)


def split_survivors(report: dict[str, Any], column: str | None) -> tuple[list[str], dict[str, str]]:
    """(survivors that fail the self-test, documented blind spots that survived: id -> reason)."""
    reasons = {r["id"]: r.get("blind_spot", "") for r in report["mutants"]}
    survivors = _survivors(report, column)
    return [s for s in survivors if not reasons[s]], {s: reasons[s] for s in survivors if reasons[s]}


def _survivors(report: dict[str, Any], column: str | None) -> list[str]:
    """Mutants the given column (or, for None, every selected detector) lets through."""
    out = []
    for row in report["mutants"]:
        cells = row["results"]
        judged = [cells[column]] if column else list(cells.values())
        if all(c["outcome"] in ("not-run", "skipped", "timeout") for c in judged):
            continue  # reported as not run or inconclusive, not as a survivor
        if not any(c["killed"] for c in judged):
            out.append(row["id"])
    return out

