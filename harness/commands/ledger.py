"""Fold one night's reports into the nightly's ledger of differences: first seen, last seen, fixed on.

    python -m harness ledger reports/nightly reports/nightly/real --ledger reports/nightly/ledger.jsonl \
        --night 2026-12-03 --index

Each REPORT_DIR is a folder holding report.json (or the file), read as merge-reports reads a part
(bounded, checked against its schema and counts). Every difference they show is seen that night;
an open difference they do not show is fixed that night only when they checked its model (a model
not checked leaves it open). The ledger (JSON Lines, `harness.report.ledger`) is read within bounds,
updated under a lock beside it, and replaced atomically; a missing ledger starts a new one. The
page, ledger.html beside the ledger (or --page), shows what is new tonight, what is open and since
when, and what was fixed tonight; --index also writes index.html in the page's folder, linking
every page there (report.html, ledger.html, drift/drift.html, ...).

--night defaults to today (UTC); a night earlier than the ledger's last is refused, the same night
again changes no count.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from pathlib import Path

from ..files.atomic import check_output_path, locked, write_text_atomic
from ..report import ledger as ledgers
from ..runs import merge_parts

# `ledger` records, the reports' own commands give the verdict: it uses 0 and 1 otherwise than the README's table
# (whose "Exit codes" section says so); harness.cli.exit_help prints these in their place.
EXIT_INSTEAD = {
    0: "the night was folded into the ledger, whatever differences it holds (the reports' own commands gave "
       "their verdict)",
    1: "not used",
}
EXIT_STATUS = {2: "a report or the ledger cannot be read"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT_DIR",
                        help="the night's report folders (or report.json files), e.g. the merged nightly report")
    parser.add_argument("--ledger", type=Path, required=True, metavar="FILE",
                        help="the ledger to update (JSON Lines; created when missing)")
    parser.add_argument("--night", default=None, metavar="YYYY-MM-DD", help="the night's date (default: today, UTC)")
    parser.add_argument("--page", type=Path, default=None, metavar="FILE",
                        help=f"where the page goes (default: {ledgers.PAGE} beside the ledger)")
    parser.add_argument("--index", action="store_true",
                        help=f"also write {ledgers.INDEX} in the page's folder, linking every page there")


def run(args: argparse.Namespace) -> int:
    night = ledgers.night_of(args.night or datetime.now(UTC).date().isoformat())
    page_path = args.page or args.ledger.parent / ledgers.PAGE
    check_output_path(args.ledger, "--ledger")  # before anything is read: a FIFO or a device is refused
    check_output_path(page_path, "--page")
    if args.index:
        check_output_path(page_path.parent / ledgers.INDEX, "--index")
    reports = [merge_parts.read(path, "report.json").data for path in args.reports]
    with locked(args.ledger.with_name(args.ledger.name + ".lock")):  # read, fold and write as one step
        ledger = ledgers.read(args.ledger)
        tonight = ledgers.fold(ledger, night, reports)
        ledgers.write(ledger, args.ledger)
    links = [(str(path), _link(path, page_path.parent)) for path in args.reports]
    write_text_atomic(page_path, ledgers.page(ledger, tonight, reports=links), "--page")
    for line in ledgers.terminal_lines(ledger, tonight):
        print(line)
    print(f"ledger: {args.ledger}; page: {page_path}")
    if args.index:
        index = page_path.parent / ledgers.INDEX
        write_text_atomic(index, ledgers.index_page(page_path.parent, night), "--index")
        print(f"index: {index}")
    return 0


def _link(report: Path, folder: Path) -> str:
    """The report's page as a link relative to the ledger's page ("" when it has none)."""
    html = (report if report.is_dir() else report.parent) / "report.html"
    return Path(os.path.relpath(html.resolve(), folder.resolve())).as_posix() if html.is_file() else ""
