"""Compare two reports offline by difference signature: new, fixed, unchanged, not re-checked.

    python -m harness diff reports/main reports/pr          # A, B: report.json (or messages.json) or their folders
    python -m harness diff main/report.json pr/report.json --json

A difference of B that A does not have is new; one of both is unchanged. A difference of A that B
does not show is fixed only when B checked its representative input again and compared it: B was
run with `--baseline A` (or a baseline with the same representative input), and its report's
`baseline` block says so; otherwise it is "not re-checked", since a case B did not check has not
passed (docs/differences.md, "Two runs compared"). Each report is read as `--baseline` reads one
(within bounds, checked like a `merge-reports` part).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import EXIT_FOUND, EXIT_OK

# What `diff` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "B has no new difference (those A has too are known to A, set aside as a known crash is)",
    1: "B has a difference A does not have",
    2: "a report cannot be read",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", type=Path, metavar="A", help="the earlier report (report.json, messages.json or a folder)")
    parser.add_argument("b", type=Path, metavar="B", help="the later report, compared with A")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON (the baseline block's shape)")


def compare(a: Any, b: Any) -> dict[str, Any]:
    """The comparison of B against A (two `harness.runs.baseline.Baseline`s): the `baseline` block's shape."""
    from ..report import baseline as sorting

    again = b.rechecked()
    rechecked: dict[str, dict[str, Any]] = {}
    reasons: dict[str, str] = {}
    for record in a.records + a.chat_records:
        sig = record["id"]
        digest = a.digest(sig)
        if sig in again and again[sig] == digest:
            rechecked[sig] = {"input": digest} if digest else {}
        elif record.get("layer") != "chat" and record.get("model") not in b.models:
            reasons[sig] = f"model {record.get('model')} was not checked in B"
        else:
            reasons[sig] = "B did not check its input again (B was not run with --baseline A)"
    block = sorting.sort(a.records + a.chat_records, b.records + b.chat_records, rechecked, reasons)
    return {"report": str(a.path), "sha256": a.sha256, "meta": sorting.identity(a.meta), "run": str(b.path),
            "run_meta": sorting.identity(b.meta), **block}


def run(args: argparse.Namespace) -> int:
    from ..report import baseline as sorting
    from ..runs.baseline import Baseline

    a, b = Baseline.read(args.a), Baseline.read(args.b)
    block = compare(a, b)
    if args.json:
        print(json.dumps(block, indent=1, ensure_ascii=False))
    else:
        print(f"B: {b.path}")
        for line in sorting.lines(block):
            print(line)
    return EXIT_FOUND if block["counts"]["new"] else EXIT_OK
