"""Check engines against live llama.cpp on corpora and fuzzed inputs; write report.json/.html.

Each model is loaded by the engine (`--engine MODULE:CALLABLE`, default
tokenizer:Tokenizer.from_gguf) and by llama.cpp (crash-isolated worker
processes), the vocabularies are compared, then every corpus case under the
four add_special x parse_special flags with detokenizations, then N fuzzed
inputs per model (Hypothesis; the first failure is shrunk to a minimal input
and saved to corpora/found/<model>.jsonl for later runs).

Exit status: 0 all match; 1 any mismatch, engine error or new oracle crash;
2 usage or set-up error. A llama.cpp crash on the known-crashes list
(--known-crashes, default corpora/known_crashes.json) is shown in the report
but does not make the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from .. import known_crashes
from .. import report as reporting
from ..families import FAMILIES, models_of
from ..fuzz import PROFILE_ENV, load_profile
from ..live_run import run as run_models
from ..models import SHIPPED, SetupError
from ..run_config import RunConfig

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", default=[], metavar="NAME|PATH",
                        help="a shipped vocabulary name or a .gguf path (repeatable)")
    parser.add_argument("--family", action="append", default=[], choices=sorted(FAMILIES),
                        help="every model of a family (repeatable)")
    parser.add_argument("--corpus", action="append", default=[], type=Path, metavar="FILE",
                        help="a JSONL or .inp corpus, in addition to the defaults (repeatable)")
    parser.add_argument("--no-default-corpora", dest="default_corpora", action="store_false",
                        help="only the --corpus files (no .inp vectors, edge/prose, vocab or found cases)")
    parser.add_argument("--case", action="append", default=[], metavar="ID",
                        help="only the cases with this id (repeatable; used by reproduce commands)")
    parser.add_argument("--fuzz", type=int, default=None, metavar="N",
                        help=f"fuzzed inputs per model (default 0, or the max_examples of ${PROFILE_ENV})")
    parser.add_argument("--seed", type=int, default=None, metavar="S",
                        help="make the fuzzing reproducible (the example database is then not used)")
    parser.add_argument("--engine", default=None, metavar="MODULE:CALLABLE",
                        help="GGUF path -> object with the Tokenizer API (default tokenizer:Tokenizer.from_gguf)")
    parser.add_argument("--report", type=Path, default=Path("reports/run"), metavar="DIR",
                        help="where report.json and report.html go (default reports/run)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="llama.cpp worker processes per model")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="an oracle call longer than this is a crash (hang)")
    parser.add_argument("--found-dir", type=Path, default=None, metavar="DIR",
                        help="where fuzz failures are saved (default corpora/found)")
    known_crashes.add_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def selected_models(args: argparse.Namespace) -> tuple[str, ...]:
    names = list(args.model)
    for family in args.family:
        names += models_of(family)
    if not names:
        raise SetupError("give --model NAME|PATH or --family FAMILY (shipped: " + ", ".join(SHIPPED) + ")")
    return tuple(dict.fromkeys(names))


def fuzz_budget(args: argparse.Namespace) -> int:
    if args.fuzz is not None:
        if args.fuzz < 0:
            raise SetupError("--fuzz must be 0 or more")
        return args.fuzz
    if os.environ.get(PROFILE_ENV):
        from hypothesis import settings
        load_profile()
        return settings().max_examples
    return 0


def config_from(args: argparse.Namespace) -> RunConfig:
    if args.jobs < 1:
        raise SetupError("--jobs must be at least 1")
    kwargs = {"found_dir": args.found_dir} if args.found_dir else {}
    return RunConfig(
        models=selected_models(args), report_dir=args.report, corpora=tuple(args.corpus),
        default_corpora=args.default_corpora, case_ids=tuple(args.case), fuzz=fuzz_budget(args),
        seed=args.seed, engine=args.engine, jobs=args.jobs, timeout=args.timeout, quiet=args.quiet,
        known_crashes=known_crashes.from_args(args), **kwargs,
    )


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    results = run_models(config)
    meta = {"command": shlex.join(["python", "-m", "harness", *sys.argv[1:]]) if sys.argv[1:] else "run",
            "engine": config.engine or "tokenizer:Tokenizer.from_gguf", "fuzz": config.fuzz,
            "seed": config.seed, "known_crashes": config.known_crashes.source, **reporting.versions()}
    report = reporting.build(results, meta=meta, known_crashes=config.known_crashes.describe())
    _, html_path = reporting.write(report, config.report_dir)
    print(reporting.one_line(report))
    print(f"report: {html_path}")
    return EXIT_FOUND if reporting.found_anything(report) else EXIT_OK
