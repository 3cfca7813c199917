"""A run's findings grouped by difference: one record per signature, and a report.json that stays small.

`group(report)` reads every finding of the report's lists (each carries the `signature` its judge
gave it, `harness.compare.signature`) and makes one record per signature: what it is (the signature's
parts and title), how many cases and findings show it and under which flag pairs, the first
`CASE_IDS` case ids, whether the fuzzer found it, and one representative finding, the one of the
shortest input, with its reproduce command. docs/differences.md specifies the records.

`bounded(report)` is what report.json holds: the finding lists cut to `LIST_CAP` entries per model
and list (each signature's representative first; `per_model[m].listed` says what was kept), the
differences to `DIFFERENCES_CAP` per model. `finding_lines(report)` is every finding as one compact
line (case, flags, list, signature), for `findings/<model>.jsonl` beside it. `merge(records)` folds
the records of several reports (shards) by signature.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..compare.diff import TokenTable
from ..compare.result import FINDINGS
from ..compare.signature import entry_signature, other_signature

LIST_CAP = 40          # entries per model and finding list in report.json (all in findings/<model>.jsonl)
DIFFERENCES_CAP = 50   # difference records per model in report.json (the rest counted)
CASE_IDS = 20          # case ids listed per difference
CAPPED = ("mismatches", "engine_errors", "vocab_mismatches", "reference_findings", "known_differences")
KINDS = {"bytes": "different bytes", "split": "split differently", "edges": "BOS/EOS/SEP placement",
         "id": "same piece, another id", "length": "tokens missing at the end", "field": "vocabulary field"}
_EMPTY = TokenTable()


def signature_of(kind: str, entry: dict) -> tuple[str, str]:
    """(id, title) of an entry's signature; one the judge did not sign (a load crash) is signed here."""
    if entry.get("signature"):
        return str(entry["signature"]), str(entry.get("signature_title") or entry["signature"])
    try:
        found = entry_signature(str(entry.get("model", "")), kind, entry, _EMPTY)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):  # a part from elsewhere: data, not ours
        found = other_signature(str(entry.get("model", "")), "?", "unsigned", kind)
    return found.id, found.title


def flag_name(entry: dict) -> str:
    if entry.get("add_special") is None:
        return "all flag pairs"
    return f"add_special={entry.get('add_special')} parse_special={entry.get('parse_special')}"


def input_size(entry: dict) -> int:
    """The finding's input length in bytes (its whole length when the entry shows a window)."""
    window = entry.get("text_window")
    if isinstance(window, list) and len(window) == 3:
        return int(window[2])
    if entry.get("bytes"):
        return len(str(entry["bytes"])) // 2
    return len(str(entry.get("text") or "").encode("utf-8", "surrogatepass"))


def group(report: dict) -> list[dict]:
    """One record per signature over every finding list, most cases first (then model, title)."""
    records: dict[str, dict] = {}
    for kind in FINDINGS:
        for entry in report.get(kind) or []:
            sig, title = signature_of(kind, entry)
            record = records.get(sig)
            if record is None:
                record = records[sig] = _new(sig, title, kind, entry)
            _add(record, entry)
    return sorted((_finish(r) for r in records.values()), key=lambda r: (-r["cases"], r["model"], r["title"]))


def _new(sig: str, title: str, kind: str, entry: dict) -> dict:
    return {"id": sig, "title": title, "model": entry.get("model", ""), "list": kind,
            "kind": _kind_word(title), "cases": 0, "findings": 0, "flags": {}, "case_ids": [], "fuzz": False,
            "_cases": set(), "_best": None}


def _kind_word(title: str) -> str:
    """The category of a difference: its signature's kind in words (a rule, `harness.compare.signature`)."""
    word = title.split(":", 1)[1].split()[0] if ":" in title else ""
    return KINDS.get(word, title.split(":", 1)[0] if ":" in title else "uncategorised")


def _add(record: dict, entry: dict) -> None:
    record["findings"] += 1
    flags = flag_name(entry)
    record["flags"][flags] = record["flags"].get(flags, 0) + 1
    record["fuzz"] = record["fuzz"] or bool(entry.get("fuzz"))
    case_id = str(entry.get("case_id"))
    if case_id not in record["_cases"]:
        record["_cases"].add(case_id)
        if len(record["case_ids"]) < CASE_IDS:
            record["case_ids"].append(case_id)
    best = record["_best"]
    if best is None or input_size(entry) < input_size(best):
        record["_best"] = entry


def _finish(record: dict) -> dict:
    best = record.pop("_best")
    record["cases"] = len(record.pop("_cases"))
    record["representative"] = best
    record["reproduce"] = best.get("command")
    return record


