"""Run results as `report.json` and a self-contained `report.html`.

A report is a plain dict (what `report.json` holds):

    {"version": 1, "meta": {...},
     "summary": {"cases", "mismatches", "failing_cases", "oracle_crashes", "engine_errors",
                 "vocab_mismatches", "known_oracle_crashes", "known_crash_cases", "not_applicable",
                 "checked", "passed", "agree_rate", "pass_rate", "engine_flakes", "harness_faults",
                 "models", "per_model": {...}, "per_family": {...}},
     "mismatches": [{"model", "case_id", "text", "add_special", "parse_special",
                     "expected", "got", "first_diff", "category", ...}],
     "oracle_crashes": [...], "engine_errors": [...], "vocab_mismatches": [...],
     "engine_flakes": [{"model", "case_ids", "op", "first", "recheck"}],
     "harness_faults": [{"model", "case_id", "op", "crash", "reason"}],
     "known_oracle_crashes": [{..., "crash": {...}, "known_crash": "<entry id>"}],
     "known_crash_list": {"<entry id>": {"id", "models", "signature", "description", "upstream"}}}

`oracle_crashes` are new llama.cpp crashes (findings); `known_oracle_crashes`
match an entry of the known-crashes list (`harness.oracle.known_crashes`): they are
shown, but are not findings. A case with only a known crash is neither failing
nor passed (`known_crash_cases`): nothing could be compared on it. So is a
case the engine cannot take (`not_applicable`). `checked` is the cases
compared (cases minus those two), `passed` the checked ones that agree;
`agree_rate` is passed / checked (what the page shows, as agreed / checked),
`pass_rate` passed / cases (unchanged since version 1, so a run with known
crashes has one below 1.0 while all match).

`engine_flakes` and `harness_faults` are side lists, not findings: a failure a
fresh process did not repeat, of the engine under test's child or of a
llama.cpp worker (docs/engine-protocol.md, "Blame"). A flake makes the run exit
1 unless `meta.allow_flakes` (`harness.compare.verdict`).

`per_model` holds the counts each run measured; every other figure is derived
from it, so `merge()` can fold reports from separate runs (one nox session per
family, a CI matrix) into one summary. The HTML page is rendered with jinja2
from `templates/report.html.j2`, with inline CSS and JS only, so it works
offline; pandas computes the summary tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from ..compare import expected
from ..compare import verdict as verdicts
from ..compare.result import FINDINGS, LISTS, SIDE_LISTS, ModelResult
from ..files import jsonl
from ..files.atomic import write_text_atomic
from ..files.jsonl import escape_unsafe
from ..subjects import capabilities as caps
from . import cards, differences, fuzz_summary, page, reference_summary
from .templating import environment

REPORT_VERSION = 1
COUNTS = ("cases", "failing_cases", "mismatches", "oracle_crashes", "engine_errors", "vocab_mismatches",
          "known_oracle_crashes", "known_crash_cases", "harness_faults", "not_applicable", "engine_flakes",
          "reference_findings", "known_differences", "known_difference_cases")


def build(results: Iterable[ModelResult], *, meta: dict, known_crashes: dict | None = None) -> dict:
    """The report dict for a run's per-model results; `known_crashes` is the list's definitions by id."""
    results = list(results)
    per_model = {r.model: r.counts() for r in results}
    report = {"version": REPORT_VERSION, "meta": meta, "summary": summarize(per_model)}
    for kind in LISTS + SIDE_LISTS:
        report[kind] = [entry for r in results for entry in getattr(r, kind)]
    reference_summary.attach(report, per_model)  # `run --reference`: summary.reference
    report["known_crash_list"] = dict(known_crashes or {})
    return with_differences(report, differences.group(report))


def with_differences(report: dict, records: list[dict]) -> dict:
    """`report` with its `differences` (one record per signature, `harness.report.differences`) and their
    counts in the summary (`differences`, and per model)."""
    report["differences"] = records
    report["summary"]["differences"] = len(records)
    counted = differences.per_model(records)
    for model, counts in report["summary"]["per_model"].items():
        counts["differences"] = counted.get(model, 0)
    block = expected.report_block(report)  # --expected-differences: each entry known, fixed or not checked
    if block is not None:
        report["expected_differences"] = block
    return report


def summarize(per_model: dict[str, dict]) -> dict:
    """Totals, per-family breakdown and pass rates from per-model counts."""
    frame = _frame(per_model)
    totals = {k: int(frame[k].sum()) if len(frame) else 0 for k in COUNTS}
    per_family = {}
    if len(frame):
        grouped = frame.groupby("family", sort=True)[list(COUNTS)].sum()
        grouped["models"] = frame.groupby("family").size()
        per_family = {fam: _with_rate({k: int(v) for k, v in row.items()})
                      for fam, row in grouped.iterrows()}
    tally = caps.add_tallies(c.get("capabilities") or {} for c in per_model.values())
    summary = _with_rate({**totals, "models": len(per_model), "capabilities": tally, "per_model":
                          {m: _with_rate(dict(c)) for m, c in sorted(per_model.items())},
                          "per_family": per_family, **_unchecked(per_model)})
    fuzz_summary.attach(summary, per_model)  # `--fuzz N`: summary.fuzz, inputs ran of asked
    return summary


def _unchecked(per_model: dict[str, dict]) -> dict:
    """`not_checked` (model -> reason) and `refused_as_expected` (models), for the summary."""
    reasons = {m: verdicts.unchecked_reason(c) for m, c in sorted(per_model.items())}
    return {"not_checked": {m: why for m, why in reasons.items() if why},
            "refused_as_expected": sorted(m for m, c in per_model.items() if c.get("expected_refusal"))}


def _frame(per_model: dict[str, dict]) -> pd.DataFrame:
    rows = [{"model": m, "family": c.get("family", "?"), **{k: int(c.get(k, 0)) for k in COUNTS}}
            for m, c in per_model.items()]
    return pd.DataFrame(rows, columns=["model", "family", *COUNTS])


def _with_rate(counts: dict) -> dict:
    """`checked` (cases compared: not a known llama.cpp crash, not applicable to the engine),
    `passed` (checked and agreeing), `agree_rate` = passed / checked, and the older
    `pass_rate` = passed / cases (kept as it was for report.json readers; the page shows
    agreed / checked, which is 100% whenever the verdict is "all match")."""
    cases = counts.get("cases", 0)
    checked = max(cases - counts.get("known_crash_cases", 0) - counts.get("not_applicable", 0)
                  - counts.get("known_difference_cases", 0), 0)  # --expected-differences: set aside, never passed
    passed = max(checked - counts.get("failing_cases", 0), 0)
    counts["checked"] = checked
    counts["passed"] = passed
    counts["pass_rate"] = round(passed / cases, 6) if cases else None
    counts["agree_rate"] = round(passed / checked, 6) if checked else None
    return counts


def one_line(report: dict) -> str:
    """The one-line verdict printed at the end of a run (`harness.compare.verdict` picks its first words)."""
    s = report["summary"]
    verdict = verdicts.word(report)
    unchecked = verdicts.unchecked_line(report)
    if unchecked:
        verdict = f"{verdict} ({unchecked})"
    known = s.get("known_oracle_crashes", 0)
    crashes = (f"{s['oracle_crashes']} new llama.cpp crashes ({known} known crashes, see report)" if known
               else f"{s['oracle_crashes']} oracle crashes")
    faults = (f"; {s['harness_faults']} harness faults (worker deaths a fresh worker did not repeat, "
              "not llama.cpp crashes: see report)") if s.get("harness_faults") else ""
    flakes = (f"; {s['engine_flakes']} engine flakes (the engine's process failed once, a fresh one answered: "
              "see report)") if s.get("engine_flakes") else ""
    distinct = f" ({s['differences']} distinct differences)" if s.get("differences") else ""
    return (f"{verdict}: {s['models']} vocabularies, {s['cases']} cases{_set_aside(s)}, {s['failing_cases']} failing"
            f"{distinct}, "
            f"{s['mismatches']} mismatches, {s['engine_errors']} engine errors, "
            f"{crashes}, {s['vocab_mismatches']} vocab mismatches{flakes}{faults}"
            + (f"; {caps.figures(s['capabilities'])}" if s.get("capabilities") else "")
            + _messages_figures(report.get("messages")) + fuzz_summary.line(s) + reference_summary.line(s)
            + expected.line(report) + verdicts.selection_line(report))


def _set_aside(s: dict) -> str:
    """" (265 checked; set aside: 1 known-crash case)" when some cases were not compared, else ""."""
    parts = [f"{n} {what} case{'' if n == 1 else 's'}" for n, what in
             ((s.get("known_crash_cases", 0), "known-crash"), (s.get("not_applicable", 0), "not-applicable"),
              (s.get("known_difference_cases", 0), "known-difference")) if n]
    return f" ({s.get('checked', 0)} checked; set aside: {', '.join(parts)})" if parts else ""


def _messages_figures(messages: dict | None) -> str:
    if not messages:
        return ""
    return (f"; messages: {messages.get('cases', 0)} cases, {len(messages.get('findings', []))} differ, "
            f"{len(messages.get('oracle_crashes', []))} llama.cpp crash/hang")


# --- merging --------------------------------------------------------------------------------

def load(path: Path) -> dict:
    """A report.json (or the directory holding one), checked for the fields `merge` needs."""
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read report {path}: {exc}") from None
    if not isinstance(report, dict) or "per_model" not in report.get("summary", {}):
        raise ValueError(f"{path} is not a gguf-parity report.json (no summary.per_model)")
    return report


def merge(reports: Sequence[dict], *, meta: dict) -> dict:
    """One report from several; a model seen in more than one adds its counts up."""
    per_model: dict[str, dict] = {}
    merged: dict[str, list[dict]] = {kind: [] for kind in LISTS + SIDE_LISTS}
    known: dict[str, dict] = {}
    sources = []
    for report in reports:
        sources.append(report.get("meta", {}))
        for model, counts in report["summary"]["per_model"].items():
            _add_counts(per_model, model, counts)
        for kind in LISTS + SIDE_LISTS:
            merged[kind].extend(report.get(kind, []))
        known.update(report.get("known_crash_list", {}))
    described = expected.merged_description(sources)  # --expected-differences: one list judged over the parts
    meta = {**meta, **({"expected_differences": described} if described else {})}
    out = {"version": REPORT_VERSION, "meta": {**meta, "sources": sources},
           "summary": summarize(per_model), **merged, "known_crash_list": known}
    reference_summary.attach(out, per_model)
    with_differences(out, differences.merge(r["differences"] if "differences" in r else differences.group(r)
                                            for r in reports))
    _note_listed(out)
    if any(r.get("messages") for r in reports):
        from .messages import merge as merge_messages
        out["messages"] = merge_messages([r["messages"] for r in reports if r.get("messages")])
    return out


def _note_listed(report: dict) -> None:
    """`per_model[m].listed` where a part's report.json had cut a list: the entries the merge holds."""
    for model, counts in report["summary"]["per_model"].items():
        for kind in differences.CAPPED:
            held = sum(1 for e in report.get(kind) or [] if e.get("model") == model)
            if held < counts.get(kind, 0):
                counts.setdefault("listed", {})[kind] = held


