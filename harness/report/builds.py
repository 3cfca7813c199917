"""The result of a build comparison: builds.json, builds.html and its terminal lines.

`summary(...)` reads what the steps of `harness.runs.builds` wrote (the merged report.json and its
parts, the code-point screens, the chat comparison) and makes one document:

- `builds`: the pinned build and the other, each as it says of itself (llama-cpp-python's
  ggml version and commit; node-llama-cpp's package and the llama.cpp release it carries);
- `vocabularies`: per vocabulary, what each step compared and how much agrees (goldens and live
  corpora: ids and detokenize by case, per-token checks by vocabulary; code points by call), what
  the other build does not offer, and its differences;
- `differences`: one record per signature (`harness.compare.signature`) where the builds differ,
  with its title, cases and flag pairs, the shortest input's text or bytes and flags, both sides'
  ids and their pieces around the first difference, and both builds; `not_answered`: the same for
  what the other build answered with an error saying it cannot answer exactly (node-llama-cpp's
  `NotExact`): neither agreement nor a difference between the builds;
- the chat templates' comparison (its signed findings) and the code points that differ.

The exit status: 0 when everything compared agrees, 1 when the builds differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..files.atomic import write_text_atomic
from ..files.input_limits import MAX_REPORT_BYTES, read_side_json
from .templating import environment

KIND = "gguf-parity builds"
VERSION = 1
FILE = "builds.json"
PAGE = "builds.html"
WINDOW = 24                  # ids shown either side of the first difference
SHOWN_DIFFERENCES = 500      # difference records kept in builds.json (all are counted)
CHECKS = ("ids", "detokenize", "pieces", "text", "score", "attr", "vocab_info", "specials", "eog", "control")
NOT_ANSWERED = ("NotExact",)  # engine errors by which the other build says it cannot answer exactly


def _report(folder: Path) -> dict[str, Any] | None:
    path = Path(folder) / "report.json"
    if not path.is_file():
        return None
    data = read_side_json(path, "a step's report", limit=MAX_REPORT_BYTES)
    return data if isinstance(data, dict) else None


def summary(*, against: str, report: Path, steps: dict[str, Any], chat: dict[str, Any]) -> dict[str, Any]:
    """builds.json's content from the steps' outputs in `report`."""
    builds = steps["builds"]
    merged = _report(report) or {}
    parts = {_part_name(Path(p), report): _report(Path(p)) for p in steps.get("parts", [])}
    records = [_difference(r, builds) for r in merged.get("differences") or []]
    differ = [r for r in records if r["answered"]]
    not_answered = [r for r in records if not r["answered"]]
    chat_findings = chat.get("findings") or []
    points = steps.get("code_points", {}).get("vocabularies", [])
    data = {
        "kind": KIND, "version": VERSION, "against": against, "builds": builds,
        "vocabularies": vocabulary_rows(parts, points, records),
        "code_points": points, "chat": chat,
        "differences": differ[:SHOWN_DIFFERENCES], "not_answered": not_answered[:SHOWN_DIFFERENCES],
        "steps": {k: v for k, v in steps.items() if k not in ("builds", "code_points")},
        "meta": merged.get("meta") or {},
    }
    data["counts"] = {
        "differences": len(differ), "not_answered": len(not_answered),
        "code_point_calls_differ": sum(int(r.get("differ", 0)) for r in points),
        "code_points_differ": sum(len(r.get("code_points") or []) for r in points),
        "chat_differ": int(chat.get("findings_total", len(chat_findings))),
        "failed_steps": failed_steps(steps),
    }
    data["verdict"] = verdict_line(data)
    return data


def _part_name(part: Path, report: Path) -> str:
    """`golden`, `live/main`: a step's folder below the comparison's."""
    return part.relative_to(report).as_posix() if part.is_relative_to(report) else part.name


def failed_steps(steps: dict[str, Any]) -> list[str]:
    """The steps that did not give their verdict (exit status 2 or more, or none at all)."""
    out = []
    for name in ("golden", "merge"):
        step = steps.get(name)
        if step is not None and step.get("exit_code") not in (0, 1):
            out.append(name)
    out += [f"live/{s['part']}" for s in steps.get("live", []) if s.get("exit_code") not in (0, 1)]
    return out


def _window(ids: Any, at: Any) -> dict[str, Any] | None:
    if not isinstance(ids, list):
        return None
    start = max(0, (at if isinstance(at, int) else 0) - WINDOW)
    return {"from": start, "ids": ids[start:start + 2 * WINDOW], "of": len(ids)}


def _difference(record: dict[str, Any], builds: dict[str, Any]) -> dict[str, Any]:
    """One signature's record as the build comparison shows it: the input, flags, both sides."""
    rep = record.get("representative") or {}
    out: dict[str, Any] = {k: record.get(k) for k in ("id", "title", "model", "list", "kind", "cases", "findings",
                                                      "flags", "case_ids", "reproduce")}
    out["input"] = {"case_id": rep.get("case_id"), "text": rep.get("text"), "bytes": rep.get("bytes")}
    out["flag_pair"] = {"add_special": rep.get("add_special"), "parse_special": rep.get("parse_special")}
    at = rep.get("first_diff")
    pinned: dict[str, Any] = {"ids": _window(rep.get("expected"), at), "piece": rep.get("expected_piece")}
    other: dict[str, Any] = {"ids": _window(rep.get("got"), at), "piece": rep.get("got_piece")}
    out["aligned"] = rep.get("aligned") or []
    if rep.get("detokenize"):
        out["detokenize"] = rep["detokenize"]
    if record.get("list") == "engine_errors":
        other["error"] = str(rep.get("error") or "")[:1000]
        out["capability"] = rep.get("capability")
    if record.get("list") == "vocab_mismatches":
        out["field"], out["token"] = rep.get("field"), rep.get("token")
        pinned["value"], other["value"] = rep.get("expected"), rep.get("got")
    if record.get("list") in ("oracle_crashes", "known_oracle_crashes"):
        pinned["crash"] = rep.get("crash")
    out["pinned"], out["other"] = pinned, other
    error = str(rep.get("error") or "")
    out["answered"] = not (record.get("list") == "engine_errors" and error.startswith(NOT_ANSWERED))
    out["builds"] = {side: (builds.get(side) or {}).get("description") for side in ("pinned", "other")}
    return out


