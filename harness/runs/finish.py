"""The end of `run` and `compare`: the report written safely, whatever stopped the run.

`run_and_report(work, config, meta)` holds the report folder (checked
writable and locked before any work, `harness.report.folder`), runs `work`
with SIGINT/SIGTERM turned into `Interrupted` (`harness.runs.interrupts`), and
writes report.json and report.html (atomically) from the models finished, so
an interrupted run leaves a partial report marked `interrupted` and exits
130/143. The exit status otherwise comes from `harness.compare.verdict`, and with
`--baseline` (`RunConfig.baseline`, `harness.runs.baseline`) it is 1 only for new
differences. The report's
`meta` (`harness.runs.meta`) is started with the run and finished at its end: commit,
builds, date, duration, seed, host.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..compare import expected, verdict
from ..compare.result import ModelResult
from ..errors import EXIT_FOUND, EXIT_OK, EXIT_USAGE, SetupError
from ..report import baseline, differences
from ..report.folder import ReportDir
from .baseline import Baseline
from .config import RunConfig
from .interrupts import Interrupted, raising_on_signals
from .meta import Meta


def run_and_report(work: Callable[[list[ModelResult]], object], config: RunConfig, meta: dict[str, Any],
                   messages: Callable[[], tuple[dict, bool] | None] | None = None) -> int:
    """Run `work(results)` (it appends each finished ModelResult), then report; the exit status.

    `messages` (`run --messages`) runs after a run that was not stopped and checked something
    (exit 0 or 1): its section goes into the report, which is then written once; a message
    finding makes the exit status 1.
    """
    from ..report import build as reporting

    results: list[ModelResult] = []
    stop: Interrupted | None = None
    with ReportDir(config.report_dir) as folder, Meta.start() as about:
        try:
            with raising_on_signals():
                work(results)
        except Interrupted as exc:
            stop = exc
        meta = {**meta, **reporting.versions(), **({"interrupted": stop.name} if stop else {})}
        report = reporting.build(results, meta=meta, known_crashes=config.known_crashes.describe())
        status = verdict.exit_status(report)
        if messages is not None and stop is None and status in (EXIT_OK, EXIT_FOUND):
            try:
                with raising_on_signals():  # the message layer's children end with the run, however it ends
                    checked = messages()
            except Interrupted as exc:  # the token-level report stands, marked interrupted
                stop, checked = exc, None
                report["meta"]["interrupted"] = exc.name
            except BaseException:  # the run's own results stand: written before the error goes on
                reporting.write(report, folder.path)
                raise
            if checked is not None:
                report["messages"], ok = checked
                status = EXIT_FOUND if not ok else status
        report["meta"] = about.finish(report["meta"], seed=config.seed)
        if config.baseline is not None:
            tally = getattr(config, "tally", None)  # --maxfail: the cases it left unchecked, by model
            status = _against(config.baseline, report, results, status, getattr(tally, "left", None) or {})
        try:
            _, html_path = reporting.write(report, folder.path)
        except OSError as exc:
            raise SetupError(f"cannot write the report in {folder.path}: {exc.strerror or exc} "
                             "(the previous report, if any, is left as it was)") from None
    print(reporting.one_line(report))
    for line in differences.terminal_lines(report) + expected.terminal_lines(report):  # + fixed known differences
        print(line)
    for line in baseline.lines(report["baseline"]) if config.baseline is not None else ():
        print(line)
    print(f"report: {html_path}")
    if stop is not None:
        print(f"{stop}: partial report of the {len(results)} model(s) finished", file=sys.stderr)
        return stop.exit_status
    if status == EXIT_USAGE:
        print(f"error: {verdict.unchecked_line(report) or 'no model was checked'}", file=sys.stderr)
    return status


def _against(base: Baseline, report: dict[str, Any], results: list[ModelResult], status: int,
             left: dict[str, list[str]]) -> int:
    """`--baseline`: the report's `baseline` block attached, and the exit status 1 only for new differences."""
    block = base.compare(report, results, left=left)
    baseline.attach(report, block)
    return baseline.exit_status(block, status, flakes=verdict.failing_flakes(report))