def merge(parts: Iterable[list[dict]]) -> list[dict]:
    """The difference records of several reports folded by signature (shards of one run)."""
    records: dict[str, dict] = {}
    for part in parts:
        for record in part:
            into = records.get(record["id"])
            if into is None:
                records[record["id"]] = {**record, "flags": dict(record["flags"]), "case_ids": list(record["case_ids"])}
                continue
            into["cases"] += record["cases"]
            into["findings"] += record["findings"]
            into["fuzz"] = into["fuzz"] or record["fuzz"]
            for flags, n in record["flags"].items():
                into["flags"][flags] = into["flags"].get(flags, 0) + n
            into["case_ids"] = (into["case_ids"] + [c for c in record["case_ids"] if c not in into["case_ids"]])[
                :CASE_IDS]
            if input_size(record["representative"]) < input_size(into["representative"]):
                into["representative"], into["reproduce"] = record["representative"], record["reproduce"]
    return sorted(records.values(), key=lambda r: (-r["cases"], r["model"], r["title"]))


def per_model(records: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for record in records:
        out[record["model"]] = out.get(record["model"], 0) + 1
    return out


# --- what report.json holds --------------------------------------------------------------------------

def bounded(report: dict) -> dict:
    """`report` as report.json holds it: finding lists and differences capped per model (see the module)."""
    keep = {r["id"] for r in _capped_records(report.get("differences") or [])}
    out = {**report, "differences": [r for r in report.get("differences") or [] if r["id"] in keep]}
    listed: dict[str, dict[str, int]] = {}
    for kind in CAPPED:
        entries = report.get(kind) or []
        out[kind] = _cap(kind, entries, listed)
    if listed:
        summary = {**report["summary"], "per_model": {m: dict(c) for m, c in report["summary"]["per_model"].items()}}
        for model, kinds in listed.items():
            if model in summary["per_model"]:
                summary["per_model"][model]["listed"] = kinds
        out["summary"] = summary
    return out


def _capped_records(records: list[dict]) -> list[dict]:
    seen: dict[str, int] = {}
    out = []
    for record in records:
        n = seen.get(record["model"], 0)
        if n < DIFFERENCES_CAP:
            out.append(record)
        seen[record["model"]] = n + 1
    return out


def _cap(kind: str, entries: list[dict], listed: dict[str, dict[str, int]]) -> list[dict]:
    """At most `LIST_CAP` entries per model: the first of each signature first, then in order."""
    by_model: dict[str, list[dict]] = {}
    for entry in entries:
        by_model.setdefault(str(entry.get("model", "")), []).append(entry)
    out = []
    for model, mine in by_model.items():
        if len(mine) <= LIST_CAP:
            out += mine
            continue
        firsts: list[dict] = []
        rest: list[dict] = []
        seen: set[str] = set()
        for entry in mine:
            sig = signature_of(kind, entry)[0]
            (rest if sig in seen else firsts).append(entry)
            seen.add(sig)
        out += (firsts + rest)[:LIST_CAP]
        listed.setdefault(model, {})[kind] = LIST_CAP
    return out


def finding_lines(report: dict) -> dict[str, list[dict]]:
    """Every finding of every list as a compact line, by model: case, flags, list, signature."""
    lines: dict[str, list[dict]] = {}
    for kind in FINDINGS:
        for entry in report.get(kind) or []:
            line = {"case_id": entry.get("case_id"), "list": kind, "signature": signature_of(kind, entry)[0]}
            if entry.get("add_special") is not None:
                line.update(add_special=entry["add_special"], parse_special=entry["parse_special"])
            for key in ("class", "category", "first_diff", "fuzz"):
                if entry.get(key) is not None:
                    line[key] = entry[key]
            lines.setdefault(str(entry.get("model", "")), []).append(line)
    return lines


def terminal_lines(report: dict, first: int = 10) -> list[str]:
    """The differences for the terminal: one line each (the first `first`), with its reproduce command."""
    records = report.get("differences") or []
    if not records:
        return []
    out = [f"{len(records)} distinct difference(s):"]
    for record in records[:first]:
        flags = len(record["flags"])
        out.append(f"  {record['id']}  {record['model']}: {record['title']}  "
                   f"({record['cases']} case(s), {flags} flag pair(s){', fuzz' if record['fuzz'] else ''})")
        if record.get("reproduce"):
            out.append(f"      {record['reproduce']}")
    if len(records) > first:
        out.append(f"  ... and {len(records) - first} more (report.json's differences)")
    return out


def describe_cap(report: dict) -> list[dict[str, Any]]:
    """(model, list, listed, counted) rows for the lists report.json cut."""
    rows = []
    for model, counts in sorted(report["summary"]["per_model"].items()):
        for kind, n in (counts.get("listed") or {}).items():
            rows.append({"model": model, "list": kind, "listed": n, "counted": counts.get(kind, 0)})
    return rows
