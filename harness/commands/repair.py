"""Repair a GGUF's tokenizer keys from its original: each cause a key fixes, written, no layer made worse.

    python -m harness repair X.gguf --reference hf:DIR --out X.fixed.gguf [--vocab-words] [--json FILE]
    python -m harness repair X.gguf --reference hf:DIR --out X.fixed.gguf --corpus my.jsonl --no-default-corpora
    python -m harness repair X.gguf --reference tekken:DIR --out X.fixed.gguf [--reference-arg add_bos=true]

The three-way check (llama.cpp on X.gguf against the original, on the default
cases of `run`) finds the cases that differ; each is explained by experiment
(the smallest change that makes it agree: docs/repair.md). Every layer is
measured (ids, detokenize, pieces, specials, end-of-generation, and the
messages when the original has a chat template), and for each cause the
fixes a GGUF key makes exactly (tokenizer.ggml.pre, add_space_prefix, token
types, add_bos_token / add_eos_token and the special ids) are tried in turn:
the first that makes the ids better and no layer worse is written into
X.fixed.gguf (every other key unchanged, the tensor data copied byte for
byte, the alignment kept). A fix that makes a layer worse is named with the
layer and the counts and not written (`--allow-regression` writes it). A
cause no key carries, or a value the original does not hold, is named and not
applied. The repaired file is loaded by llama.cpp and by our engine and
measured again; the before/after counts per layer and per cause are printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import SetupError

# What `repair` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "the repaired file agrees three ways on every case checked and every layer measured (or the input already "
       "did: nothing is written)",
    1: "differences remain in the ids or in any layer (before/after shows which causes and layers), or no key "
       "fix applies or every one makes a layer worse (nothing is written), or a fix written with "
       "--allow-regression made a layer worse, or the file that stands at the end holds a NaN or an infinite "
       "value (named by key and index: a finding about the file)",
    2: "bad input (a file that is not a GGUF, a bad --reference, --out the same file as the input)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("gguf", type=Path, metavar="X.gguf")
    parser.add_argument("--reference", required=True, metavar="hf:PATH|spm:PATH|tekken:PATH",
                        help="the original tokenizer the GGUF was converted from")
    parser.add_argument("--reference-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="what the original's file cannot say itself, as for run (add_bos=true ...; repeatable)")
    parser.add_argument("--allow-regression", action="store_true",
                        help="write a fix that makes the ids better though it makes another layer worse (said so)")
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
    from ..runs.repair import Settings, repair
    from ..runs.repair_layers import worse

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

    def log(line: str) -> None:
        print(line, file=sys.stderr)
    settings = Settings(jobs=args.jobs, timeout=args.timeout, args=_reference_args(args.reference_arg),
                        allow_regression=args.allow_regression, messages=_messages(args.reference, ref.kind, log),
                        log=log)
    done = repair(args.gguf, args.reference, args.out, vocab_words=args.vocab_words, corpora=args.corpus,
                  default=args.default_corpora, settings=settings)
    print(render(done.as_dict(), args.gguf, args.out))
    if args.json:
        write_text_atomic(args.json, json.dumps(done.as_dict(), indent=2, ensure_ascii=False) + "\n", "--json")
    final = done.after or done.before
    clean = not final.conversion and not final.parity and not final.new_failures(done.before) \
        and not any(layer.measured and layer.differ for name, layer in final.layers.items() if name != "ids")
    return 0 if clean and not done.left_non_finite and not worse(done.before, final) else 1


def _reference_args(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SetupError(f"--reference-arg {pair!r}: expected KEY=VALUE")
        out[key] = value
    return out


def _messages(reference: str, kind: str, log: Any) -> Any:
    """The messages layer's check for `repair` (`harness.chat.three_way`, bounded like `run`'s): the
    conversations the original's chat template renders otherwise than llama.cpp's chat path on the file; a
    layer not measured, saying why, where the original has no template or the check cannot run here."""
    from ..runs.repair_layers import Layer

    if kind != "hf":
        return lambda gguf: Layer(not_measured=f"a {kind}: original has no chat template")
    from ..chat import helper_build
    from ..chat.original import folder_of, original_templates
    from ..chat.transformers_side import missing

    folder = folder_of(reference)
    if not original_templates(folder):
        return lambda gguf: Layer(not_measured="the original has no chat template")
    why = missing() or ("" if helper_build.helper_path().is_file() else
                        "the chat helper is not built: python -m harness chat --build-helper")
    if why:
        return lambda gguf: Layer(not_measured=why)
    return lambda gguf: _message_layer(gguf, folder, log)


def _message_layer(gguf: Path, folder: Path, log: Any) -> Any:
    from collections import Counter

    from ..chat import message_classes as mc
    from ..chat import three_way
    from ..chat.oracle import ChatOracle
    from ..runs.repair_layers import Layer

    log(f"  messages: the original's chat template against llama.cpp's chat path ({gguf.name})")
    with ChatOracle() as oracle:
        block = three_way.check(gguf, folder, oracle=oracle, log=lambda s: None)
    if not block.checked:
        return Layer(not_measured="no template both the GGUF and the original have"
                     + (f" ({len(block.templates)} template finding(s))" if block.templates else ""))
    differ: Counter[str] = Counter({k: n for k, n in block.classes.items() if k not in (mc.AGREE, mc.NOT_APPLICABLE)})
    items = {f"template {t['name'] or 'default'}: {t['class']}" for t in block.templates}
    items |= {f"conversation {key}" for key in block.differ_keys}  # by conversation: a class change is no new one
    checked = block.cases - block.classes.get(mc.NOT_APPLICABLE, 0) + len(block.templates)
    return Layer(checked, frozenset(items), tuple(f"{cls}: {n}" for cls, n in differ.most_common()))


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
    """The before/after tables per layer and per cause, the fixes tried, applied and not, and the loads."""
    from ..models.summary import non_finite_line

    before, after = done["before"], done["after"]
    lines = [f"finding about the file: {gguf}: {non_finite_line(e)}" for e in done["non_finite"]["before"]]
    lines += [f"before: {before['conversion_differ']} of {before['compared']} cases differ (llama.cpp vs original)"]
    lines += ["", *layer_table(done["layers"])]
    lines += ["", f"{'cause':40} {'before':>7} {'after':>7}"]
    for row in done["per_cause"]:
        shown = "-" if row["after"] is None else str(row["after"])
        lines.append(f"{row['cause'][:40]:40} {row['before']:>7} {shown:>7}")
    lines.append("")
    for trial in done["trials"]:
        lines.append(f"tried: {'+'.join(trial['set'])} for cause {trial['cause']} ({trial['cases']} case(s), "
                     f"{trial['cases_left']} left): {trial['verdict']}")
    for fix in done["applied"]:
        lines.append(f"applied: {fix['name']}: {fix['what']} ({', '.join(fix['keys'])})")
    for fix in done["not_applied"]:
        lines.append(f"not applied: {fix['name']}: {fix['why']}" + (f" ({fix['what']})" if fix["what"] else ""))
    left = done["non_finite"]["before"] if after is None else done["non_finite"]["after"]
    if after is None and not before["conversion_differ"] and not before["parity_differ"]:
        stays = f" (the file's {len(left)} key(s) with NaN or infinite values stay: above)" if left else ""
        layers = layers_differing(done["layers"])
        if layers:  # the ids agree, another layer does not: no key fix is searched for a layer alone
            lines.append(f"llama.cpp and the original give the same ids on every case, but {layers}; no key fix is "
                         f"tried for a layer alone: nothing written{stays}")
        else:
            lines.append(f"nothing to repair: llama.cpp and the original agree on every case and every layer "
                         f"measured; nothing written{stays}")
        return "\n".join(lines)
    if after is None:
        refused = any("makes a layer worse" in fix["why"] for fix in done["not_applied"])
        lines.append(("no key fix applies without making a layer worse" if refused else "no key fix applies")
                     + f": nothing written ({gguf} unchanged)"
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


def layers_differing(rows: list[dict]) -> str:
    """`detokenize 208, pieces 3 differ` from the layer table's rows (after where measured, else before); ''.
    Not the ids: their cases are the causes above, and a case llama.cpp crashes on (a known crash) is no layer's."""
    left = [(row["label"], row["after"] if row["after"] is not None else row["before"]) for row in rows
            if row["layer"] != "ids"]
    left = [(label, n) for label, n in left if n]
    return ", ".join(f"{label} {n:,}" for label, n in left) + " differ" if left else ""


def layer_table(rows: list[dict]) -> list[str]:
    """`layer  before  after  compared`, one line per layer; a layer not measured says why."""
    out = [f"{'layer (items that differ)':26} {'before':>9} {'after':>9} {'compared':>10}"]
    for row in rows:
        if row["before"] is None and row["after"] is None:
            out.append(f"{row['label']:26} not measured: {row['not_measured']}")
            continue
        cells = ["-" if row[k] is None else f"{row[k]:,}" for k in ("before", "after")]
        checked = "" if row["checked"] is None else f"{row['checked']:,}"
        out.append(f"{row['label']:26} {cells[0]:>9} {cells[1]:>9} {checked:>10}")
    return out
