"""Replay golden files against the installed llama.cpp and report every changed case.

Each golden file names its GGUF (file name and sha256); the file is looked up
in --models-dir folders, the shipped-vocabulary cache, the synthetic-vocabulary
cache and the golden folder, or resolved by name (`harness synth` names).
Every recorded case is run again in crash-isolated workers, the vocabulary
record is re-read, and each difference is printed on one line.  Exit status 1
if anything changed; 2 if nothing changed but a golden could not be read or its
GGUF was missing or differed (those goldens are skipped, each with a one-line reason).  A worker death that
a fresh worker does not repeat is a harness fault, printed as such and never
reported as a change (harness.oracle.workers).

    python -m harness drift                  # all of golden/
    python -m harness drift --golden golden/ --model llama-spm --jobs 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..golden import files as goldens
from ..golden.identity import mismatch
from ..inputs import documents
from ..models.paths import resolve
from ..models.shipped import models_dir, short_name
from ..models.synth import synthetic_dir
from ..oracle import worker_limits
from .record import print_faults, record_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", type=Path, default=goldens.GOLDEN_DIR, metavar="DIR",
                        help="folder of golden files (default: golden/)")
    parser.add_argument("--model", action="append", metavar="NAME",
                        help="only the golden of this vocabulary (short name or GGUF file name; repeatable)")
    parser.add_argument("--models-dir", action="append", type=Path, metavar="DIR",
                        help="where to find the GGUF files the goldens name (repeatable)")
    worker_limits.add_options(parser)  # --jobs --force-jobs --timeout --memory-limit
    parser.add_argument("--verbose", action="store_true", help="let llama.cpp's log through")


def run(args: argparse.Namespace) -> int:
    limits = worker_limits.from_args(args)
    if not args.golden.is_dir():
        raise SetupError(f"no golden folder {args.golden}; record one with: python -m harness record")
    files = [f for f in goldens.golden_files(args.golden) if _wanted(f, args.model)]
    if not files:
        raise SetupError(f"no golden files to replay in {args.golden}")
    search = list(args.models_dir or []) + [models_dir(), synthetic_dir(), args.golden]
    changed = skipped = 0
    for file in files:
        try:
            old = goldens.load_golden(file)
            path = find_gguf(old["gguf"], search)
            cases = replay_inputs(old["cases"], path)
        except (SetupError, goldens.GoldenError, documents.DocumentError) as exc:
            if getattr(args, "debug", False):
                raise  # --debug: the traceback, as for any other input error
            print(f"error: {file.name}: skipped: {exc}", file=sys.stderr)  # the others are still replayed
            skipped += 1
            continue
        faults: list[dict[str, Any]] = []
        new = record_model(path, cases, jobs=limits.jobs, timeout=limits.timeout,
                           memory_limit=limits.memory, verbose=args.verbose, faults=faults)
        print_faults(file.name, faults)
        lines = goldens.diff_goldens(old, new)
        _report_build(file.name, old["llama"], new["llama"])
        for line in lines:
            print(f"{file.name}: {line}")
        print(f"{file.name}: {len(cases)} cases, {len(lines)} change(s)")
        changed += bool(lines)
    replayed = len(files) - skipped
    if changed:
        print(f"drift: behaviour changed in {changed} of {replayed} golden file(s) replayed")
        return 1
    print(f"drift: no change in {replayed} golden file(s)" + (f"; {skipped} skipped" if skipped else ""))
    return 2 if skipped else 0


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