def reclassify(report: dict, known) -> dict:
    """`report` with every oracle crash (new or known) judged again against `known` (a KnownCrashes).

    Lets `merge-reports --known-crashes` apply one list to reports written by
    separate runs. Per-model counts move with the entries; a crash case counts
    as failing only while it has a new crash or another finding.
    """
    crashes = report.get("oracle_crashes", []) + report.get("known_oracle_crashes", [])
    new: dict[str, list[dict]] = {"oracle_crashes": [], "known_oracle_crashes": []}
    old = _crash_ids(report)
    for entry in crashes:
        entry = {k: v for k, v in entry.items() if k != "known_crash"}
        match = known.match(entry.get("model", ""), entry.get("crash") or {})
        if match is None:
            new["oracle_crashes"].append(entry)
        else:
            new["known_oracle_crashes"].append({**entry, "known_crash": match.id})
    out = {**report, **new, "known_crash_list": known.describe()}
    per_model = {m: _recount(m, dict(c), out, old, _crash_ids(out)) for m, c in
                 report["summary"]["per_model"].items()}
    out["summary"] = summarize(per_model)
    return out


def _crash_ids(report: dict) -> dict[tuple[str, str], set[str]]:
    """(model, kind) -> case ids: new crashes, known crashes and other findings (each list whose entry fails
    its case, as `ModelResult.add` counts them)."""
    ids: dict[tuple[str, str], set[str]] = {}
    for kind in ("oracle_crashes", "known_oracle_crashes", "mismatches", "engine_errors", "reference_findings"):
        group = kind if "crashes" in kind else "other"
        for entry in report.get(kind, []):
            case_id = str(entry.get("case_id"))
            if entry.get("case_id") is not None and not case_id.startswith("<"):
                ids.setdefault((entry.get("model", ""), group), set()).add(case_id)
    return ids


