"""The self-test's kill table: as a dict (selftest.json), as text, as a self-contained HTML page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..report.templating import environment
from .mutants import AREAS, Mutant
from .settings import MAIN_JOB, Settings, Verdict

MAIN = "main job"   # golden or live+fuzz: what ./quickstart.sh parity runs


def build(mutants: list[Mutant], results: dict[str, dict[str, Verdict]], s: Settings,
          usable: dict[str, list[str]], failures: dict[str, dict[str, str]], seconds: float) -> dict[str, Any]:
    """The JSON-ready report of the mutants judged so far."""
    rows = []
    for m in mutants:
        verdicts = results.get(m.id)
        if verdicts is None:
            continue
        cells = {d: asdict(v) | {"killed": v.killed} for d, v in verdicts.items()}
        main = [verdicts[d] for d in MAIN_JOB if d in verdicts]
        if len(main) == len(MAIN_JOB):
            killed = any(v.killed for v in main)
            outcomes = {v.outcome for v in main}
            outcome = ("killed" if killed else "timeout" if "timeout" in outcomes
                       else "survived" if "survived" in outcomes else "not-run")
            cells[MAIN] = {"killed": killed, "outcome": outcome}
        rows.append({"id": m.id, "area": m.area, "file": m.file, "description": m.description,
                     "blind_spot": m.blind_spot, "results": cells})
    columns = [*s.detectors, *([MAIN] if all(d in s.detectors for d in MAIN_JOB) else [])]
    return {
        "settings": {"scope": s.scope, "detectors": list(s.detectors), "fuzz": s.fuzz, "seed": s.seed,
                     "jobs": s.jobs, "timeout": s.timeout, "baseline": s.baseline, "likely_only": s.likely_only,
                     "until_main_kill": s.until_main_kill},
        "vocabularies": usable,
        "baseline_failures": failures,
        "seconds": round(seconds, 1),
        "columns": columns,
        "mutants": rows,
        "summary": summarize(rows, columns),
    }


# Settings every part of a merge must share (jobs and timeout are how a part ran, not what it judged).
SAME = ("scope", "detectors", "fuzz", "seed", "baseline", "likely_only", "until_main_kill")


def merge(parts: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """Several selftest.json (complete `--shard` parts in shard order give the unsharded one) as one report.

    The parts must share their settings (`SAME`) and judge distinct mutants; a `ValueError` (one line)
    otherwise. Each part ran its own baseline: where two parts that judged mutants left out different
    vocabularies, `baseline_differs` names them (their mutants were judged on their own baseline).
    """
    first = parts[0]
    for part, name in zip(parts, names, strict=True):
        for key in SAME:
            if part["settings"].get(key) != first["settings"].get(key):
                raise ValueError(f"{name}: run with {key}={part['settings'].get(key)!r}, {names[0]} with "
                                 f"{first['settings'].get(key)!r}: not parts of one self-test")
    rows = [row for part in parts for row in part["mutants"]]
    seen: dict[str, str] = {}
    for part, name in zip(parts, names, strict=True):
        for row in part["mutants"]:
            if row["id"] in seen:
                raise ValueError(f"mutant {row['id']} is in both {seen[row['id']]} and {name}")
            seen[row["id"]] = name
    judging = [(p, n) for p, n in zip(parts, names, strict=True) if p["mutants"]] or [(first, names[0])]
    vocabularies: dict[str, Any] = {}
    failures: dict[str, Any] = {}
    for part, _ in judging:  # a baseline runs only when a mutant needs it: a part may lack a detector's
        for d, usable in part["vocabularies"].items():
            vocabularies.setdefault(d, usable)
            failures.setdefault(d, part["baseline_failures"].get(d, {}))
    differs = [n for p, n in judging
               if any((usable, p["baseline_failures"].get(d, {})) != (vocabularies[d], failures[d])
                      for d, usable in p["vocabularies"].items())]
    columns = first["columns"]
    return {"settings": {**first["settings"], "jobs": max(p["settings"].get("jobs", 1) for p in parts)},
            "vocabularies": vocabularies, "baseline_failures": failures,
            **({"baseline_differs": [judging[0][1], *differs]} if differs else {}),
            "seconds": round(sum(p["seconds"] for p in parts), 1), "columns": columns, "mutants": rows,
            "summary": summarize(rows, columns)}


def summarize(rows: list[dict[str, Any]], columns: list[str]) -> dict[str, Any]:
    """Kills per detector, per area and detector, and the survivors of each detector."""
    per_detector = {}
    for col in columns:
        judged = [r for r in rows if _judged(r, col)]
        killed = sum(r["results"][col]["killed"] for r in judged)
        per_detector[col] = {"killed": killed, "judged": len(judged),
                             "survivors": [r["id"] for r in judged if not r["results"][col]["killed"]],
                             "inconclusive": [r["id"] for r in rows if col in r["results"]
                                              and r["results"][col]["outcome"] == "timeout"],
                             "skipped": [r["id"] for r in rows if col in r["results"]
                                         and r["results"][col]["outcome"] == "skipped"]}
    per_area: dict[str, dict[str, list[int]]] = {}
    for area in AREAS:
        in_area = [r for r in rows if r["area"] == area]
        if in_area:
            per_area[area] = {col: [sum(r["results"][col]["killed"] for r in in_area if _judged(r, col)),
                                    sum(_judged(r, col) for r in in_area)] for col in columns}
    return {"mutants": len(rows), "per_detector": per_detector, "per_area": per_area}


def _judged(row: dict[str, Any], col: str) -> bool:
    """Killed or survived; not-run, skipped (`--until-main-kill`) and timeout (inconclusive on a loaded
    machine) are not counted."""
    return col in row["results"] and row["results"][col]["outcome"] in ("killed", "survived")


def _rate(killed: int, judged: int) -> str:
    return f"{killed}/{judged} ({100 * killed / judged:.0f}%)" if judged else "-"


def _rate_run(killed: int, judged: int) -> str:
    """With `--until-main-kill` a detector does not run on every mutant: the rate says of how many it ran on."""
    return f"{killed}/{judged} run ({100 * killed / judged:.0f}%)" if judged else "- (none run)"


def rater(report: dict[str, Any]) -> Callable[[int, int], str]:
    return _rate_run if report["settings"].get("until_main_kill") else _rate


def text_table(report: dict[str, Any]) -> str:
    """The kill table for the terminal: one line per area, then the totals and the survivors."""
    cols = report["columns"]
    summary = report["summary"]
    rate = rater(report)
    width = max([len(a) for a in summary["per_area"]] + [5])
    lines = [f"{'area':<{width}}  " + "  ".join(f"{c:>14}" for c in cols)]
    if report.get("shard"):  # a part never reads as the whole self-test
        shard = report["shard"]
        lines.insert(0, f"shard {shard['index']}/{shard['count']}: {shard['owned_units']} of {shard['units']} "
                        "mutants only (merge-reports folds the parts)")
    for area, cells in summary["per_area"].items():
        lines.append(f"{area:<{width}}  " + "  ".join(f"{rate(*cells[c]):>14}" for c in cols))
    totals = summary["per_detector"]
    lines.append(f"{'total':<{width}}  " + "  ".join(
        f"{rate(totals[c]['killed'], totals[c]['judged']):>14}" for c in cols))
    for c in cols:
        if totals[c]["survivors"]:
            lines.append(f"survivors of {c}: {', '.join(totals[c]['survivors'])}")
        if totals[c].get("inconclusive"):
            lines.append(f"timed out (not counted) in {c}: {', '.join(totals[c]['inconclusive'])}")
        if totals[c].get("skipped"):
            lines.append(f"not run in {c}, the main job already kills them: {len(totals[c]['skipped'])} mutants")
    return "\n".join(lines)


_CSS = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;vertical-align:top}th{background:#f4f4f4}
.k{background:#e3f5e1}.s{background:#fbe3e3;font-weight:bold}.t{background:#fff3cd}.n{color:#999}
code{font-size:12px}small{color:#555}"""


