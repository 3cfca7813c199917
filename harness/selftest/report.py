"""The self-test's kill table: as a dict (selftest.json), as text, as a self-contained HTML page."""

from __future__ import annotations

import html
from dataclasses import asdict
from typing import Any

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
                     "jobs": s.jobs, "timeout": s.timeout, "baseline": s.baseline},
        "vocabularies": usable,
        "baseline_failures": failures,
        "seconds": round(seconds, 1),
        "columns": columns,
        "mutants": rows,
        "summary": summarize(rows, columns),
    }


def summarize(rows: list[dict[str, Any]], columns: list[str]) -> dict[str, Any]:
    """Kills per detector, per area and detector, and the survivors of each detector."""
    per_detector = {}
    for col in columns:
        judged = [r for r in rows if _judged(r, col)]
        killed = sum(r["results"][col]["killed"] for r in judged)
        per_detector[col] = {"killed": killed, "judged": len(judged),
                             "survivors": [r["id"] for r in judged if not r["results"][col]["killed"]],
                             "inconclusive": [r["id"] for r in rows if col in r["results"]
                                              and r["results"][col]["outcome"] == "timeout"]}
    per_area: dict[str, dict[str, list[int]]] = {}
    for area in AREAS:
        in_area = [r for r in rows if r["area"] == area]
        if in_area:
            per_area[area] = {col: [sum(r["results"][col]["killed"] for r in in_area if _judged(r, col)),
                                    sum(_judged(r, col) for r in in_area)] for col in columns}
    return {"mutants": len(rows), "per_detector": per_detector, "per_area": per_area}


def _judged(row: dict[str, Any], col: str) -> bool:
    """Killed or survived; not-run and timeout (inconclusive on a loaded machine) are not counted."""
    return col in row["results"] and row["results"][col]["outcome"] in ("killed", "survived")


def _rate(killed: int, judged: int) -> str:
    return f"{killed}/{judged} ({100 * killed / judged:.0f}%)" if judged else "-"


def text_table(report: dict[str, Any]) -> str:
    """The kill table for the terminal: one line per area, then the totals and the survivors."""
    cols = report["columns"]
    summary = report["summary"]
    width = max([len(a) for a in summary["per_area"]] + [5])
    lines = [f"{'area':<{width}}  " + "  ".join(f"{c:>14}" for c in cols)]
    for area, cells in summary["per_area"].items():
        lines.append(f"{area:<{width}}  " + "  ".join(f"{_rate(*cells[c]):>14}" for c in cols))
    totals = summary["per_detector"]
    lines.append(f"{'total':<{width}}  " + "  ".join(
        f"{_rate(totals[c]['killed'], totals[c]['judged']):>14}" for c in cols))
    for c in cols:
        if totals[c]["survivors"]:
            lines.append(f"survivors of {c}: {', '.join(totals[c]['survivors'])}")
        if totals[c].get("inconclusive"):
            lines.append(f"timed out (not counted) in {c}: {', '.join(totals[c]['inconclusive'])}")
    return "\n".join(lines)


_CSS = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;vertical-align:top}th{background:#f4f4f4}
.k{background:#e3f5e1}.s{background:#fbe3e3;font-weight:bold}.t{background:#fff3cd}.n{color:#999}
code{font-size:12px}small{color:#555}"""


def html_page(report: dict[str, Any]) -> str:
    """A self-contained page (inline CSS, no scripts): totals, per area, per mutant."""
    cols = report["columns"]
    summary = report["summary"]
    e = html.escape
    out = [f"<!doctype html><meta charset=utf-8><title>gguf-parity mutation self-test</title><style>{_CSS}</style>",
           "<h1>Mutation self-test</h1>",
           f"<p>{summary['mutants']} mutants of <code>tokenizer/</code>, "
           f"scope <b>{e(report['settings']['scope'])}</b>, "
           f"fuzz {report['settings']['fuzz']} seed {report['settings']['seed']}, {report['seconds']:.0f} s. "
           "A mutant is killed when a detector exits non-zero on one of its vocabularies; "
           "<i>main job</i> = golden replay or live+fuzz (<code>./quickstart.sh parity</code>).</p>",
           "<h2>Kill rate per detector</h2><table><tr><th>detector</th><th>killed</th><th>survivors</th></tr>"]
    for c in cols:
        t = summary["per_detector"][c]
        out.append(f"<tr><td>{e(c)}</td><td>{_rate(t['killed'], t['judged'])}</td>"
                   f"<td>{e(', '.join(t['survivors'])) or '-'}</td></tr>")
    heads = "".join(f"<th>{e(c)}</th>" for c in cols)
    out.append(f"</table><h2>Per area</h2><table><tr><th>area</th>{heads}</tr>")
    for area, cells in summary["per_area"].items():
        out.append(f"<tr><td>{e(area)}</td>" + "".join(f"<td>{_rate(*cells[c])}</td>" for c in cols) + "</tr>")
    out.append("</table><h2>Per mutant</h2><table><tr><th>mutant</th><th>area</th><th>the bug it mimics</th>"
               + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>")
    for r in report["mutants"]:
        out.append(f"<tr><td><code>{e(r['id'])}</code><br><small>{e(r['file'])}</small></td><td>{e(r['area'])}</td>"
                   f"<td>{e(r['description'])}</td>" + "".join(_cell(r["results"].get(c)) for c in cols) + "</tr>")
    out.append("</table>")
    failures = {d: f for d, f in report.get("baseline_failures", {}).items() if f}
    if failures:
        out.append("<h2>Left out: the unmutated code already fails there</h2><ul>")
        for d, f in failures.items():
            out.extend(f"<li>{e(d)} on {e(v)}: {e(why)}</li>" for v, why in f.items())
        out.append("</ul>")
    return "\n".join(out) + "\n"


def _cell(v: dict[str, Any] | None) -> str:
    if v is None or v.get("outcome") == "not-run":
        return "<td class=n>not run</td>"
    e = html.escape
    if v.get("outcome") == "timeout":
        return f"<td class=t>timeout (inconclusive)<br><small>{e(v.get('detail', ''))}</small></td>"
    if not v["killed"]:
        tried = len(v.get("tried") or [])
        return f"<td class=s>survived<br><small>{tried} vocabularies</small></td>"
    klass = "t" if v.get("outcome") == "timeout" else "k"
    where = f" on {e(v['vocab'])}" if v.get("vocab") else ""
    note = " (implied)" if v.get("implied") else ""
    detail = f"<br><small>{e(v.get('detail', ''))[:160]}</small>" if v.get("detail") and not v.get("implied") else ""
    return f"<td class={klass}>{e(v.get('outcome', 'killed'))}{where}{note}{detail}</td>"


def markdown(report: dict[str, Any]) -> str:
    """The kill tables as Markdown (per detector with survivors, per area), for the README."""
    cols = report["columns"]
    summary = report["summary"]
    lines = ["| detector | mutants killed | survivors |", "|---|---|---|"]
    for c in cols:
        t = summary["per_detector"][c]
        blind = {r["id"] for r in report["mutants"] if r.get("blind_spot")}
        survivors = ", ".join(f"`{s}`" + (" (blind spot)" if s in blind else "") for s in t["survivors"]) or "none"
        lines.append(f"| {c} | {_rate(t['killed'], t['judged'])} | {survivors} |")
    lines += ["", "| area | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for area, cells in summary["per_area"].items():
        lines.append(f"| {area} | " + " | ".join(_rate(*cells[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"
