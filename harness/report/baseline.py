"""Two runs compared by difference signature: new, fixed, unchanged, not re-checked (docs/differences.md).

`sort(before, after, rechecked, reasons)` takes the baseline's difference records (`before`: token-level
ones of `harness.report.differences`, chat ones of `harness.chat.signature`), the run's (`after`), and
for each baseline signature whose representative input was checked again in the run the evidence of
it (`rechecked`: signature -> case id and input digest); it returns the report's `baseline` block:

- **new**: a signature of the run the baseline does not have;
- **unchanged**: a signature of both;
- **fixed**: a baseline signature the run does not show, whose representative input it checked again;
- **not re-checked**: a baseline signature the run does not show and did not check again (its model
  or template not in the run, not checked, its input not available...: `reasons` says why).

`lines(block)` is what the terminal prints (new first, each with its reproduce line), and
`exit_status(block, status)` the run's exit status with a baseline: 1 only for new differences.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..errors import EXIT_FOUND, EXIT_OK

LISTS = ("new", "fixed", "unchanged", "not_rechecked")
WORDS = {"new": "new", "fixed": "fixed", "unchanged": "unchanged", "not_rechecked": "not re-checked"}
LIST_CAP = 500   # entries per list in report.json; `counts` counts them all
SHOWN = 10       # entries per list on the terminal
IDENTITY = ("command", "date", "project", "engine", "llama_cpp_python", "llama_cpp", "seed", "duration_s",
            "host", "interrupted")


def input_digest(case: dict[str, Any]) -> str | None:
    """sha256 of a case's input bytes (`text` as UTF-8, or `bytes` as hex); None when it has neither."""
    if isinstance(case.get("bytes"), str):
        try:
            data = bytes.fromhex(case["bytes"])
        except ValueError:
            return None
    elif isinstance(case.get("text"), str):
        data = case["text"].encode("utf-8", "surrogatepass")
    else:
        return None
    return hashlib.sha256(data).hexdigest()


def conversation_digest(messages: Any, tools: Any, add_generation_prompt: Any) -> str:
    """sha256 of a chat case's conversation (its messages, tools and add_generation_prompt, canonical JSON)."""
    canon = json.dumps([messages, tools, add_generation_prompt], sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


def entry(record: dict[str, Any]) -> dict[str, Any]:
    """A difference record as a list entry: what it is, where, how many cases, how to reproduce it."""
    return {"id": record["id"], "title": record.get("title", record["id"]), "model": record.get("model", ""),
            "layer": record.get("layer") or _layer(record), "cases": int(record.get("cases") or 0),
            "reproduce": record.get("reproduce")}


def _layer(record: dict[str, Any]) -> str:
    title = str(record.get("title") or "")
    return title.split(":", 1)[0] if ":" in title else "?"


def sort(before: list[dict[str, Any]], after: list[dict[str, Any]], rechecked: dict[str, dict[str, Any]],
         reasons: dict[str, str], known: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """The four lists (see the module), each entry a difference's id, title, model, layer, cases, reproduce.

    `known`: signatures the run saw but set aside as expected (`--expected-differences`): a baseline
    difference among them is unchanged (marked `known`), never fixed."""
    old = {r["id"]: r for r in before}
    now = {r["id"]: r for r in after}
    lists: dict[str, list[dict[str, Any]]] = {name: [] for name in LISTS}
    for sig, record in now.items():
        if sig not in old:
            lists["new"].append(entry(record))
        else:
            lists["unchanged"].append({**entry(record), "baseline_cases": int(old[sig].get("cases") or 0),
                                       **rechecked.get(sig, {})})
    for sig, record in old.items():
        if sig in now:
            continue
        if sig in known:
            lists["unchanged"].append({**entry(record), "known": True, **rechecked.get(sig, {})})
        elif sig in rechecked:
            lists["fixed"].append({**entry(record), **rechecked[sig]})
        else:
            lists["not_rechecked"].append({**entry(record), "why": reasons.get(sig, "its input was not checked")})
    return {"counts": {name: len(items) for name, items in lists.items()},
            **{name: items[:LIST_CAP] for name, items in lists.items()}}


def identity(meta: dict[str, Any]) -> dict[str, Any]:
    """The baseline's meta fields that say which run it was (commit, date, builds, engine, seed, host)."""
    return {key: meta[key] for key in IDENTITY if key in meta}


def statuses(block: dict[str, Any]) -> dict[str, str]:
    """Signature id -> its status ("new", "unchanged"), for the run's own difference records."""
    return {e["id"]: name for name in ("new", "unchanged") for e in block.get(name) or []}


def exit_status(block: dict[str, Any], status: int, *, flakes: int = 0) -> int:
    """The exit status with a baseline: a run that found differences, none of them new and nothing
    else failing (`unsigned` findings, engine `flakes` not allowed), exits 0; anything else as it was
    (2 for what was not checked, 130/143 when stopped)."""
    if status == EXIT_FOUND and not block["counts"]["new"] and not block.get("unsigned") \
            and not block.get("incomplete") and not flakes:
        return EXIT_OK
    return status


def attach(report: dict[str, Any], block: dict[str, Any]) -> None:
    """`report` with its `baseline` block, and each of its difference records marked `baseline`: new or
    unchanged (the page shows new ones first)."""
    report["baseline"] = block
    status = statuses(block)
    for record in report.get("differences") or []:
        record["baseline"] = status.get(record["id"], "new")


def summary_line(block: dict[str, Any]) -> str:
    counts = block["counts"]
    what = ", ".join(f"{WORDS[name]} {counts[name]}" for name in LISTS)
    return f"against the baseline {block.get('report', '?')}{_when(block.get('meta') or {})}: {what}"


def _when(meta: dict[str, Any]) -> str:
    project = meta.get("project") or {}
    commit = project.get("commit")
    bits = [f"commit {commit[:12]}{' (dirty)' if project.get('dirty') else ''}" if commit else "",
            str(meta.get("date") or "")]
    shown = ", ".join(b for b in bits if b)
    return f" ({shown})" if shown else ""


def lines(block: dict[str, Any], first: int = SHOWN) -> list[str]:
    """The comparison for the terminal: the counts, then each list (new first) with reproduce lines."""
    out = [summary_line(block)]
    for name in LISTS:
        items = block.get(name) or []
        for item in items[:first]:
            extra = f"  ({item['cases']} case(s))" if name in ("new", "unchanged") else ""
            if name == "fixed" and item.get("case_id"):
                extra = f"  (its case {item['case_id']} checked again: no longer shows it)"
            if name == "not_rechecked":
                extra = f"  ({item.get('why')})"
            out.append(f"  {WORDS[name]:<14} {item['id']}  {item['model']}: {item['title']}{extra}")
            if name == "new" and item.get("reproduce"):
                out.append(f"      {item['reproduce']}")
        left = block["counts"][name] - min(len(items), first)
        if left > 0:
            out.append(f"  ... and {left} more {WORDS[name]} (report.json's baseline.{name})")
    if block.get("unsigned"):
        out.append(f"  {block['unsigned']} finding(s) carry no signature and cannot be compared: they count as new")
    if block.get("incomplete"):
        out.append(f"  {block['incomplete']}: it keeps the exit status it had")
    return out
