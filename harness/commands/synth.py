"""Build the synthetic vocabularies (RWKV, PLaMo-2, every pre-tokenizer name, other models, sensitivity).

They are derived deterministically from the shipped vocabularies (fetch
those first) and written to <cache>/synthetic/<name>.gguf, where
`--model NAME` and the families find them. Rebuilding gives byte-identical
files; a file that is already up to date is left alone.

    python -m harness synth                 # all of them
    python -m harness synth rwkv-world plamo2
    python -m harness synth 'pre-*' --list
    python -m harness synth --family pre-sweep
    python -m harness synth --family sensitivity   # what the main job builds first
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib

from ..errors import SetupError
from ..models import synth
from ..runs.progress import Progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="synthetic vocabularies or glob patterns (default: all)")
    parser.add_argument("--family", action="append", default=[], metavar="FAMILY",
                        help="the synthetic members of a model family, e.g. pre-sweep (repeatable)")
    parser.add_argument("--list", action="store_true",
                        help="list the selected names, their sources and summaries; build nothing")
    parser.add_argument("--sha256", action="store_true", help="print each file's sha256")


def _select(patterns: list[str]) -> list[str]:
    if not patterns:
        return synth.names()
    chosen: list[str] = []
    for pattern in patterns:
        hits = fnmatch.filter(synth.names(), pattern)
        if not hits:
            raise SetupError(f"no synthetic vocabulary matches {pattern!r}; "
                             f"see: {synth.SYNTH_COMMAND} --list")
        chosen += [h for h in hits if h not in chosen]
    return chosen


def _family_members(families: list[str]) -> list[str]:
    from ..models.families import models_of

    known = set(synth.names())
    try:
        return [m for family in families for m in models_of(family) if m in known]
    except KeyError as exc:
        raise SetupError(exc.args[0]) from None


def run(args: argparse.Namespace) -> int:
    selected = _select(args.names) if args.names or not args.family else []
    selected += [m for m in _family_members(args.family) if m not in selected]
    if args.list:
        for name in selected:
            recipe = synth.recipe_for(name)
            print(f"{name:34} {recipe.source:12} {recipe.summary}")
        return 0
    with Progress(total=len(selected), label="synth") as bar:
        for name in selected:
            path = synth.write(name)
            bar.advance()
            if args.sha256:
                print(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path}")
    print(f"{len(selected)} synthetic vocabularies in {synth.synthetic_dir()}")
    return 0
