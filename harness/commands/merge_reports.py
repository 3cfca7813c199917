"""Fold several report.json files (one per nox session or CI job) into one summary and HTML page.

    python -m harness merge-reports reports/parity-spm reports/parity-bpe --out reports/all

Each REPORT_DIR is a folder holding report.json (or the file itself). Counts
of a model found in several reports add up. Every oracle crash is judged again
against --known-crashes (default harness/data/corpora/known_crashes.json; 'none' makes every
crash a finding), so one list applies to all the folded reports.

Nothing in a part is believed (`harness.runs.merge_parts`, docs/sharding.md "What a part
must be"): each is read within bounds and checked against its kind's schema, its counts
against the entries it carries; the same part twice, parts of two llama.cpp builds and two
runs of the same cases that are not shards of one partition are refused (exit 2, one line).

Shards (`--shard K/N` reports, `harness.runs.shard`) must come complete: the
reports of one partition must be shards 1..N, each once; overlapping or
missing shards are refused with one line (exit 2). A complete set is folded in
shard order, which gives exactly the unsharded report (timings aside).

The other nightly steps' results merge the same way, each into its own file
in --out: `chat --report` parts (messages.json, with messages.html), `selftest`
parts (selftest.json, with selftest.html and selftest.md) and `drift --report`
parts (drift.json, with drift.html). All REPORT_DIRs must then hold the same kind; the exit
status is that command's own on the merged result (docs/sharding.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..files.atomic import check_output_folder, write_text_atomic
from ..oracle import known_crashes
from ..report.folder import ReportDir
from ..runs import merge_parts
from ..runs import shard as sharding
from ..runs.meta import Meta

# What `merge-reports` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "the merged report holds no finding (known crashes are not findings); for chat, selftest and drift "
       "parts, that command's own exit status on the merged result",
    1: "it holds one, or an engine flake from a part not run with --allow-flakes",
    2: "a report or the list cannot be read, a part is refused (see above), or a part left a model not "
       "checked (harness.compare.verdict)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT_DIR",
                        help="folders holding report.json (or report.json files)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="where the merged report.json and report.html go")
    known_crashes.add_option(parser)


# The other steps' result files, in the order a folder is looked in (report.json comes first:
# a `run` report folder also holds a messages.json, which is part of its report.json).
STEP_FILES = ("messages.json", "selftest.json", "drift.json")


def run(args: argparse.Namespace) -> int:
    kinds = {_kind(path) for path in args.reports}
    if len(kinds) > 1:
        raise SetupError(f"merge-reports: the folders hold different results ({', '.join(sorted(kinds))}): "
                         "merge each kind on its own")
    kind = kinds.pop()
    parts = [merge_parts.read(path, kind) for path in args.reports]  # each checked alone, then together
    merge_parts.check_distinct(parts)
    if kind != "report.json":
        return _merge_step(kind, parts, args)
    from ..compare import expected, verdict
    from ..report import build as reporting

    merge_parts.check_builds(parts)
    ordered = sharding.order([p.data for p in parts], [p.name for p in parts])  # shards missing or twice
    parts = [parts[i] for i in ordered]
    merge_parts.check_overlap(parts)
    known = known_crashes.from_args(args)
    paths = [p.name for p in parts]
    try:  # one --expected-differences list judged over the parts, or none
        expected.merged_description([p.data.get("meta") or {} for p in parts])
    except ValueError as exc:
        raise SetupError(str(exc)) from None
    reports = [reporting.reclassify(p.data, known) for p in parts]
    stopped = [p for p, r in zip(paths, reports, strict=True) if r.get("meta", {}).get("interrupted")]
    flaky = [r for r in reports if r.get("summary", {}).get("engine_flakes")]
    # a part's flakes fail as they did; with no flake at all, nothing was allowed (the page shows it)
    allow = bool(flaky) and all(r.get("meta", {}).get("allow_flakes") for r in flaky)
    shards = {"shards": sharding.merged_meta(reports)} if sharding.merged_meta(reports) else {}
    meta = {"command": "merge-reports", "known_crashes": known.source, "merged": paths, "allow_flakes": allow,
            **shards, **({"interrupted": f"parts {', '.join(stopped)}"} if stopped else {})}
    # commit, date, host (harness.runs.meta); the parts keep their own builds (check_builds: one llama.cpp)
    merged = reporting.merge(reports, meta=Meta(background=False).finish(meta, llama=False))
    with ReportDir(args.out, option="--out") as folder:
        try:
            _, html_path = reporting.write(merged, folder.path)
        except OSError as exc:
            raise SetupError(f"cannot write the report in {folder.path}: {exc.strerror or exc}") from None
    print(reporting.one_line(merged))
    print(f"report: {html_path}")
    return verdict.exit_status(merged)


def _kind(path: Path) -> str:
    """Which result `path` holds: report.json, else one of `STEP_FILES` (report.json when none: its error)."""
    if not path.is_dir():
        return path.name if path.name in STEP_FILES else "report.json"
    return next((name for name in ("report.json", *STEP_FILES) if (path / name).is_file()), "report.json")


def _merge_step(kind: str, parts: list[merge_parts.Part], args: argparse.Namespace) -> int:
    """Merge chat, selftest or drift results: complete shards folded in shard order, unsharded parts in place."""
    records = [{"meta": {"shard": part.data.get("shard")}} for part in parts]
    parts = [parts[i] for i in sharding.order(records, [p.name for p in parts])]
    if kind == "drift.json":
        merge_parts.check_drift_overlap(parts)
    shards = sharding.merged_meta([{"meta": {"shard": part.data.get("shard")}} for part in parts])
    check_output_folder(args.out, "--out", files=STEP_OUTPUTS[kind])  # before any file is written
    args.out.mkdir(parents=True, exist_ok=True)
    return MERGES[kind]([p.data for p in parts], [p.name for p in parts], shards, args.out)


def _merge_chat(parts: list[dict[str, Any]], names: list[str], shards: list[dict], out: Path) -> int:
    from ..chat import run as chat_run
    from ..report.messages import write
    for part, name in zip(parts, names, strict=True):
        if part.get("three_way"):  # its verdict is not the two-way one; `chat --shard` refuses it too
            raise SetupError(f"{name}: a three-way chat check (--reference, --real): merge-reports folds "
                             "two-way chat results only")
    data, lines = chat_run.merge(parts)
    data = {**data, "merged": names, "shards": shards, "meta": Meta(background=False).finish(
        {"command": "merge-reports"}, llama=False)}
    page = write(data, lines, out)
    for line in lines:
        print(line)
    print(f"report: {page}")
    if data["findings"] or data["oracle_crashes"]:
        return 1
    if data["not_asked"] or data["deadline_passed"] or data["interrupted"]:  # not all was checked: no pass
        print("error: not every case was checked (a part was interrupted, or left cases not asked)", file=sys.stderr)
        return 2
    return 0


def _merge_selftest(parts: list[dict[str, Any]], names: list[str], shards: list[dict], out: Path) -> int:
    from ..selftest import report as selftest_report
    from ..selftest.run import write_json
    from .selftest import verdict
    try:
        merged = selftest_report.merge(parts, names)
    except ValueError as exc:
        raise SetupError(str(exc)) from None
    merged = {**merged, "merged": names, "shards": shards}
    write_json(out / "selftest.json", merged)
    write_text_atomic(out / "selftest.html", selftest_report.html_page(merged), "--out")
    write_text_atomic(out / "selftest.md", selftest_report.markdown(merged), "--out")
    print(selftest_report.text_table(merged))
    if merged.get("baseline_differs"):
        print(f"the parts' baselines differ ({', '.join(merged['baseline_differs'])}): each judged its "
              "mutants on its own; the merged report keeps the first's")
    print(f"report: {out / 'selftest.html'}")
    return verdict(merged)


def _merge_drift(parts: list[dict[str, Any]], names: list[str], shards: list[dict], out: Path) -> int:
    from ..golden import drift
    from .drift import write_outputs
    merged = {**drift.merge(parts), "merged": names, "shards": shards}
    for item in merged["goldens"]:
        if item["skipped"]:
            print(f"{item['file']}: skipped: {item['skipped']}")
        for line in item["changes"]:
            print(f"{item['file']}: {line}")
    path = write_outputs(merged, out)  # drift.json and drift.html
    print(drift.verdict_line(merged))
    print(f"report: {path}")
    return drift.exit_status(merged)


STEP_OUTPUTS = {"messages.json": ("messages.json", "messages.html"),
                "selftest.json": ("selftest.json", "selftest.html", "selftest.md"),
                "drift.json": ("drift.json", "drift.html")}
MERGES: dict[str, Callable[[list[dict[str, Any]], list[str], list[dict], Path], int]] = {
    "messages.json": _merge_chat, "selftest.json": _merge_selftest, "drift.json": _merge_drift}
