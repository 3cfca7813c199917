"""Summarise a GGUF file: version, architecture, tokenizer model and flags, special ids, tensors.

FILE is a path to a .gguf file or a shipped vocabulary's short name (e.g. llama-spm).

With --reference hf:PATH (a tokenizer.json folder or file) it also says whether the
GGUF's tokenizer.ggml.pre is the name llama.cpp's converter writes for the original's folder:
the converter itself converts it, vocab-only, in its venv (harness/models/convert.py), and the
line names the path it took. Only its BPE and WordPiece paths map a fingerprint (chkhsh) to a
name; `_set_vocab_sentencepiece` and `_set_vocab_llama_hf` write `default` without one, and a
refusal names the path that refused. spm:PATH: SentencePiece models have no fingerprint, and
the converter writes tokenizer.ggml.pre = default for them; tekken:PATH: its --mistral-format
path writes tekken.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..models.paths import resolve, source_of

# What `inspect` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "the file was read (with --reference: its tokenizer.ggml.pre is the name the converter picks)",
    1: "with --reference: the GGUF's tokenizer.ggml.pre is not the name the converter picks for the original",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE|NAME")
    parser.add_argument("--json", action="store_true", help="print JSON for machines")
    parser.add_argument("--reference", metavar="hf:PATH|spm:PATH|tekken:PATH",
                        help="the original tokenizer: is tokenizer.ggml.pre what the converter writes for it?")


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
    verdicts = _reference_verdicts(summaries, args.reference) if args.reference and not failed else []
    for summary, verdict in zip(summaries, verdicts):
        summary["reference"] = verdict
    if args.json and summaries:
        out = summaries[0] if len(args.files) == 1 else summaries
        print(json.dumps(out, indent=2, sort_keys=True))
    elif summaries:
        print("\n\n".join(_with_source(s, render(s)) for s in summaries))
        if verdicts:
            from ..references.pre_check import describe

            print("\n".join(describe(v) for v in verdicts))
    if failed:
        return 2
    return 0 if all(v["consistent"] for v in verdicts) else 1


def _with_source(summary: dict, text: str) -> str:
    """`render`'s text, then the line saying where a header-only file came from."""
    if "source" not in summary:
        return text
    from ..models.header_only import note
    return f"{text}\n{note(summary['source'])}"


def _reference_verdicts(summaries: list[dict], spec: str) -> list[dict]:
    from ..references.pre_check import check_pre, original_fingerprint

    original = original_fingerprint(spec)  # one converter run, whatever the number of files
    return [check_pre(s, original) for s in summaries]