def _recount(model: str, counts: dict, out: dict, old: dict, new: dict) -> dict:
    """One model's counts after `reclassify` moved crashes between the lists (`out` holds the new ones)."""
    def get(ids, kind):
        return ids.get((model, kind), set())
    other = get(old, "other")
    counts["failing_cases"] = (int(counts.get("failing_cases", 0)) - len(get(old, "oracle_crashes") - other)
                               + len(get(new, "oracle_crashes") - other))
    counts["known_crash_cases"] = len(get(new, "known_oracle_crashes") - other - get(new, "oracle_crashes"))
    for kind in ("oracle_crashes", "known_oracle_crashes"):
        counts[kind] = sum(1 for e in out[kind] if e.get("model") == model)
    return counts


def _add_counts(per_model: dict, model: str, counts: dict) -> None:
    into = per_model.setdefault(model, {"family": counts.get("family", "?"), "notes": []})
    for key in COUNTS:
        into[key] = into.get(key, 0) + int(counts.get(key, 0))
    into["notes"] = into["notes"] + list(counts.get("notes", []))
    for key in ("not_checked", "expected_refusal"):  # a model unchecked in any part stays unchecked
        into[key] = "; ".join(filter(None, [into.get(key), counts.get(key)])) or None
    into["capabilities"] = caps.add_tallies([into.get("capabilities") or {}, counts.get("capabilities") or {}])
    if counts.get("source"):
        into["source"] = counts["source"]
    reference_summary.fold(into, counts)
    fuzz_summary.fold(into, counts)
    expected.fold(into, counts)


