"""Fold several report.json files (one per nox session or CI job) into one summary and HTML page.

    python -m harness merge-reports reports/parity-spm reports/parity-bpe --out reports/all

Each REPORT_DIR is a folder holding report.json (or the file itself). Counts
of a model found in several reports add up. Every oracle crash is judged again
against --known-crashes (default corpora/known_crashes.json; 'none' makes every
crash a finding), so one list applies to all the folded reports. Exit status:
0 when the merged report holds no finding (known crashes are not findings),
1 when it holds any, or an engine flake from a part not run with
--allow-flakes, 2 when a report or the list cannot be read, or when a part
left a model not checked (`harness.compare.verdict`).

Shards (`--shard K/N` reports, `harness.runs.shard`) must come complete: the
reports of one partition must be shards 1..N, each once; overlapping or
missing shards are refused with one line (exit 2). A complete set is folded in
shard order, which gives exactly the unsharded report (timings aside).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import SetupError
from ..oracle import known_crashes
from ..report.folder import ReportDir
from ..runs import shard as sharding


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT_DIR",
                        help="folders holding report.json (or report.json files)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="where the merged report.json and report.html go")
    known_crashes.add_option(parser)


def run(args: argparse.Namespace) -> int:
    from ..compare import verdict
    from ..report import build as reporting

    known = known_crashes.from_args(args)
    try:
        reports = [reporting.load(path) for path in args.reports]
    except ValueError as exc:
        raise SetupError(str(exc)) from None
    ordered = sharding.order(reports, [str(p) for p in args.reports])  # SetupError: shards missing or twice
    paths = [args.reports[i] for i in ordered]
    reports = [reporting.reclassify(reports[i], known) for i in ordered]
    stopped = [str(p) for p, r in zip(paths, reports, strict=True) if r.get("meta", {}).get("interrupted")]
    flaky = [r for r in reports if r.get("summary", {}).get("engine_flakes")]
    # a part's flakes fail as they did; with no flake at all, nothing was allowed (the page shows it)
    allow = bool(flaky) and all(r.get("meta", {}).get("allow_flakes") for r in flaky)
    shards = {"shards": sharding.merged_meta(reports)} if sharding.merged_meta(reports) else {}
    merged = reporting.merge(reports, meta={"command": "merge-reports", "known_crashes": known.source,
                                            "merged": [str(p) for p in paths], "allow_flakes": allow, **shards,
                                            **({"interrupted": f"parts {', '.join(stopped)}"} if stopped else {})})
    with ReportDir(args.out) as folder:
        try:
            _, html_path = reporting.write(merged, folder.path)
        except OSError as exc:
            raise SetupError(f"cannot write the report in {folder.path}: {exc.strerror or exc}") from None
    print(reporting.one_line(merged))
    print(f"report: {html_path}")
    return verdict.exit_status(merged)