def html_page(report: dict[str, Any]) -> str:
    """A self-contained page (inline CSS, no scripts): totals, per area, per mutant (templates/selftest.html.j2)."""
    failures = {d: f for d, f in report.get("baseline_failures", {}).items() if f}
    return environment().get_template("selftest.html.j2").render(
        report=report, summary=report["summary"], cols=report["columns"], failures=failures, rate=rater(report),
        css=_CSS)


def markdown(report: dict[str, Any]) -> str:
    """The kill tables as Markdown (per detector with survivors, per area), for the README."""
    cols = report["columns"]
    summary = report["summary"]
    rate = rater(report)
    lines = ["| detector | mutants killed | survivors |", "|---|---|---|"]
    for c in cols:
        t = summary["per_detector"][c]
        blind = {r["id"] for r in report["mutants"] if r.get("blind_spot")}
        survivors = ", ".join(f"`{s}`" + (" (blind spot)" if s in blind else "") for s in t["survivors"]) or "none"
        skipped = f"; not run on {len(t['skipped'])} (the main job already kills them)" if t.get("skipped") else ""
        lines.append(f"| {c} | {rate(t['killed'], t['judged'])} | {survivors}{skipped} |")
    lines += ["", "| area | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for area, cells in summary["per_area"].items():
        lines.append(f"| {area} | " + " | ".join(rate(*cells[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"