# --- writing --------------------------------------------------------------------------------

def write(report: dict, out_dir: Path) -> tuple[Path, Path]:
    """Write `report.json` and `report.html` into `out_dir`; returns both paths.

    Each file is written whole or not at all (`harness.files.atomic`): with the disk
    full the previous report stays as it was. Both are rendered before either
    is replaced, so a failure leaves the pair from one run.
    """
    out_dir = Path(out_dir)
    json_path, html_path = out_dir / "report.json", out_dir / "report.html"
    kept = differences.bounded(report)
    text = escape_unsafe(json.dumps(kept, indent=1, ensure_ascii=False, default=_jsonable)) + "\n"
    html = render_html(kept, every=report)
    written = set()
    for model, lines in differences.finding_lines(report).items():  # every finding, one line each
        written.add(jsonl.write(out_dir / "findings" / f"{model}.jsonl", lines).name)
    _drop_stale_findings(out_dir / "findings", written)
    write_text_atomic(json_path, text)
    write_text_atomic(html_path, html)
    return json_path, html_path


def _drop_stale_findings(folder: Path, written: set[str]) -> None:
    """Remove the findings files an earlier report in this folder left (a model that has none now)."""
    if not folder.is_dir():
        return
    for path in folder.glob("*.jsonl"):
        if path.name not in written and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def summary_rows(report: dict) -> tuple[list[dict], list[dict]]:
    """Rows for the per-family and per-model tables, sorted worst first (pandas)."""
    s = report["summary"]
    models = pd.DataFrame([{"name": m, **c} for m, c in s["per_model"].items()])
    families = pd.DataFrame([{"name": f, **c} for f, c in s["per_family"].items()])
    return _rows(families), _rows(models)


