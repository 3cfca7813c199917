"""The peer matrix: implementations x vocabularies, agreement with llama.cpp per capability.

    python -m harness peers                                   # ours and transformers, 19 shipped vocabularies
    python -m harness peers --engine ours --engine llama.cpp@0.3.16 --family spm
    python -m harness peers --engine ours --engine node-llama-cpp@3.21.1     # node-llama-cpp's prebuilt llama.cpp
    python -m harness peers --engine transformers --engine mypkg:load --model llama-bpe
    python -m harness peers --model real.gguf --reference hf:ORIGINAL_FOLDER    # three ways: + the original
    python -m harness peers --model a.gguf --reference a.gguf=hf:A --model b.gguf --reference b.gguf=spm:B

Each pair is a full `python -m harness run` into REPORT/<implementation>/<vocabulary>/;
REPORT/peers.html and peers.json show one cell per pair (each check's agreeing/checked
units, or why the implementation could not load the vocabulary), linked to its report.
Implementations: `ours` (the default engine), `transformers`, `llama.cpp@VERSION` (built
once into its own venv, about 5 minutes), `node-llama-cpp@VERSION` (installed once from npm,
about 10 s; its column names the llama.cpp it carries) and any --engine value run accepts.

`--reference [VOCABULARY=]SPEC` gives a vocabulary its original tokenizer (hf:, spm:,
tekken:, as `run --reference`): every pair of that row runs three ways, the row shows
llama.cpp against the original and each cell the implementation against it (docs/peers.md).
A bare SPEC needs exactly one --model; `--reference-arg KEY=VALUE` goes to every reference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..models.families import CHOICES, members
from ..models.paths import resolve
from ..models.shipped import SHIPPED
from ..runs import matrix as peers
from ..subjects import llama_release, node_llama

# The peer matrix is a measurement: it uses 0 and 1 otherwise than the README's table (whose "Exit codes" section
# says so); harness.cli.exit_help prints these in their place.
EXIT_INSTEAD = {
    0: "the matrix was written, whatever it holds: differences between implementations are its content, not a "
       "failure (each pair's own run gives its verdict, in the matrix)",
    1: "not used",
}
EXIT_STATUS = {2: "a usage or set-up error of the matrix itself"}

DEFAULT_IMPLEMENTATIONS = (peers.OURS, "transformers")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", action="append", default=[], metavar="IMPLEMENTATION",
                        help="a column: ours, transformers, llama.cpp@VERSION, node-llama-cpp@VERSION, "
                             "MODULE:CALLABLE or cmd:... "
                             f"(repeatable; default {' and '.join(DEFAULT_IMPLEMENTATIONS)})")
    parser.add_argument("--model", action="append", default=[], metavar="NAME|PATH",
                        help="a row: a shipped vocabulary name or a .gguf path (repeatable)")
    parser.add_argument("--reference", action="append", default=[], metavar="[VOCABULARY=]SPEC",
                        help="the original tokenizer of a row (hf:PATH, spm:PATH, tekken:PATH): its pairs run "
                             "three ways; VOCABULARY= as given to --model, needed with more than one (repeatable)")
    parser.add_argument("--reference-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="an option for every reference, as run --reference-arg (repeatable)")
    parser.add_argument("--family", action="append", default=[], choices=CHOICES,
                        help="every model of a family as rows (default: the 19 shipped vocabularies)")
    parser.add_argument("--report", type=Path, default=Path("reports/peers"), metavar="DIR",
                        help="where peers.html, peers.json and each pair's report go (default reports/peers)")
    parser.add_argument("--corpus", action="append", default=[], type=Path, metavar="FILE",
                        help="a JSONL or .inp corpus for every pair, in addition to the defaults (repeatable)")
    parser.add_argument("--no-default-corpora", dest="default_corpora", action="store_false",
                        help="only the --corpus files")
    parser.add_argument("--fuzz", type=int, default=0, metavar="N", help="fuzzed inputs per pair (default 0)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="fuzz seed (default 0)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="llama.cpp worker processes per pair")
    parser.add_argument("--parallel", type=int, default=1, metavar="N", help="pairs run at once (default 1)")
    parser.add_argument("--engine-timeout", type=float, default=None, metavar="SECONDS",
                        help="passed to each contained implementation's run (see run --help)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="llama.cpp's per-call limit in each pair's run (see run --help)")
    parser.add_argument("--reuse", action="store_true",
                        help="read the pairs already run into --report (their pair.json) instead of running "
                             "them again; delete a pair's folder to run it anew")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def selection(args: argparse.Namespace) -> list[str]:
    names = list(dict.fromkeys([*args.model, *members(args.family)] or SHIPPED))
    for name in names:
        resolve(name)  # a bad name or a missing file fails before any pair runs
    return names


def run(args: argparse.Namespace) -> int:
    if args.fuzz < 0 or args.jobs < 1 or args.parallel < 1:
        raise SetupError("--fuzz must be 0 or more, --jobs and --parallel at least 1")
    names = list(dict.fromkeys(args.engine or DEFAULT_IMPLEMENTATIONS))
    models = selection(args)
    for name in names:  # build an older llama.cpp (install node-llama-cpp) once here, not in several pairs at once
        if llama_release.is_release_spec(name):
            llama_release.ensure(llama_release.version_of(name))
        elif node_llama.is_spec(name):
            node_llama.ensure(node_llama.version_of(name))
    for corpus in args.corpus:
        if not corpus.is_file():
            raise SetupError(f"no such corpus file: {corpus}")
    extra = [arg for corpus in args.corpus for arg in ("--corpus", str(corpus.resolve()))]
    extra += [] if args.default_corpora else ["--no-default-corpora"]
    references = reference_pairs(args.reference, models)
    if args.reference_arg and not references:
        raise SetupError("--reference-arg needs --reference")
    options = peers.Options(fuzz=args.fuzz, seed=args.seed, jobs=args.jobs, engine_timeout=args.engine_timeout,
                            timeout=args.timeout, reuse=args.reuse, extra=tuple(extra), references=references,
                            reference_args=tuple(args.reference_arg))
    total = len(names) * len(models)
    done = [0]

    def progress(cell: peers.Cell) -> None:
        done[0] += 1
        if not args.quiet:
            what = peers.cell_lines(asdict_cell(cell))
            print(f"[{done[0]}/{total}] {cell.implementation} x {cell.model}: "
                  + "; ".join(text for _, text in what[:3]), file=sys.stderr, flush=True)

    matrix = peers.run_matrix(names, models, args.report, options, parallel=args.parallel, progress=progress)
    _, html_path = peers.write(matrix, args.report)
    print(peers.one_line(matrix))
    print(f"matrix: {html_path}")
    return 0


def reference_pairs(values: list[str], models: list[str]) -> tuple[tuple[str, str], ...]:
    """(vocabulary, spec) for each `--reference [VOCABULARY=]SPEC`; `SetupError` (exit 2) for a bad one."""
    from ..references import specs
    pairs: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if sep and name in models:
            model, spec = name, rest
        elif len(models) == 1:
            model, spec = models[0], value
        else:
            raise SetupError(f"--reference {value!r}: with {len(models)} vocabularies, say which: "
                             f"--reference VOCABULARY=SPEC (VOCABULARY as given to --model)")
        if not specs.is_reference(spec):
            raise SetupError(f"--reference {value!r}: expected hf:PATH, spm:PATH or tekken:PATH")
        if model in pairs:
            raise SetupError(f"--reference: {model!r} has two originals")
        pairs[model] = specs.parse(spec).spec  # its file checked (and made absolute) before any pair runs
    return tuple(pairs.items())


def asdict_cell(cell: peers.Cell) -> dict[str, Any]:
    from dataclasses import asdict
    return asdict(cell)