def _checks(report: dict[str, Any] | None, model: str) -> dict[str, Any] | None:
    if report is None:
        return None
    row = (report.get("summary") or {}).get("per_model", {}).get(model)
    if row is None:
        return None
    caps = row.get("capabilities") or {}
    out: dict[str, Any] = {"cases": row.get("cases", 0), "not_checked": row.get("not_checked")}
    for check in CHECKS:
        cap = caps.get(check) or {}
        out[check] = {k: cap.get(k, 0) for k in ("checked", "agree", "differ", "errors", "not_applicable")}
        out[check]["status"] = cap.get("status", "not offered")
    return out


def vocabulary_rows(parts: dict[str, dict[str, Any] | None], points: list[dict[str, Any]],
                    records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per vocabulary any step checked: the goldens', the live run's and the code points' counts."""
    models: list[str] = []
    for report in parts.values():
        for model in ((report or {}).get("summary") or {}).get("per_model", {}):
            if model not in models:
                models.append(model)
    by_points = {p["vocabulary"]: p for p in points}
    models += [m for m in by_points if m not in models]
    rows = []
    for model in models:
        golden = _checks(parts.get("golden"), model)
        live = next((c for name, r in parts.items() if name.startswith("live/")
                     for c in [_checks(r, model)] if c is not None), None)
        mine = [r for r in records if r.get("model") == model]
        rows.append({"model": model, "golden": golden, "live": live, "code_points": _point_row(by_points.get(model)),
                     "differences": sum(r["answered"] for r in mine),
                     "not_answered": sum(not r["answered"] for r in mine)})
    return rows


def _point_row(result: dict[str, Any] | None) -> dict[str, Any] | None:
    if result is None:
        return None
    keys = ("status", "why", "calls", "agree", "differ", "not_offered", "errors", "narrowed", "cases")
    return {**{k: result.get(k) for k in keys}, "code_points": len(result.get("code_points") or [])}


def verdict_line(data: dict[str, Any]) -> str:
    counts, builds = data["counts"], data["builds"]
    head = (f"{builds['other'].get('description')} against the pinned "
            f"{builds['pinned'].get('description')}: ")
    parts = [f"{counts['differences']} difference(s)", f"{counts['not_answered']} not answered exactly",
             f"code points: {counts['code_point_calls_differ']} call(s) differ "
             f"({counts['code_points_differ']} code point(s) named)"]
    chat = data["chat"]
    parts.append(f"chat: {counts['chat_differ']} difference(s)" if chat.get("status") == "compared"
                 else f"chat: {chat.get('why', 'not compared')}")
    if counts["failed_steps"]:
        parts.append(f"steps that gave no verdict: {', '.join(counts['failed_steps'])}")
    return head + "; ".join(parts)


def exit_status(data: dict[str, Any]) -> int:
    """1 when the builds differ anywhere, 2 when a step gave no verdict and nothing differs, else 0."""
    counts = data["counts"]
    if counts["differences"] or counts["code_point_calls_differ"] or counts["chat_differ"]:
        return 1
    return 2 if counts["failed_steps"] else 0


def terminal_lines(data: dict[str, Any], first: int = 10) -> list[str]:
    """The table per vocabulary in short, then the first differences with their pieces."""
    out = []
    for row in data["vocabularies"]:
        cells = [f"{row['model']}:"]
        for where in ("golden", "live"):
            checks = row.get(where)
            if checks:
                ids, detok = checks["ids"], checks["detokenize"]
                cells.append(f"{where} ids {ids['agree']}/{ids['checked']}, detokenize {detok['agree']}/"
                             f"{detok['checked']}")
        points = row.get("code_points")
        if points and points.get("status") == "compared":
            cells.append(f"code points {points['agree']}/{points['agree'] + points['differ']} calls")
        cells.append(f"{row['differences']} difference(s), {row['not_answered']} not answered")
        out.append("  " + " ".join(cells))
    for record in data["differences"][:first]:
        out.append(f"  {record['id']}  {record['model']}: {record['title']}  ({record['cases']} case(s))")
        pinned, other = record["pinned"].get("piece"), record["other"].get("piece")
        if pinned is not None or other is not None:
            out.append(f"      pinned {pinned!s:.60} | other {other!s:.60}")
    return out


def write(data: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """builds.json and builds.html in `out`, each whole or not at all."""
    path = write_text_atomic(Path(out) / FILE, json.dumps(data, indent=1, ensure_ascii=False) + "\n", "builds.json")
    page = environment().get_template("builds.html.j2").render(data=data)
    return path, write_text_atomic(Path(out) / PAGE, page, "builds.html")
