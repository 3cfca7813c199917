"""Check an engine against recorded golden files, offline (no llama.cpp needed).

Every golden in --golden DIR (python -m harness record writes them) is
replayed: the engine loads the same GGUF, found beside the golden, in the
cache or the synthetic folder by file name, or given with --model PATH, and
checked to be the recorded file (docs/golden.md, "File identity"); each
recorded case is judged exactly as `run` judges it live.
Writes report.json and report.html to --report DIR.

With --reference SPEC the original tokenizer is a third side, exactly as for
`run --reference` (docs/references.md): the same summary.reference and cards.

As pytest has them (docs/run-options.md): -k EXPRESSION on case ids, --lf / --ff from the
--report folder's last report, -x / --maxfail N (what a stop leaves is reported not checked,
never passing). --expected-differences FILE lists the engine's known differences: a finding
it names is known, not failing (exit 0 when nothing else is found), and an entry that no
longer shows is reported fixed.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..models.families import CHOICES
from ..oracle import known_crashes
from ..runs import shard as sharding
from ..runs.config import replay_config
from ..subjects.peers import build_meta
from . import baseline_options, engine_options, reference_options, selection_options

# What `compare` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "every golden was checked and all match",
    1: "a mismatch, an engine error or a recorded llama.cpp crash not on the known-crashes list (--known-crashes, "
       "default harness/data/corpora/known_crashes.json), or an engine flake without --allow-flakes (see run); "
       "with --reference any class of finding, decode included; with --baseline only a new difference",
    2: "a golden whose model nothing could be compared on (see run's --expect-refusal)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", type=Path, required=True, metavar="DIR", help="folder of golden files")
    engine_options.add_arguments(parser)
    reference_options.add_arguments(parser)
    parser.add_argument("--report", type=Path, default=Path("reports/compare"), metavar="DIR",
                        help="where report.json and report.html go (default reports/compare)")
    parser.add_argument("--model", action="append", default=[], metavar="NAME|PATH",
                        help="only this vocabulary's golden (repeatable; default all); a .gguf PATH: replay "
                             "its golden (by file name) against that file, checked to be the recorded one; a URL: "
                             "its header (docs/remote-models.md)")
    parser.add_argument("--family", action="append", default=[], choices=CHOICES,
                        help="only the goldens of this family (repeatable)")
    known_crashes.add_option(parser)
    parser.add_argument("--expect-refusal", action="store_true",
                        help="goldens of files llama.cpp refused: the engine refusing too is agreement")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    sharding.add_option(parser)
    selection_options.add_arguments(parser)  # -k --lf --ff -x --maxfail --expected-differences
    baseline_options.add_arguments(parser)  # --baseline REPORT (re-checked when a golden holds its case)


def run(args: argparse.Namespace) -> int:
    from ..runs.finish import run_and_report
    from ..runs.replay import compare, plan

    golden_dir = args.golden.absolute()
    config = baseline_options.with_baseline(args, replay_config(args))
    sharded = plan(golden_dir, config) if config.shard else None  # each golden read once: the plan keeps them
    part = sharded[0] if sharded else None
    meta = {"command": shlex.join(["python", "-m", "harness", *sys.argv[1:]]),
            "engine": args.engine or "tokenizer:Tokenizer.from_gguf", "engine_args": dict(config.engine_args),
            "golden": str(golden_dir),
            "known_crashes": config.known_crashes.source, "expect_refusal": config.expect_refusal,
            "allow_flakes": config.allow_flakes,
            **({"reference": config.reference, "reference_args": dict(config.reference_args)}
               if config.reference else {}),
            **({"shard": part.meta()} if part else {}),
            **build_meta(config.engine),  # a peer's own build (node-llama-cpp's llama.cpp)
            **selection_options.meta(config)}
    work = selection_options.recorded(lambda results: compare(golden_dir, config, results, sharded), config, meta)
    return run_and_report(work, config, meta)
