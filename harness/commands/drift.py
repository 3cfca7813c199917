"""Replay golden files against the installed llama.cpp and report every changed case.

Each golden file names its GGUF (file name and sha256); the file is looked up
in --models-dir folders, the shipped-vocabulary cache, the synthetic-vocabulary
cache and the golden folder, or resolved by name (`harness synth` names).
Every recorded case is run again in crash-isolated workers, the vocabulary
record is re-read, and each difference is printed on one line, with the case's
text and both sides' pieces under the first changed cases.  A golden that cannot be read, or
whose GGUF is missing or differs, is skipped with a one-line reason.  A worker death that
a fresh worker does not repeat is a harness fault, printed as such and never
reported as a change (harness.oracle.workers).

    python -m harness drift                  # all of golden/
    python -m harness drift --golden golden/ --model llama-spm --jobs 2
    python -m harness drift --shard 2/4 --report reports/drift-2   # shard 2 of 4; merge-reports folds them

With --shard K/N only shard K of the goldens' work is replayed (the partition of
`compare --shard`: per golden its own unit, then one per case; docs/sharding.md);
its verdict line names the shard, and merge-reports folds the parts' drift.json
back into the unsharded result.

--report DIR writes drift.json (per golden: both llama.cpp builds, the change lines, and
the changed cases in structure: input, flag pair, before and after ids with their pieces,
`harness.golden.drift`) and its page, drift.html (`harness.report.drift_page`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..files.atomic import check_output_folder
from ..golden import drift
from ..golden import files as goldens
from ..golden.identity import mismatch
from ..inputs import documents
from ..models.paths import resolve
from ..models.shipped import models_dir, short_name
from ..models.synth import synthetic_dir
from ..oracle import worker_limits
from ..report import drift_page
from ..runs import shard as sharding
from .record import print_faults, record_model

# What `drift` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "every golden was replayed, and nothing changed",
    1: "a recorded case or vocabulary record changed against the installed llama.cpp",
    2: "nothing changed, but a golden could not be read or its GGUF was missing or differed (skipped, each "
       "with a one-line reason)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", type=Path, default=goldens.GOLDEN_DIR, metavar="DIR",
                        help="folder of golden files (default: golden/)")
    parser.add_argument("--model", action="append", metavar="NAME",
                        help="only the golden of this vocabulary (short name or GGUF file name; repeatable)")
    parser.add_argument("--models-dir", action="append", type=Path, metavar="DIR",
                        help="where to find the GGUF files the goldens name (repeatable)")
    parser.add_argument("--report", type=Path, metavar="DIR",
                        help="also write drift.json here (merge-reports folds --shard parts of it)")
    worker_limits.add_options(parser)  # --jobs --force-jobs --timeout --memory-limit
    parser.add_argument("--verbose", action="store_true", help="let llama.cpp's log through")
    sharding.add_option(parser)


def run(args: argparse.Namespace) -> int:
    limits = worker_limits.from_args(args)
    if args.report is not None:  # before any golden is replayed
        check_output_folder(args.report, "--report", files=OUTPUTS)
    if not args.golden.is_dir():
        raise SetupError(f"no golden folder {args.golden}; record one with: python -m harness record")
    files = [f for f in goldens.golden_files(args.golden) if _wanted(f, args.model)]
    if not files:
        raise SetupError(f"no golden files to replay in {args.golden}")
    part = _shard(files, args.shard)
    search = list(args.models_dir or []) + [models_dir(), synthetic_dir(), args.golden]
    entries = []
    for file in files:
        if part is None or part.items(file.name):
            entries.append(_replay(file, search, limits, args, part))
    data = drift.result(str(args.golden), [e for e in entries if e is not None], part.meta() if part else None)
    if args.report is not None:
        write_outputs(data, args.report)
        print(f"report: {args.report / drift.FILE}, {args.report / drift_page.FILE}")
    print(drift.verdict_line(data))
    return drift.exit_status(data)


OUTPUTS = (drift.FILE, drift_page.FILE)


def write_outputs(data: dict[str, Any], out: Path) -> Path:
    """drift.json and drift.html in `out` (each whole or not at all); the path of drift.json."""
    path = drift.write(data, out)
    drift_page.write(data, drift.verdict_line(data), out)
    return path


def _replay(file: Path, search: list[Path], limits: worker_limits.Limits, args: argparse.Namespace,
            part: sharding.Partition | None) -> dict[str, Any] | None:
    """One golden replayed (with `part`, only that shard's cases of it), printed and returned as an entry.

    A golden that cannot be replayed is skipped with a one-line reason, given by the shard that owns
    the golden as a whole (its `MODEL` unit); another shard holding some of its cases skips it silently.
    """
    owner = part is None or part.owns(file.name)
    try:
        old = goldens.load_golden(file)
        path = find_gguf(old["gguf"], search)
        if part is not None:
            old["cases"] = [c for c in old["cases"] if part.owns(file.name, str(c["id"]))]
        cases = replay_inputs(old["cases"], path)  # the committed cases stay as recorded (no text attached)
    except (SetupError, goldens.GoldenError, documents.DocumentError) as exc:
        if getattr(args, "debug", False):
            raise  # --debug: the traceback, as for any other input error
        if not owner:
            return None
        print(f"error: {file.name}: skipped: {exc}", file=sys.stderr)  # the others are still replayed
        return drift.entry(file.name, skipped=str(exc))
    faults: list[dict[str, Any]] = []
    new = record_model(path, cases, jobs=limits.jobs, timeout=limits.timeout,
                       memory_limit=limits.memory, verbose=args.verbose, faults=faults)
    print_faults(file.name, faults)
    lines = goldens.diff_goldens(old, new, model=owner)
    _report_build(file.name, old["llama"], new["llama"])
    changed, cut = drift.case_changes(old, new)
    _spell(path, changed, new, limits)
    for line in lines:
        print(f"{file.name}: {line}")
    for line in shown_changes(changed):
        print(f"{file.name}: {line}")
    print(f"{file.name}: {len(cases)} cases, {len(lines)} change(s)")
    builds = [old["llama"], new["llama"]] if old["llama"] != new["llama"] else None
    return drift.entry(file.name, cases=len(cases), changes=lines, faults=faults, builds=builds,
                       recorded=old["llama"], live=new["llama"], changed_cases=changed, cut=cut)


SHOWN = 5  # changed cases per golden shown with their text and pieces in the terminal


def _spell(path: Path, changed: list[dict[str, Any]], new: dict[str, Any], limits: worker_limits.Limits) -> None:
    """The described id lists given their pieces, asked of llama.cpp (the live build's table, for both sides);
    a llama.cpp that cannot answer leaves them unspelled, said on one line."""
    from ..compare.diff import visible
    from ..oracle.session import OracleCrash, OracleRefusal, OracleSession

    ids = drift.ids_to_spell(changed, int((new.get("vocab") or {}).get("n_tokens") or 0))
    if not ids:
        return
    try:
        with OracleSession(path, timeout=limits.timeout, memory_limit=limits.memory) as session:
            pieces = session.call("pieces_of", ids)
    except (OracleCrash, OracleRefusal) as exc:
        reason = (str(exc).strip().splitlines() or ["no answer"])[0]
        print(f"{path.name}: the changed cases' pieces could not be read: {reason}")
        return
    drift.spell(changed, {token: visible(piece) for token, piece in zip(ids, pieces, strict=True)})


def shown_changes(changed: list[dict[str, Any]], first: int = SHOWN) -> list[str]:
    """The first changed cases for the terminal: the input, then each id change's pieces before and after."""
    from ..compare.diff import visible

    out = []
    for case in changed[:first]:
        shown = f"document of {case['input_bytes']:,} bytes" if case.get("document") else \
            f"bytes {case['bytes']}" if "bytes" in case else repr(visible(case["text"]))
        out.append(f"  case {case['case_id']}: input {shown[:120]}")
        for change in case["changes"]:
            if change["what"] == "ids":
                before, after = (" ".join(change[s].get("pieces") or map(str, change[s]["ids"]))
                                 for s in ("before", "after"))
                out.append(f"    [{change['flags']}] from token {change['start']}: "
                           f"{before[:100]} -> {after[:100]}")
    if len(changed) > first:
        out.append(f"  ... and {len(changed) - first} more changed case(s) (drift.json, drift.html)")
    return out


def _shard(files: list[Path], text: str | None) -> sharding.Partition | None:
    """`--shard K/N` over the goldens' work, as `compare --shard` cuts it: per golden file its `MODEL` unit
    (load, tokenizer metadata, vocabulary record, a skip), then one unit per recorded case."""
    shard = sharding.from_text(text)
    if shard is None:
        return None
    units: list[sharding.Unit] = []
    for file in files:
        try:
            ids = [str(c["id"]) for c in goldens.load_golden(file, check=False)["cases"]]
        except goldens.GoldenError:
            ids = []  # unreadable: the shard owning its MODEL unit reports it skipped
        units += [sharding.Unit(file.name, sharding.MODEL), *(sharding.Unit(file.name, i) for i in ids)]
    part = sharding.partition("drift", units, shard)
    print(f"shard {shard}: {part.owned_weight} of {part.weight} work units (cases and goldens) of "
          f"{len(files)} golden file(s)")
    return part


def _wanted(file: Path, names: list[str] | None) -> bool:
    if not names:
        return True
    stem = file.name.split(".json")[0]
    return any(Path(n).name.removesuffix(".gguf") in (stem, short_name(stem)) for n in names)


def _report_build(name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    if old != new:
        print(f"{name}: recorded with {old}, replayed with {new}")


def replay_inputs(cases: list[dict[str, Any]], model: Path) -> list[dict[str, Any]]:
    """The inputs to record a golden's cases again: each case's input, a document's text rebuilt.

    The golden's own cases stay as recorded: a document's record holds its identity and
    digest but no text, as the one recorded again does, so the two compare as they are.
    `DocumentError` when a document built now is not the recorded one.
    """
    return [goldens.case_input_of(c) for c in documents.attach_inputs(cases, model)]


def find_gguf(info: dict[str, Any], folders: list[Path]) -> Path:
    """The GGUF file a golden was recorded from, checked by sha256 (`SetupError` if absent or different)."""
    candidates = [Path(folder) / info["file"] for folder in folders]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        try:  # a shipped or synthetic name: resolve() says how to fetch or build it
            path = resolve(short_name(info["file"]))
        except SetupError as exc:
            where = ", ".join(str(f) for f in folders)
            raise SetupError(f"cannot find {info['file']} (looked in {where}): {exc}") from None
    reason = mismatch(info, path)
    if reason is not None:
        raise SetupError(f"{path} is not the file the golden was recorded from: {reason}")
    return path.resolve()  # absolute: the oracle's workers run in another directory
