"""Check chat templates: our rendered prompts and message token counts against llama.cpp's.

Targets are every shipped vocabulary's chat templates and the sdist's 70
`models/templates/*.jinja` (each on a vocabulary whose special tokens it uses); cases
are harness/data/corpora/conversations.jsonl with add_generation_prompt true and false, plus
--fuzz N Hypothesis conversations. llama.cpp's side is its own chat formatting
(common/chat.cpp, the Jinja path llama-server uses) in a crash-isolated helper built
once from the pinned sdist; see harness/chat/oracle.py for exactly what it covers.

    python -m harness chat                          # live, every target, the corpus
    python -m harness chat --target tmpl-GLM-4.6 --fuzz 200 --seed 1
    python -m harness chat --model path/to/model.gguf --fuzz 200   # your GGUF's own templates
    python -m harness chat --record                 # write golden/chat/*.json
    python -m harness chat --golden golden/chat     # offline replay, no llama.cpp
    python -m harness chat --report reports/chat    # messages.json + messages.html
    python -m harness chat --model my.gguf --reference hf:ORIGINAL_DIR   # three ways (docs/chat.md)

Every request has its time and memory limit (docs/chat.md, "Bounds"); a template a side hangs on
twice is asked no more (`harness.chat.bounds`). SIGINT or SIGTERM ends every child, prints (and
with --report writes) what finished, marked interrupted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..chat import golden as chat_golden
from ..chat import helper_build as chat_helper_build
from ..chat import run as chat_run
from ..chat.bounds import DEFAULT_DEADLINE, Bounds, check_deadline
from ..chat.cases import Target, load_conversations
from ..chat.diff import diff_text
from ..chat.oracle import DEFAULT_TIMEOUT, ChatOracle
from ..errors import EXIT_FOUND, EXIT_OK, SetupError
from ..files.atomic import check_output_folder
from ..report import baseline as baseline_sorting
from ..report.messages import write as write_messages
from ..runs import shard as sharding
from ..runs.baseline import Baseline
from ..runs.interrupts import Interrupted, raising_on_signals
from ..runs.meta import Meta
from . import baseline_options

# What `chat` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "every case asked matched",
    1: "a difference, or a llama.cpp crash or hang",
    2: "the whole check's --deadline passed with cases left (they are not asked, and said so)",
}

MAX_TIMEOUT = 3600.0  # seconds per request: an hour is already a hang


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", "--chat-target", action="append", dest="target", metavar="NAME",
                        help="a chat target (tmpl-<stem>, <model> or <model>.<variant>; repeatable)")
    parser.add_argument("--model", action="append", metavar="PATH",
                        help="every chat template of this GGUF file (repeatable; instead of --target)")
    parser.add_argument("--reference", metavar="hf:DIR",
                        help="with --model: also check three ways against the original folder (its chat "
                             "templates, and each conversation through transformers' apply_chat_template)")
    parser.add_argument("--real", action="store_true",
                        help="three ways on the real set's originals given chat templates (harness/chat/real_chat.py): "
                             "built and converted once, then checked like --model X --reference hf:DIR")
    parser.add_argument("--conversation", metavar="ID", help="only this conversation of the corpus")
    parser.add_argument("--no-corpus", dest="corpus", action="store_false",
                        help="only the fuzzed conversations, not harness/data/corpora/conversations.jsonl")
    parser.add_argument("--fuzz", type=int, default=0, metavar="N", help="N fuzzed conversations per target")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fuzzed conversations")
    parser.add_argument("--record", action="store_true", help="record golden/chat/ from llama.cpp")
    parser.add_argument("--golden", type=Path, metavar="DIR", help="replay chat goldens offline")
    parser.add_argument("--out", type=Path, default=chat_golden.GOLDEN_DIR, metavar="DIR",
                        help="where --record writes (default: golden/chat)")
    parser.add_argument("--report", type=Path, metavar="DIR", help="write messages.json/.html here")
    parser.add_argument("--build-helper", action="store_true",
                        help="build the chat helper (llama.cpp's common/ chat code) and exit")
    parser.add_argument("--assign-vocabs", action="store_true",
                        help="maintainers: recompute harness/data/chat_targets.json and exit")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="compile jobs for --build-helper (default: one per CPU)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                        help="seconds before the helper (or transformers) counts as hung on a case")
    parser.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE, metavar="S",
                        help="seconds for the whole check: the cases left after it are not asked, and the "
                             f"exit status is 2 (default {DEFAULT_DEADLINE:g})")
    sharding.add_option(parser)
    baseline_options.add_arguments(parser, what="messages.json")  # --baseline REPORT


def run(args: argparse.Namespace) -> int:
    if args.fuzz < 0:
        raise SetupError("--fuzz must be 0 or more")
    if not 0 < args.timeout <= MAX_TIMEOUT:  # also refuses nan
        raise SetupError(f"--timeout {args.timeout:g} is out of range: more than 0 and at most {MAX_TIMEOUT:g} s")
    try:
        check_deadline(args.deadline)
    except ValueError as exc:
        raise SetupError(str(exc)) from None
    if args.report:  # before any template is rendered, not after the check
        check_output_folder(args.report, "--report", files=("messages.json", "messages.html"))
    if args.assign_vocabs:
        from ..chat.cases import TARGETS_FILE, assign
        data = assign()
        print(f"{TARGETS_FILE}: {len(data['gguf'])} vocabularies with templates, {len(data['sdist'])} sdist templates")
        return 0
    if args.build_helper:
        chat_helper_build.build(jobs=args.jobs)
        return 0
    if args.model and args.target:
        raise SetupError("give --model PATH or --target NAME, not both")
    if args.real and (args.model or args.target or args.reference):
        raise SetupError("--real checks its own pairs: not with --model, --target or --reference")
    if args.reference and not args.model:
        raise SetupError("--reference needs --model PATH: the GGUF whose templates are checked against it")
    if args.reference and (args.golden or args.record):
        raise SetupError("--reference is a live check: not with --golden or --record")
    if args.shard and (args.reference or args.real):
        raise SetupError("--shard cuts the templates of the two-way check: not with --reference or --real")
    args.about, args.found_baseline = Meta(background=False), _baseline(args)  # the report's meta; --baseline
    if args.reference or args.real:
        return _three_way(args)
    if args.model:
        from ..chat.cases import file_targets
        targets = [t for path in args.model for t in file_targets(path)]
    else:
        targets = chat_run.select(args.target)
    part = _shard(targets, args.shard)
    if part is not None:
        targets = [t for t in targets if part.owns(t.name)]
    if args.golden:
        summary = chat_run.offline(targets, args.golden)
        if not summary.targets:
            raise SetupError(f"no chat goldens for these targets in {args.golden}")
    elif args.record:
        return _record(targets, args)
    else:
        summary = chat_run.ChatSummary()

        def work() -> None:
            with ChatOracle(timeout=args.timeout) as oracle:
                chat_run.live(targets, oracle, conversation=args.conversation, fuzz=args.fuzz, seed=args.seed,
                              corpus=args.corpus, summary=summary, bounds=Bounds(args.deadline),
                              carry=baseline_options.chat_carry(args.found_baseline))
        stop = _interruptible(work, summary)
        if stop is not None:
            return _finish(summary, [], args, stop)
    if part is not None:
        summary.shard = part.meta()
        print(f"shard {part.shard}: {len(targets)} of {part.units} templates")
    return _finish(summary, [], args, None)


def _interruptible(work: Callable[[], None], summary: chat_run.ChatSummary) -> Interrupted | None:
    """Run `work` with SIGINT and SIGTERM raised as `Interrupted` (its `with` blocks end every child);
    the signal that stopped it, marked on `summary`, or None."""
    try:
        with raising_on_signals():
            work()
    except Interrupted as exc:
        summary.interrupted = exc.name
        return exc
    return None


def _finish(summary: chat_run.ChatSummary, blocks: list[Any], args: argparse.Namespace,
            stop: Interrupted | None) -> int:
    """Print the findings and the summary (and write `--report`): what finished, the exit status."""
    for finding in summary.findings[:20] + summary.oracle_crashes[:20]:
        print(diff_text(finding))
    data, lines = chat_run.with_three_way(summary, blocks)
    for line in lines:
        print(line)
    data["meta"] = args.about.finish({"command": shlex.join(["python", "-m", "harness", *sys.argv[1:]]),
                                      "engine": "tokenizer (ours)", "fuzz": args.fuzz}, seed=args.seed)
    block = args.found_baseline.compare({"messages": data}, None) if args.found_baseline else None
    for line in baseline_sorting.lines(block) if block else ():
        print(line)
    if args.report:
        write_messages({**data, **({"baseline": block} if block else {})}, lines, args.report)
        print(f"report: {args.report / 'messages.html'}")
    if stop is not None:
        print(f"{stop}: partial report of the cases finished", file=sys.stderr)
        return stop.exit_status
    status = summary.exit_status()
    status = EXIT_FOUND if status == EXIT_OK and not all(b.ok for b in blocks) else status
    return baseline_sorting.exit_status(block, status) if block else status


def _baseline(args: argparse.Namespace) -> Baseline | None:
    """`--baseline`, read before any work: a chat check's messages.json, or a report holding one."""
    if args.baseline is None:
        return None
    if args.reference or args.real or args.record:
        raise SetupError("--baseline compares two-way chat checks: not with --reference, --real or --record")
    found = baseline_options.read(args, prefer="messages.json")
    if found is not None and not found.has_chat:
        raise SetupError(f"--baseline {found.path}: holds no chat check (no messages): give a chat --report "
                         "folder's messages.json, or a report of run --messages")
    if found is not None and args.golden:
        found.chat_evidence = lambda data: ({}, {r["id"]: "an offline replay (--golden) checks only the goldens' "
                                                 "own conversations" for r in found.chat_records})
    return found


