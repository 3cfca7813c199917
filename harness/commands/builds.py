"""What changes between the pinned llama.cpp and another build: every golden, corpus, code point and chat template.

    python -m harness builds                                     # node-llama-cpp (its pinned release) -> reports/builds
    python -m harness builds --against node-llama-cpp@3.21.1 --report reports/builds
    python -m harness builds --against llama.cpp@0.3.35 --model llama-bpe --no-golden
    python -m harness builds --against llama.cpp@0.3.35 --chat-golden WORK/golden/chat   # as bump-pin runs it

The other build (--against) is a llama-cpp-python release (`llama.cpp@VERSION`, built once into
its venv), node-llama-cpp's prebuilt llama.cpp (`node-llama-cpp@VERSION`, installed once from npm;
the default is the release harness/models/pin.py pins for it) or any engine spec wrapping a
llama.cpp. Every golden case (golden/*.json, against the pinned build's recorded answers), the live
corpora of the main job's vocabularies (or --model / --family), every code-point probe
(golden/code-points/) and, given the other build's chat goldens, the chat templates are asked of
it (harness/runs/builds.py). The result, in --report: report.json and report.html (the golden and
live steps merged: every difference signed, both sides' ids and pieces), builds.json and
builds.html (both builds, the table per vocabulary, each difference with its text, flags, both
sides' ids and pieces, and both build ids; what the other build cannot answer is "not offered" or
"not answered", never agreement). The nightly runs it against node-llama-cpp and folds report.json
into a ledger of its own (docs/golden.md, "Two llama.cpp builds").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import SetupError
from ..files.atomic import check_output_folder
from ..golden import every_code_point as cpts
from ..golden import files as goldens
from ..models.families import CHOICES, members
from ..models.paths import resolve
from ..models.pin import NODE_LLAMA_CPP_VERSION

EXIT_STATUS = {
    0: "the two builds agree on everything compared (what the other build does not offer or answer is listed)",
    1: "the builds differ: a golden or live case, a code-point call or a chat template",
    2: "nothing differs, but a step gave no verdict (its line says why)",
}
DEFAULT_AGAINST = f"node-llama-cpp@{NODE_LLAMA_CPP_VERSION}"
MAIN_FAMILIES = ("spm", "bpe", "wpm", "ugm", "sensitivity")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--against", default=DEFAULT_AGAINST, metavar="BUILD",
                        help=f"the other build: llama.cpp@VERSION, node-llama-cpp@VERSION or an engine spec "
                             f"wrapping a llama.cpp (default {DEFAULT_AGAINST})")
    parser.add_argument("--model", action="append", default=[], metavar="NAME|PATH",
                        help="a vocabulary of the live step (repeatable; default: the main job's 22)")
    parser.add_argument("--family", action="append", default=[], choices=CHOICES,
                        help="every vocabulary of a family in the live step (repeatable)")
    parser.add_argument("--corpus", action="append", default=[], type=Path, metavar="FILE",
                        help="a JSONL or .inp corpus for the live step, in addition to the defaults (repeatable)")
    parser.add_argument("--no-default-corpora", dest="default_corpora", action="store_false",
                        help="the live step: only the --corpus files (and the code points' cases)")
    parser.add_argument("--golden", type=Path, default=goldens.GOLDEN_DIR, metavar="DIR",
                        help="the pinned build's goldens (default golden/)")
    parser.add_argument("--no-golden", dest="golden_step", action="store_false", help="leave out the goldens")
    parser.add_argument("--no-live", dest="live_step", action="store_false", help="leave out the live corpora")
    parser.add_argument("--code-points", type=Path, default=cpts.RECORDS, metavar="DIR",
                        help="the pinned build's code-point records (default golden/code-points/)")
    parser.add_argument("--probe", action="append", default=[], choices=sorted(cpts.PROBE_VOCABS), metavar="NAME",
                        help="a code-point probe vocabulary (repeatable; default all five)")
    parser.add_argument("--no-code-points", dest="code_point_step", action="store_false",
                        help="leave out the code-point probes")
    parser.add_argument("--chat-golden", type=Path, default=None, metavar="DIR",
                        help="the other build's chat goldens, compared with --chat-pinned's")
    parser.add_argument("--chat-pinned", type=Path, default=goldens.GOLDEN_DIR / "chat", metavar="DIR",
                        help="the pinned build's chat goldens (default golden/chat/)")
    parser.add_argument("--fuzz", type=int, default=0, metavar="N", help="fuzzed inputs per vocabulary (default 0)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="the fuzz seed (default 0)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="llama.cpp workers of the live step")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="llama.cpp's per-call limit (run --timeout)")
    parser.add_argument("--engine-timeout", type=float, default=None, metavar="SECONDS",
                        help="the other build's per-request limit (run --engine-timeout)")
    parser.add_argument("--report", type=Path, default=Path("reports/builds"), metavar="DIR",
                        help="where builds.json, builds.html, report.json and the steps' reports go "
                             "(default reports/builds)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def plan_of(args: argparse.Namespace):
    """The comparison asked for, every input checked before any step starts."""
    from ..runs import builds
    if args.fuzz < 0 or args.jobs < 1:
        raise SetupError("--fuzz must be 0 or more and --jobs at least 1")
    against = builds.check_against(args.against)
    check_output_folder(args.report, "--report")
    models: tuple[str, ...] = ()
    if args.live_step:
        models = tuple(dict.fromkeys([*args.model, *members(args.family or (() if args.model else MAIN_FAMILIES))]))
        for model in models:
            resolve(model)  # a bad name or a missing file fails before anything runs
    golden = args.golden if args.golden_step else None
    if golden is not None and not golden.is_dir():
        raise SetupError(f"--golden {golden}: no such folder (--no-golden leaves the goldens out)")
    probes = tuple(args.probe or cpts.PROBE_VOCABS) if args.code_point_step else ()
    for corpus in args.corpus:
        if not corpus.is_file():
            raise SetupError(f"--corpus {corpus}: no such file")
    extra = [a for corpus in args.corpus for a in ("--corpus", str(corpus.resolve()))]
    extra += [] if args.default_corpora else ["--no-default-corpora"]
    if args.chat_golden is not None and not args.chat_golden.is_dir():
        raise SetupError(f"--chat-golden {args.chat_golden}: no such folder")
    return builds.Plan(against=against, report=args.report.resolve(), models=models, golden=golden,
                       probe_vocabs=probes, records=args.code_points, fuzz=args.fuzz, seed=args.seed,
                       jobs=args.jobs, timeout=args.timeout, engine_timeout=args.engine_timeout, extra=tuple(extra))


def chat_result(args: argparse.Namespace, against: str) -> dict:
    from ..chat import golden_compare
    from ..subjects import node_llama
    if args.chat_golden is None:
        why = ("not offered: node-llama-cpp formats chats with its own wrappers, not llama.cpp's chat path"
               if node_llama.is_spec(against) else
               "not compared: no --chat-golden DIR of the other build's chat goldens (bump-pin records them)")
        return {"status": "not compared", "why": why}
    return {"status": "compared", **golden_compare.compare(args.chat_pinned, args.chat_golden, other_name=against)}


def run(args: argparse.Namespace) -> int:
    from ..report import builds as summary
    from ..runs import builds

    plan = plan_of(args)

    def log(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    steps = builds.run(plan, log)
    data = summary.summary(against=plan.against, report=plan.report, steps=steps,
                           chat=chat_result(args, plan.against))
    json_path, html_path = summary.write(data, plan.report)
    for line in summary.terminal_lines(data):
        print(line)
    print(data["verdict"])
    print(f"builds: {json_path}, {html_path}")
    return summary.exit_status(data)
