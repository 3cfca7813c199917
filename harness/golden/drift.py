"""The golden drift check's result (`python -m harness drift --report DIR`): drift.json, its verdict, and shards merged.

drift.json holds one entry per golden file replayed, in the order drift took
them: the cases replayed, each changed behaviour as one line (the model's own
lines first, then the cases' in recorded order, as `files.diff_goldens` gives
them), the harness faults, the two llama.cpp builds when they differ, and the
reason a golden was skipped. A `--shard K/N` part also carries the partition's
record (`shard`) and holds only its own cases; its verdict line names the
shard, so a part never speaks for the whole. `merge` folds complete shards
(already put in shard order) back into the unsharded result: a golden split
between two shards is one entry again, its cases added and its lines joined.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..files.atomic import write_text_atomic

FILE = "drift.json"


def entry(name: str, *, cases: int = 0, changes: list[str] | None = None, faults: list[dict[str, Any]] | None = None,
          builds: list[dict[str, Any]] | None = None, skipped: str | None = None) -> dict[str, Any]:
    """One golden file's part of the result; `builds` is [recorded, replayed] when the llama.cpp builds differ."""
    return {"file": name, "cases": cases, "changes": list(changes or []), "faults": list(faults or []),
            "builds": builds, "skipped": skipped}


def result(golden: str, entries: list[dict[str, Any]], shard: dict[str, Any] | None = None) -> dict[str, Any]:
    """drift.json's content: the entries and their totals."""
    replayed = [e for e in entries if e["skipped"] is None]
    return {"kind": "drift", "golden": golden, "shard": shard, "goldens": entries,
            "summary": {"replayed": len(replayed), "changed": sum(bool(e["changes"]) for e in replayed),
                        "skipped": len(entries) - len(replayed), "cases": sum(e["cases"] for e in replayed),
                        "changes": sum(len(e["changes"]) for e in replayed),
                        "faults": sum(len(e["faults"]) for e in entries)}}


def exit_status(data: dict[str, Any]) -> int:
    """1 when behaviour changed, else 2 when a golden was skipped, else 0 (the command's exit codes)."""
    summary = data["summary"]
    return 1 if summary["changed"] else 2 if summary["skipped"] else 0


def verdict_line(data: dict[str, Any]) -> str:
    """The last line drift prints; a shard says it speaks for its own cases only."""
    s = data["summary"]
    shard = data.get("shard")
    head = "drift"
    where = "golden file(s)"
    if shard:  # its own part only: the whole is the merge of all N (merge-reports)
        head = f"drift, shard {shard['index']}/{shard['count']} ({shard['owned_units']} of {shard['units']} units)"
        where = "golden file(s), this shard's part of them"
    if s["changed"]:
        return f"{head}: behaviour changed in {s['changed']} of {s['replayed']} {where} replayed"
    return f"{head}: no change in {s['replayed']} {where}" + (f"; {s['skipped']} skipped" if s["skipped"] else "")


def write(data: dict[str, Any], out: Path) -> Path:
    """drift.json in `out`, written whole or not at all."""
    return write_text_atomic(Path(out) / FILE, json.dumps(data, ensure_ascii=False, indent=1) + "\n")


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several drift results as one: complete shards in shard order (`harness.runs.shard.order`) give the
    unsharded result; a golden split between neighbouring shards of one partition is one entry again."""
    entries: list[dict[str, Any]] = []
    before = None  # the partition of the part before, if a shard
    for part in parts:
        partition = (part.get("shard") or {}).get("partition")
        for i, item in enumerate(part["goldens"]):
            if i == 0 and partition is not None and partition == before and entries[-1]["file"] == item["file"]:
                last = entries[-1]
                last["cases"] += item["cases"]
                last["changes"] += item["changes"]
                last["faults"] += item["faults"]
                last["builds"] = last["builds"] or item["builds"]
                last["skipped"] = last["skipped"] or item["skipped"]
            else:
                entries.append({**item, "changes": list(item["changes"]), "faults": list(item["faults"])})
        if part["goldens"] or partition != before:
            before = partition
    return result(", ".join(dict.fromkeys(str(p.get("golden")) for p in parts)), entries)
