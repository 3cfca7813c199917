"""Summarise a GGUF file: version, architecture, tokenizer model and flags, special ids, tensors.

FILE is a path to a .gguf file or a shipped vocabulary's short name (e.g. llama-spm).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..models.paths import resolve, source_of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE|NAME")
    parser.add_argument("--json", action="store_true", help="print JSON for machines")


def run(args: argparse.Namespace) -> int:
    from tokenizer import GGUFError

    from ..models.summary import render, summarize

    summaries, failed = [], False
    for item in args.files:
        try:
            path = resolve(item)
            summary = summarize(path)
            if (source := source_of(path)) is not None:  # a URL or cut file: its vocab-only copy was read
                summary["source"] = source
            summaries.append(summary)
        except GGUFError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed = True
        except OSError as exc:  # unreadable (permissions, a directory, an I/O error)
            print(f"error: {item}: cannot read it ({exc.strerror or exc})", file=sys.stderr)
            failed = True
    if args.json and summaries:
        out = summaries[0] if len(args.files) == 1 else summaries
        print(json.dumps(out, indent=2, sort_keys=True))
    elif summaries:
        print("\n\n".join(_with_source(s, render(s)) for s in summaries))
    return 2 if failed else 0


def _with_source(summary: dict, text: str) -> str:
    """`render`'s text, then the line saying where a header-only file came from."""
    if "source" not in summary:
        return text
    from ..models.header_only import note
    return f"{text}\n{note(summary['source'])}"
