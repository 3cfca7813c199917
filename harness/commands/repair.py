"""Repair a GGUF's tokenizer keys from its original: each cause a key fixes, written; the check run again.

    python -m harness repair X.gguf --reference hf:DIR --out X.fixed.gguf [--vocab-words] [--json FILE]
    python -m harness repair X.gguf --reference hf:DIR --out X.fixed.gguf --corpus my.jsonl --no-default-corpora

The three-way check (llama.cpp on X.gguf against the original, on the default
cases of `run`) finds the cases that differ; each is explained by experiment
(the smallest change that makes it agree: docs/repair.md). Every cause that a
GGUF key fixes exactly (tokenizer.ggml.pre, add_space_prefix, token types,
add_bos_token / add_eos_token and the special ids) is written into
X.fixed.gguf: every other key unchanged, the tensor data copied byte for
byte, the alignment kept. A cause no key carries, or a value the original does
not hold, is named and not applied. The repaired file is loaded by llama.cpp
and by our engine and checked again, three ways; the before/after counts per
cause are printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import SetupError

# What `repair` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "the repaired file agrees three ways on every case checked (or the input already did: nothing is written)",
    1: "differences remain (before/after shows which causes), or no key fix applies (nothing is written), or the "
       "file that stands at the end holds a NaN or an infinite value (named by key and index: a finding about "
       "the file)",
    2: "bad input (a file that is not a GGUF, a bad --reference, --out the same file as the input)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("gguf", type=Path, metavar="X.gguf")
    parser.add_argument("--reference", required=True, metavar="hf:PATH|spm:PATH",
                        help="the original tokenizer the GGUF was converted from")
    parser.add_argument("--out", required=True, type=Path, metavar="X.fixed.gguf", help="the repaired file")
    parser.add_argument("--corpus", action="append", default=[], type=Path, metavar="FILE",
                        help="a JSONL or .inp corpus, in addition to the default cases (repeatable)")
    parser.add_argument("--no-default-corpora", dest="default_corpora", action="store_false",
                        help="only the --corpus files (and --vocab-words)")
    parser.add_argument("--vocab-words", action="store_true",
                        help="also check every vocabulary word's text on its own (slow on a large vocabulary)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="llama.cpp workers (default 1)")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds per request (default 60)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write what was done as JSON")


def run(args: argparse.Namespace) -> int:
    from tokenizer.gguf.reader import read

    from ..files.atomic import check_output_path, write_text_atomic
    from ..models.gguf_rewrite import check_rewritable
    from ..references.specs import parse
    from ..runs.repair import repair

    if not args.gguf.is_file():
        raise SetupError(f"{args.gguf}: no such file")
    if args.out.resolve() == args.gguf.resolve():
        raise SetupError(f"--out {args.out}: the repaired file must be another file than {args.gguf}")
    check_output_path(args.out, "--out")  # a device, a FIFO, a folder: refused before any work
    if args.json:
        check_output_path(args.json, "--json")
        if args.json.resolve() in (args.gguf.resolve(), args.out.resolve()):
            raise SetupError(f"--json {args.json}: must be another file than the input and --out")
    check_rewritable(read(args.gguf), args.gguf)  # not a GGUF, or padded past its size: exit 2, before any work
    _loads_in_ours(args.gguf)
    ref = parse(args.reference)
    if ref.kind not in ("hf", "spm"):
        raise SetupError(f"--reference {args.reference}: repair reads hf: or spm: originals, not {ref.kind}:")
    done = repair(args.gguf, args.reference, args.out, vocab_words=args.vocab_words, corpora=args.corpus,
                  default=args.default_corpora, jobs=args.jobs, timeout=args.timeout,
                  log=lambda line: print(line, file=sys.stderr))
    print(render(done.as_dict(), args.gguf, args.out))
    if args.json:
        write_text_atomic(args.json, json.dumps(done.as_dict(), indent=2, ensure_ascii=False) + "\n", "--json")
    final = done.after or done.before
    clean = not final.conversion and not final.parity and not final.new_failures(done.before)
    return 0 if clean and not done.left_non_finite else 1


def _loads_in_ours(gguf: Path) -> None:
    """`SetupError` naming what our engine refuses in `gguf` (a NaN score: llama.cpp's merge order is undefined
    then), before any work: the check runs our engine beside llama.cpp, and the causes read its vocabulary."""
    from tokenizer import Tokenizer, UnsupportedVocab
    from tokenizer.gguf.reader import read

    from ..models.summary import non_finite, non_finite_line

    try:
        Tokenizer.from_gguf(gguf)
    except UnsupportedVocab as exc:
        found = "; ".join(non_finite_line(e) for e in non_finite(read(gguf).metadata))
        raise SetupError(f"{gguf}: {exc}" + (f" ({found})" if found else "")
                         + "; not repaired: the check runs our engine on the file") from None


def render(done: dict, gguf: Path, out: Path) -> str:
    """The before/after table per cause, the fixes applied and not, and the loads."""
    from ..models.summary import non_finite_line

    before, after = done["before"], done["after"]
    lines = [f"finding about the file: {gguf}: {non_finite_line(e)}" for e in done["non_finite"]["before"]]
    lines += [f"before: {before['conversion_differ']} of {before['compared']} cases differ (llama.cpp vs original)"]
    lines += ["", f"{'cause':40} {'before':>7} {'after':>7}"]
    for row in done["per_cause"]:
        shown = "-" if row["after"] is None else str(row["after"])
        lines.append(f"{row['cause'][:40]:40} {row['before']:>7} {shown:>7}")
    lines.append("")
    for fix in done["applied"]:
        lines.append(f"applied: {fix['name']}: {fix['what']} ({', '.join(fix['keys'])})")
    for fix in done["not_applied"]:
        lines.append(f"not applied: {fix['name']}: {fix['why']}" + (f" ({fix['what']})" if fix["what"] else ""))
    left = done["non_finite"]["before"] if after is None else done["non_finite"]["after"]
    if after is None and not before["conversion_differ"] and not before["parity_differ"]:
        lines.append("nothing to repair: llama.cpp and the original agree on every case; nothing written"
                     + (f" (the file's {len(left)} key(s) with NaN or infinite values stay: above)" if left else ""))
        return "\n".join(lines)
    if after is None:
        lines.append(f"no key fix applies: nothing written ({gguf} unchanged)"
                     + (f"; it holds NaN or infinite values in {', '.join(e['key'] for e in left)} (above)"
                        if left else ""))
        return "\n".join(lines)
    lines.append(f"wrote {out}: keys changed {', '.join(done['changed_keys'])}; every other key and the tensor "
                 "data as they were")
    for side, state in done["loads"].items():
        lines.append(f"{side}: {state}")
    lines.append(f"after: {after['conversion_differ']} of {after['compared']} cases differ (llama.cpp vs original); "
                 f"ours vs llama.cpp: {after['parity_differ']} differ")
    lines += [f"finding about the file: {out}: {non_finite_line(e)}" for e in left]
    return "\n".join(lines)
