"""Check engines against live llama.cpp on corpora and fuzzed inputs; write report.json/.html.

Each model is loaded by the engine (`--engine MODULE:CALLABLE`, default
tokenizer:Tokenizer.from_gguf) and by llama.cpp (crash-isolated worker
processes), the vocabularies are compared, then every corpus case under the
four add_special x parse_special flags with detokenizations, then N fuzzed
inputs per model (Hypothesis; the first failure is shrunk to a minimal input
and saved to <report>/found/<model>.jsonl for later runs with that report).

With --reference SPEC the original tokenizer is a third side (docs/references.md).
As pytest has them (docs/run-options.md): -k EXPRESSION on case ids, --lf / --ff from the
--report folder's last report, -x / --maxfail N (what a stop leaves is reported not checked,
never passing). --expected-differences FILE lists the engine's known differences: a finding
it names is known, not failing (exit 0 when nothing else is found), and an entry that no
longer shows is reported fixed. A reproduce line writes its own <report>/reproduce/<case>.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..models.families import CHOICES
from ..models.shipped import short_name
from ..oracle import known_crashes, worker_limits
from ..runs import shard as sharding
from ..runs.config import PROFILE_ENV, SWEEPS_ENV, RunConfig, live_config
from ..subjects.peers import build_meta
from ..subjects.spec import is_ours
from . import baseline_options, engine_options, reference_options, selection_options

# What `run` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "with --reference: engine, llama.cpp and the original agreed on everything checked",
    1: "a llama.cpp crash on the known-crashes list (--known-crashes, default harness/data/corpora/known_crashes.json) "
       "is shown, not counted; with --reference every class of finding counts; with --baseline only a difference "
       "new against the baseline does",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", default=[], metavar="NAME|PATH",
                        help="a shipped vocabulary name, a .gguf path (one cut after its metadata too), or a "
                             "URL: http(s)://... or hf://ORG/REPO/FILE, header only (repeatable)")
    parser.add_argument("--family", action="append", default=[], choices=CHOICES,
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
                        help="make the fuzzing reproducible (the example database is then not used); without "
                             "one a seed is drawn, printed and recorded in report.json")
    parser.add_argument("--long-docs", type=int, default=None, metavar="N",
                        help="long documents per model, 66,000 bytes and up, a failing one shrunk to its smallest "
                             "failing window (default 1; 2 with the nightly profile)")
    parser.add_argument("--long-bytes", type=int, default=None, metavar="N",
                        help="the largest long document, in bytes (default 132,000; 1,100,000 nightly)")
    parser.add_argument("--calls", type=int, default=None, metavar="N",
                        help="tokenize calls of one engine object in a row on the corpus texts, each compared "
                             "with llama.cpp's recorded answer (default 12,000; 40,000 nightly; 0: off)")
    engine_options.add_arguments(parser)
    reference_options.add_arguments(parser)
    # the sweeps (harness.runs.sweeps, docs/references.md "Sweeps")
    parser.add_argument("--sweeps", default=None, metavar="all|none|default|NAME[=N],...",
                        help="with --reference: the exhaustive sweeps screened three ways, each differing input a "
                             "case sweep-NAME-N: added (every added/special token with whitespace around it), vocab "
                             "(every entry), unicode (every code point), ascii (ASCII pairs with spaces); =N sizes "
                             f"one (default: 'default' in a three-way run over the default corpora, or ${SWEEPS_ENV})")
    parser.add_argument("--sweep-seconds", type=float, default=None, metavar="S",
                        help="the time all sweeps of one model may take; what is left unchecked is counted so "
                             "(default: 480 for --sweeps default, else no limit)")
    parser.add_argument("--report", type=Path, default=Path("reports/run"), metavar="DIR",
                        help="where report.json and report.html go (default reports/run)")
    worker_limits.add_options(parser)  # --jobs --force-jobs --timeout --memory-limit
    parser.add_argument("--found-dir", type=Path, default=None, metavar="DIR",
                        help="where fuzz failures are saved (default <report>/found, read again by later runs "
                             "with that report; harness/data/corpora/found adds them to the committed finds, "
                             "which runs of our engine read)")
    parser.add_argument("--messages", action=argparse.BooleanOptionalAction, default=None,
                        help="also check the models' chat templates against llama.cpp's chat.cpp "
                             "(default: on when the chat helper is built; --messages builds it)")
    known_crashes.add_option(parser)
    parser.add_argument("--expect-refusal", action="store_true",
                        help="the models are hostile files both sides must refuse: such a model is "
                             "'refused as expected' (not 'not checked', exit 2), one either side loads is a finding")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    sharding.add_option(parser)
    selection_options.add_arguments(parser)  # -k --lf --ff -x --maxfail --expected-differences
    baseline_options.add_arguments(parser)  # --baseline REPORT


def run(args: argparse.Namespace) -> int:
    from ..runs.finish import run_and_report
    from ..runs.live import plan
    from ..runs.live import run as run_models

    config = baseline_options.with_baseline(args, live_config(args))  # read before any case is gathered
    sharded = plan(config) if config.shard else None
    if sharded and config.baseline is not None:  # a baseline case another shard owns is not checked here
        config.baseline.owns = sharded[0].owns
    meta = {"command": shlex.join(["python", "-m", "harness", *sys.argv[1:]]) if sys.argv[1:] else "run",
            "engine": config.engine or "tokenizer:Tokenizer.from_gguf", "engine_args": dict(config.engine_args),
            "fuzz": config.fuzz, "seed": config.seed,
            "long_docs": config.long_docs, "long_bytes": config.long_bytes, "calls": config.calls,
            "known_crashes": config.known_crashes.source,
            "expect_refusal": config.expect_refusal, "allow_flakes": config.allow_flakes,
            **({"reference": config.reference, "reference_args": dict(config.reference_args)}
               if config.reference else {}),
            **({"sweeps": config.sweeps.sizes, "sweep_seconds": config.sweeps.seconds}
               if config.sweeps is not None else {}),
            **({"shard": sharded[0].meta()} if sharded else {}),
            **build_meta(config.engine),  # a peer's own build (node-llama-cpp's llama.cpp)
            **selection_options.meta(config)}
    work = selection_options.recorded(lambda results: run_models(config, results, sharded), config, meta)
    return run_and_report(work, config, meta, messages=_messages(args, config, sharded))


def _messages(args: argparse.Namespace, config: RunConfig, sharded):
    """The `--messages` check for `run_and_report` (None when off, or the engine is not ours)."""
    if args.messages is False or not is_ours(config.engine):
        return None
    from ..chat.run import run_messages
    models = config.models if sharded is None else tuple(  # a model's templates go with its own checks
        m for m in config.models if sharded[0].owns(short_name(m)))
    carry = baseline_options.chat_carry(config.baseline)  # --baseline: its chat conversations too
    return lambda: run_messages(models, config.report_dir, fuzz=min(config.fuzz, 200),
                                seed=config.seed, explicit=bool(args.messages), reference=config.reference,
                                carry=carry)
