"""The verdict of a run, and its exit status: nothing unchecked is ever shown as passing.

A model is *not checked* when nothing was compared on it: both sides refused
the file (unreadable, empty, not GGUF, truncated, a hostile header), or it
had 0 cases. Such a model is listed under `summary.not_checked` (model ->
reason) in report.json, in the page and in the one-line verdict, and the run
exits 2: a claim of "all match" over nothing would be a lie.

Both sides refusing a file is agreement only when the run was told to expect
it (`run --expect-refusal` / `compare --expect-refusal`, for a corpus of
hostile files); the model is then shown as "refused as expected"
(`summary.refused_as_expected`), and a side that *loads* such a file is a
finding.

The exit status (`exit_status`; the codes are `harness.errors`', their meaning the README's
"Exit codes" table): a model not checked gives 2 even when others differ, since the run did
not do what was asked.

An *engine flake* (`summary.engine_flakes`, harness.subjects.client) is a failure of
the engine under test's process that a fresh process did not repeat: the answer
compared is the fresh one, so it is not a finding, but it is a bug of the engine,
and the run exits 1 for it unless it was told to allow them (`meta.allow_flakes`,
`run`/`compare --allow-flakes`); the verdict then reads "engine flakes" instead of
"all match". Harness faults (llama.cpp worker deaths a fresh worker did not repeat)
never change the verdict.
"""

from __future__ import annotations

from typing import Any

from ..errors import EXIT_FOUND, EXIT_OK, EXIT_USAGE
from ..subjects.capabilities import clean_verdict
from .result import FINDINGS, ModelResult

NO_CASES = "0 cases checked (empty corpus, or every case filtered out)"


def finish(result: ModelResult) -> None:
    """Mark a `ModelResult` not checked when nothing was compared on it and nothing was found."""
    if result.not_checked or result.expected_refusal:
        return
    found = any(getattr(result, kind) for kind in FINDINGS)
    if result.cases == 0 and not found:
        result.not_checked = NO_CASES


def unchecked_reason(counts: dict[str, Any]) -> str | None:
    """Why one model's counts (a report's `per_model` entry) show nothing checked, or None.

    Applied to every report built or merged, so a producer that forgot
    `finish()` cannot turn 0 cases into a pass.
    """
    if counts.get("not_checked"):
        return str(counts["not_checked"])
    if counts.get("expected_refusal") or any(counts.get(k, 0) for k in FINDINGS):
        return None
    return NO_CASES if not counts.get("cases") else None


def not_checked(report: dict[str, Any]) -> dict[str, str]:
    """Model -> why it was not checked, from a report dict (also for reports merged or reloaded)."""
    per_model = report.get("summary", {}).get("per_model", {})
    reasons = {m: unchecked_reason(c) for m, c in sorted(per_model.items())}
    return {m: why for m, why in reasons.items() if why}


def refused_as_expected(report: dict[str, Any]) -> list[str]:
    per_model = report.get("summary", {}).get("per_model", {})
    return sorted(m for m, c in per_model.items() if c.get("expected_refusal"))


def found_anything(report: dict[str, Any]) -> bool:
    """Any mismatch, engine error, new llama.cpp crash or vocab mismatch, or a message-level
    difference or llama.cpp crash in the report's "messages" section (chat templates).

    Known llama.cpp crashes (`known_oracle_crashes`) are not findings.
    """
    s = report.get("summary", {})
    messages = report.get("messages") or {}
    return any(s.get(k, 0) for k in FINDINGS) or bool(messages.get("findings") or messages.get("oracle_crashes"))


def failing_flakes(report: dict[str, Any]) -> int:
    """How many engine flakes the report holds that fail the run (0 with `meta.allow_flakes`)."""
    if report.get("meta", {}).get("allow_flakes"):
        return 0
    return int(report.get("summary", {}).get("engine_flakes", 0) or 0)


def word(report: dict[str, Any]) -> str:
    """The verdict's first words: `differences found`, `NOT CHECKED`, `engine flakes` or `all match`,
    marked when interrupted."""
    if found_anything(report):
        base = "differences found"
    elif not_checked(report) or not report.get("summary", {}).get("models"):
        base = "NOT CHECKED"
    elif failing_flakes(report):
        base = "engine flakes (no difference, but the engine's process failed where a fresh one answered)"
    elif report.get("summary", {}).get("known_differences"):  # --expected-differences (harness.compare.expected)
        base = "no new differences (only known ones, listed as expected)"
    else:  # "all match" only when every capability was checked (harness.subjects.capabilities)
        base = clean_verdict(report.get("summary", {}).get("capabilities"))
    stop = report.get("meta", {}).get("interrupted")
    return f"interrupted ({stop}), partial: {base}" if stop else base


def unchecked_line(report: dict[str, Any], limit: int = 3) -> str:
    """`not checked: a (why); b (why)` or "" when every model was checked."""
    missing = not_checked(report)
    if not missing:
        return ""
    shown = [f"{m} ({why})" for m, why in list(missing.items())[:limit]]
    more = f" and {len(missing) - limit} more" if len(missing) > limit else ""
    return f"not checked: {len(missing)} of {len(report['summary']['per_model'])} model(s): " \
           + "; ".join(shown) + more


def selection_line(report: dict[str, Any]) -> str:
    """The verdict's words for a run of chosen cases (`-k`, `--lf`, `--maxfail`: `harness.runs.selection`), ""
    without: what was chosen, what was left out, and what a stop left unchecked (never counted as passing)."""
    chosen = report.get("meta", {}).get("selection")
    if not isinstance(chosen, dict):
        return ""
    words = []
    if chosen.get("keyword"):
        words.append(f"-k {chosen['keyword']!r}")
    last = chosen.get("last_failed")
    if last:
        words.append("--lf: " + (f"the {last['cases']} case(s) that failed in the last run"
                                 if isinstance(last, dict) else str(last)))
    if chosen.get("left_out"):
        words.append(f"{len(chosen['left_out'])} model(s) left out")
    stopped = chosen.get("stopped")
    if isinstance(stopped, dict):
        cases = sum(stopped.get("cases_not_checked", {}).values())
        parts = [f"{cases} case(s) not checked" if cases else "",
                 f"{len(stopped['models_not_started'])} model(s) not started" if stopped.get("models_not_started")
                 else "", f"the later phases of {len(stopped['phases_not_run'])} model(s) not run"
                 if stopped.get("phases_not_run") else ""]
        words.append(f"stopped after {stopped.get('failing_cases')} failing case(s) (--maxfail "
                     f"{stopped.get('maxfail')}): " + ", ".join(p for p in parts if p))
    return f"; selected: {'; '.join(words)}" if words else ""


def exit_status(report: dict[str, Any]) -> int:
    """0 all checked and matching; 2 when a model was not checked; 1 when differences were found,
    or engine flakes not allowed."""
    if not_checked(report) or not report.get("summary", {}).get("models"):
        return EXIT_USAGE
    if report.get("meta", {}).get("interrupted") and not found_anything(report):
        return EXIT_USAGE  # e.g. a merged report with an interrupted part: incomplete, never "all match"
    return EXIT_FOUND if found_anything(report) or failing_flakes(report) else EXIT_OK