def _rows(frame: pd.DataFrame) -> list[dict]:
    if frame.empty:
        return []
    frame = frame.copy()
    for key in COUNTS:  # a report written before a count existed
        frame[key] = frame[key].fillna(0).astype(int) if key in frame else 0
    frame["findings"] = frame[list(FINDINGS)].sum(axis=1)
    # checked and passed by the one formula (`_with_rate`), also for a report written before them
    frame = pd.DataFrame([_with_rate(row) for row in frame.to_dict("records")])
    frame["agreed"] = frame["passed"]
    frame["agree_pct"] = [agree_pct(a, c) for a, c in zip(frame["agreed"], frame["checked"], strict=True)]
    frame = frame.sort_values(["findings", "name"], ascending=[False, True])
    return frame.to_dict("records")


def agree_pct(agreed: int, checked: int) -> str:
    """agreed / checked as a percentage; never "100.0%" unless every checked case agreed."""
    if not checked:
        return "n/a"
    if agreed >= checked:
        return "100%"
    return f"{min(agreed / checked, 0.999):.1%}"


def render_html(report: dict, *, every: dict | None = None) -> str:
    """The report page as one self-contained HTML string (`harness.report.page`: the differences first,
    one line and one card each, then the run's tables, every list bounded). `every`: the report whose
    finding lists are whole (report.json's are cut), so that a card shows every flag pair of its case."""
    families, models = summary_rows(report)
    lines, lines_left = page.lines(report)
    drawn, cards_left = page.difference_cards(report, every)
    fixed, fixed_left = page.fixed(report)
    unsure, unsure_left = page.fixed(report, "not re-checked")
    flakes, flakes_left = page.side_rows(report, "engine_flakes")
    faults, faults_left = page.side_rows(report, "harness_faults")
    causes, causes_left = cards.causes(e for e in (every or report).get("reference_findings") or [])
    template = environment().get_template("report.html.j2")
    return template.render(
        report=report, summary=report["summary"], families=families, models=models,
        lines=lines, lines_left=lines_left, difference_cards=drawn, cards_left=cards_left,
        card_ids={c["id"] for c in drawn}, statuses=page.statuses(report), fixed=fixed, fixed_left=fixed_left,
        not_rechecked=unsure, not_rechecked_left=unsure_left,
        causes=causes, causes_left=causes_left, meta_rows=page.meta_rows(report),
        model_names=sorted(report["summary"]["per_model"]), categories=sorted({line["category"] for line in lines}),
        verdict=one_line(report), known_groups=page.known_groups(report),
        verdict_ok=verdicts.exit_status(report) == 0, not_checked=verdicts.not_checked(report),
        refused=verdicts.refused_as_expected(report), interrupted=report.get("meta", {}).get("interrupted"),
        messages=page.messages(report), flakes=flakes, flakes_left=flakes_left, faults=faults,
        faults_left=faults_left,
    )


def versions() -> dict:
    """llama-cpp-python's version (the llama.cpp pin) for the report's meta block."""
    from importlib import metadata
    try:
        return {"llama_cpp_python": metadata.version("llama_cpp_python")}
    except metadata.PackageNotFoundError:
        return {"llama_cpp_python": None}
