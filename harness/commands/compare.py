"""Check an engine against recorded golden files, offline (no llama.cpp needed).

Every golden in --golden DIR (python -m harness record writes them) is
replayed: the engine loads the same GGUF, found beside the golden, in the
cache or the synthetic folder by file name, or given with --model PATH, and
checked to be the recorded file (docs/golden.md, "File identity"); each
recorded case is judged exactly as `run` judges it live.
Writes report.json and report.html to --report DIR.

Exit status: 0 all match; 1 any mismatch, engine error or recorded oracle
crash that is not on the known-crashes list (--known-crashes, default
corpora/known_crashes.json); 2 usage or set-up error.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .. import known_crashes
from .. import report as reporting
from ..families import FAMILIES, models_of
from ..models import SetupError
from ..replay import compare
from ..run_config import RunConfig
from . import engine_options

EXIT_OK, EXIT_FOUND = 0, 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", type=Path, required=True, metavar="DIR", help="folder of golden files")
    engine_options.add_arguments(parser)
    parser.add_argument("--report", type=Path, default=Path("reports/compare"), metavar="DIR",
                        help="where report.json and report.html go (default reports/compare)")
    parser.add_argument("--model", action="append", default=[], metavar="NAME|PATH",
                        help="only this vocabulary's golden (repeatable; default all); a .gguf PATH: replay "
                             "its golden (by file name) against that file, checked to be the recorded one")
    parser.add_argument("--family", action="append", default=[], choices=sorted(FAMILIES),
                        help="only the goldens of this family (repeatable)")
    known_crashes.add_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    names = list(args.model)
    for family in args.family:
        names += models_of(family)
    if args.family and not names:
        raise SetupError(f"family {', '.join(args.family)} has no models yet")
    config = RunConfig(models=tuple(names), report_dir=args.report, quiet=args.quiet,
                       known_crashes=known_crashes.from_args(args), **engine_options.config_fields(args))
    results = compare(args.golden, config)
    meta = {"command": shlex.join(["python", "-m", "harness", *sys.argv[1:]]),
            "engine": args.engine or "tokenizer:Tokenizer.from_gguf", "engine_args": dict(config.engine_args),
            "golden": str(args.golden),
            "known_crashes": config.known_crashes.source, **reporting.versions()}
    report = reporting.build(results, meta=meta, known_crashes=config.known_crashes.describe())
    _, html_path = reporting.write(report, args.report)
    print(reporting.one_line(report))
    print(f"report: {html_path}")
    return EXIT_FOUND if reporting.found_anything(report) else EXIT_OK
