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

Each entry also names both llama.cpp builds, always (`recorded`: the golden's, `live`: the one
replayed), and describes its changed cases in structure (`changed_cases`, `case_changes`): per
case its id and input (text cut to `MAX_TEXT` characters), and per change the flag pair, what
changed (`ids`, `detokenize`, `crash`, `document`, `missing`, `record`), and before and after:
the ids windowed around the first difference (`WINDOW`), with their pieces once the command
has spelled them (`spell`, llama.cpp's live table for both sides, so the pieces of a vocabulary
that changed are the new ones). At most `MAX_CASES` cases per golden are described so
(`changed_cases_cut` counts the rest; every change keeps its line in `changes`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..files.atomic import write_text_atomic

FILE = "drift.json"


MAX_CASES = 100   # changed cases described in structure per golden (every change keeps its line)
MAX_TEXT = 400    # characters of a changed case's input shown
WINDOW = (8, 24)  # ids shown before and from the first difference of an id list


def entry(name: str, *, cases: int = 0, changes: list[str] | None = None, faults: list[dict[str, Any]] | None = None,
          builds: list[dict[str, Any]] | None = None, skipped: str | None = None,
          recorded: dict[str, Any] | None = None, live: dict[str, Any] | None = None,
          changed_cases: list[dict[str, Any]] | None = None, cut: int = 0) -> dict[str, Any]:
    """One golden file's part of the result; `builds` is [recorded, replayed] when the llama.cpp builds differ,
    `recorded` and `live` name them always (None for a golden skipped before it was read)."""
    return {"file": name, "cases": cases, "changes": list(changes or []), "faults": list(faults or []),
            "builds": builds, "skipped": skipped, "recorded": recorded, "live": live,
            "changed_cases": list(changed_cases or []), "changed_cases_cut": cut}


def result(golden: str, entries: list[dict[str, Any]], shard: dict[str, Any] | None = None) -> dict[str, Any]:
    """drift.json's content: the entries and their totals."""
    replayed = [e for e in entries if e["skipped"] is None]
    return {"kind": "drift", "golden": golden, "shard": shard, "builds": builds_of(entries), "goldens": entries,
            "summary": {"replayed": len(replayed), "changed": sum(bool(e["changes"]) for e in replayed),
                        "skipped": len(entries) - len(replayed), "cases": sum(e["cases"] for e in replayed),
                        "changes": sum(len(e["changes"]) for e in replayed),
                        "faults": sum(len(e["faults"]) for e in entries)}}


def builds_of(entries: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Both sides' llama.cpp builds over every golden: the distinct recorded ones and the distinct live ones."""
    out: dict[str, list[dict[str, Any]]] = {"recorded": [], "live": []}
    for item in entries:
        for side in out:
            build = item.get(side)
            if build is not None and build not in out[side]:
                out[side].append(build)
    return out


# --- the changed cases, in structure ----------------------------------------------------------------

def case_changes(old: dict[str, Any], new: dict[str, Any], *, limit: int = MAX_CASES) -> tuple[list[dict], int]:
    """(the first `limit` changed cases of `old` described in structure, how many more changed).

    `old` and `new` are two recordings of one golden's cases (unpacked, as `files.load_golden` and
    `record_model` give them); a case is changed when `files.diff_cases` has a line for it.
    """
    from .files import diff_cases

    new_cases = {c["id"]: c for c in new["cases"]}
    out: list[dict] = []
    more = 0
    for case in old["cases"]:
        other = new_cases.get(case["id"])
        if other is not None and not diff_cases(case, other):
            continue
        if len(out) >= limit:
            more += 1
            continue
        out.append({"case_id": str(case["id"]), **input_shown(case), "changes": _changes(case, other)})
    return out, more


def input_shown(case: dict[str, Any]) -> dict[str, Any]:
    """A case's input for a reader: its text (or hex bytes) cut to `MAX_TEXT` characters (`cut` says so) and its
    full size in bytes; a document by its size alone (its record holds no text)."""
    if "document" in case:
        return {"document": True, "input_bytes": int(case["document"].get("size", 0))}
    if "bytes" in case:
        data = str(case["bytes"])
        return {"bytes": data[:2 * MAX_TEXT], "input_bytes": len(data) // 2, "cut": len(data) > 2 * MAX_TEXT}
    text = str(case.get("text", ""))
    return {"text": text[:MAX_TEXT], "input_bytes": len(text.encode("utf-8", "surrogatepass")),
            "cut": len(text) > MAX_TEXT}


def _changes(old: dict[str, Any], new: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One changed case's changes: per flag pair, what changed and before and after."""
    from .files import diff_cases

    if new is None:
        return [{"what": "missing", "line": "missing from the new recording"}]
    if "crash" in old or "crash" in new:
        return [{"what": "crash", "before": _crash(old), "after": _crash(new), "line": diff_cases(old, new)[0]}]
    if "digest" in old or "digest" in new:
        return [{"what": "document", "line": line} for line in diff_cases(old, new)]
    out = []
    for a, b in zip(old.get("encode") or [], new.get("encode") or []):
        flags = f"add_special={a['add_special']} parse_special={a['parse_special']}"
        if a["ids"] != b["ids"]:
            out.append({"what": "ids", "flags": flags, **_id_window(a["ids"], b["ids"])})
            continue
        for da, db in zip(a["detokenize"], b["detokenize"]):
            if da != db:
                out.append({"what": "detokenize", "ids": a["ids"][:WINDOW[1]],
                            "flags": f"{flags} remove_special={da['remove_special']} "
                                     f"unparse_special={da['unparse_special']}",
                            "before": _output(da), "after": _output(db)})
    return out or [{"what": "record", "line": diff_cases(old, new)[0]}]


def _id_window(before: list[int], after: list[int]) -> dict[str, Any]:
    """Both id lists from a little before their first difference (`WINDOW`), and where that is."""
    first = next((i for i, (x, y) in enumerate(zip(before, after)) if x != y), min(len(before), len(after)))
    start = max(0, first - WINDOW[0])
    end = first + WINDOW[1]
    return {"first_diff": first, "start": start,
            "before": {"ids": before[start:end], "length": len(before)},
            "after": {"ids": after[start:end], "length": len(after)}}


def _output(record: dict[str, Any]) -> dict[str, Any]:
    if "bytes" in record:
        return {"bytes": record["bytes"][:2 * MAX_TEXT]}
    return {"text": str(record.get("text", ""))[:MAX_TEXT]}


def _crash(case: dict[str, Any]) -> str:
    crash = case.get("crash")
    return "answered" if not crash else f"llama.cpp crash ({crash['kind']} {crash['signal'] or crash['exit']})"


def ids_to_spell(changed: list[dict[str, Any]], n_tokens: int) -> list[int]:
    """The distinct ids the described changes show, those of the live vocabulary only (`spell` them)."""
    seen: dict[int, None] = {}
    for case in changed:
        for change in case["changes"]:
            for side in ("before", "after"):
                for token in (change.get(side) or {}).get("ids", []) if change["what"] == "ids" else []:
                    if 0 <= int(token) < n_tokens:
                        seen[int(token)] = None
    return list(seen)


def spell(changed: list[dict[str, Any]], pieces: dict[int, str]) -> None:
    """Each described id list given its pieces (`pieces`: id -> token text, llama.cpp's live table); an id the
    table does not have (outside the live vocabulary) is shown as `?`."""
    for case in changed:
        for change in case["changes"]:
            if change["what"] != "ids":
                continue
            for side in ("before", "after"):
                change[side]["pieces"] = [pieces.get(int(t), "?") for t in change[side]["ids"]]


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
                _join_changed(last, item)
            else:
                entries.append({**item, "changes": list(item["changes"]), "faults": list(item["faults"]),
                                "changed_cases": list(item.get("changed_cases") or [])})
        if part["goldens"] or partition != before:
            before = partition
    return result(", ".join(dict.fromkeys(str(p.get("golden")) for p in parts)), entries)


def _join_changed(last: dict[str, Any], item: dict[str, Any]) -> None:
    """A golden's next shard folded into its entry: the builds it names, its described cases (`MAX_CASES`)."""
    for side in ("recorded", "live"):
        last[side] = last.get(side) or item.get(side)
    cases = list(last.get("changed_cases") or []) + list(item.get("changed_cases") or [])
    last["changed_cases"] = cases[:MAX_CASES]
    last["changed_cases_cut"] = (int(last.get("changed_cases_cut") or 0) + int(item.get("changed_cases_cut") or 0)
                                 + len(cases) - len(last["changed_cases"]))
