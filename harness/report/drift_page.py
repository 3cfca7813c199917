"""drift.html: the golden drift check's page, from its drift.json (`harness.golden.drift`).

The page names both llama.cpp builds (each golden's recorded build and the live one), lists the
goldens skipped and the harness faults, and shows each changed case as a card: its input, and per
flag pair what changed, with before and after side by side (ids and their pieces from the first
difference on, the difference marked). It stays small at any number of changes: at most
`PAGE_CASES` cards and `PAGE_LINES` change lines per golden (drift.json holds the rest, counted
on the page).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..compare.diff import visible
from ..files.atomic import write_text_atomic

FILE = "drift.html"
PAGE_CASES = 300   # changed cases drawn as cards, over all goldens
PAGE_LINES = 50    # change lines listed per golden


def render(data: dict[str, Any], verdict: str) -> str:
    """The page's HTML for a drift result `data` and its verdict line."""
    goldens = []
    budget = PAGE_CASES
    for item in data.get("goldens") or []:
        goldens.append(_golden(item, budget))
        budget -= len(goldens[-1]["cards"])
    from .templating import environment  # jinja2: only when a page is drawn

    return environment().get_template("drift.html.j2").render(
        data=data, verdict=verdict, builds=data.get("builds") or {"recorded": [], "live": []},
        goldens=goldens, changed=[g for g in goldens if g["lines"] or g["cards"]],
        skipped=[g for g in goldens if g["skipped"]], faults=[g for g in goldens if g["faults"]],
        found=bool((data.get("summary") or {}).get("changed")), build_text=build_text)


def write(data: dict[str, Any], verdict: str, out: Path) -> Path:
    """drift.html in `out`, written whole or not at all."""
    return write_text_atomic(Path(out) / FILE, render(data, verdict))


def build_text(build: dict[str, Any] | None) -> str:
    """A llama.cpp build in one line: `llama-cpp-python X.Y.Z, ggml A.B.C (0c1e570)`."""
    if not build:
        return "unknown"
    text = f"llama-cpp-python {build.get('llama_cpp_python', '?')}"
    if build.get("ggml_version") or build.get("ggml_commit"):
        text += f", ggml {build.get('ggml_version', '?')} ({build.get('ggml_commit', '?')})"
    return text


def _golden(item: dict[str, Any], budget: int) -> dict[str, Any]:
    """One golden's part of the page: its lines, and cards for its first `budget` described cases."""
    described = item.get("changed_cases") or []
    cards = [_card(case) for case in described[:max(budget, 0)]]
    return {"file": item["file"], "cases": item["cases"], "skipped": item.get("skipped"),
            "faults": item.get("faults") or [], "lines": item["changes"][:PAGE_LINES],
            "more_lines": max(0, len(item["changes"]) - PAGE_LINES), "recorded": build_text(item.get("recorded")),
            "live": build_text(item.get("live")), "builds_differ": item.get("recorded") != item.get("live"),
            "cards": cards, "hidden": len(described) - len(cards) + int(item.get("changed_cases_cut") or 0)}


def _card(case: dict[str, Any]) -> dict[str, Any]:
    if case.get("document"):
        shown = f"a long document of {case.get('input_bytes', 0):,} bytes (its record holds digests, not text)"
    elif "bytes" in case:
        shown = "bytes " + str(case["bytes"])
    else:
        shown = visible(str(case.get("text", "")))
    return {"case_id": case["case_id"], "input": shown, "input_bytes": case.get("input_bytes", 0),
            "cut": bool(case.get("cut")),
            "changes": [_change(change) for change in case.get("changes") or []]}


def _change(change: dict[str, Any]) -> dict[str, Any]:
    out = {"what": change["what"], "flags": change.get("flags", ""), "line": change.get("line", ""), "rows": []}
    if change["what"] == "ids":
        out["rows"] = _rows(change)
        out["first_diff"] = change["first_diff"]
        out["lengths"] = (change["before"]["length"], change["after"]["length"])
    elif change["what"] in ("detokenize", "crash"):
        out["before"], out["after"] = _side(change["before"]), _side(change["after"])
    return out


def _rows(change: dict[str, Any]) -> list[dict[str, Any]]:
    """Index by index from the window's start: before's id and piece, after's, and whether they differ."""
    before, after = change["before"], change["after"]
    rows = []
    for k in range(max(len(before["ids"]), len(after["ids"]))):
        index = change["start"] + k
        row = {"index": index, "differs": index >= change["first_diff"]}
        for name, side in (("before", before), ("after", after)):
            ids, pieces = side["ids"], side.get("pieces") or []
            row[name] = (ids[k], visible(pieces[k]) if k < len(pieces) else "") if k < len(ids) else ("", "")
        row["differs"] = row["differs"] and row["before"] != row["after"]
        rows.append(row)
    return rows


def _side(value: Any) -> str:
    if isinstance(value, dict):
        return "bytes " + str(value["bytes"]) if "bytes" in value else visible(str(value.get("text", "")))
    return str(value)