def _pairs(args: argparse.Namespace) -> list[tuple[Path, Path]]:
    """(GGUF, original folder) to check three ways: `--real`'s built pairs, or each --model with --reference."""
    if args.real:
        from ..chat.real_chat import PAIRS, build
        return [build(pair) for pair in PAIRS]
    folder = chat_run.original_folder(args.reference)
    if folder is None or not folder.is_dir():
        raise SetupError(f"--reference {args.reference}: give hf:DIR, the original's folder (only an hf: "
                         "original carries a chat template)")
    for path in args.model:
        if not Path(path).is_file():
            raise SetupError(f"--model {path}: no such file")
    return [(Path(path), folder) for path in args.model]


def _three_way(args: argparse.Namespace) -> int:
    """`chat --model X.gguf --reference hf:DIR` (or `chat --real`): the three-way message check."""
    from ..chat.transformers_side import missing
    if missing():
        raise SetupError(str(missing()))
    pairs = _pairs(args)
    summary = chat_run.ChatSummary()
    blocks: list[Any] = []
    bounds = Bounds(args.deadline)

    def work() -> None:
        with ChatOracle(timeout=args.timeout) as oracle:
            for gguf, folder in pairs:
                chat_run.three_ways([gguf], folder, oracle, summary, fuzz=args.fuzz, seed=args.seed,
                                    bounds=bounds, blocks=blocks, timeout=args.timeout)
    return _finish(summary, blocks, args, _interruptible(work, summary))


def _shard(targets: list[Target], text: str | None) -> sharding.Partition | None:
    """`--shard K/N` over the chat targets, one unit each: every template runs the same conversations
    (the corpus with add_generation_prompt true and false, the same fuzz sample), so counting
    templates counts cases."""
    shard = sharding.from_text(text)
    if shard is None:
        return None
    return sharding.partition("chat", [sharding.Unit(t.name, sharding.MODEL) for t in targets], shard)


def _record(targets: list[Target], args: argparse.Namespace) -> int:
    convs = load_conversations()
    crashes = 0
    with ChatOracle(timeout=args.timeout) as oracle:
        for target in targets:
            data = chat_golden.record_target(target, oracle, convs)
            path = chat_golden.golden_path(target, args.out)
            chat_golden.write(path, data)
            bad = [c for c in data["cases"] if c["status"] in ("crash", "hang")]
            crashes += len(bad)
            print(f"{target.name}: {len(data['cases'])} cases, {len(bad)} crash/hang -> {path}")
    return 1 if crashes else 0
