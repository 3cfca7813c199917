"""What report.html leads with: one line per difference, then one card per difference, each list bounded.

A run's findings are grouped by signature (`harness.report.differences`); the page shows what a
reviewer acts on, the differences, before the counts:

- `lines(report)`: one line per difference (what: its title and category; where: model and sides;
  how many cases, findings and flag pairs; its reproduce line), the first `LINES_PER_MODEL` of each
  model, new ones first when the run was compared with a baseline (report.json's `baseline` block);
- `difference_cards(report, every)`: one card per difference, drawn from its representative case
  (`harness.report.cards.difference_card`), the first `CARDS_PER_MODEL` of each model; `every` is the
  report whose lists hold every finding, so that a card groups all the flag pairs of its case;
- `fixed(report)`: the baseline's differences this run no longer shows (or did not check again).

A difference's category is its signature's kind in words (`differences.KINDS`, a rule pinned by
tests/compare/test_signature.py), or the layer for what is a fact of the run (an engine error, a
llama.cpp crash); anything else is "uncategorised". The comparator's per-finding guess (`category`
of `harness.compare.diff.classify`) is never shown as a difference's category: it gives one bug
several names. Nothing here grows with the number of findings: every list is cut, and says how many
it left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..compare.diff import TokenTable
from ..compare.result import FINDINGS
from ..compare.signature import entry_signature
from . import cards, differences

LINES_PER_MODEL = 50    # difference lines drawn per model (report.json keeps `DIFFERENCES_CAP`)
CARDS_PER_MODEL = 12    # difference cards drawn per model
FIXED_SHOWN = 50        # fixed differences of the baseline listed
UNCATEGORISED = "uncategorised"
LAYER_FACTS = {"engine error": "engine error", "llama.cpp crash": "llama.cpp crash",
               "reference error": "reference error"}   # the layer itself is the category: a fact, not a guess
STATUS_ORDER = {"new": 0, "unchanged": 1, "not re-checked": 2}
_EMPTY = TokenTable()


def category(record: dict) -> str:
    """A difference's category: its signature's kind in words, the layer where that is a fact, else
    "uncategorised" (a golden document's digest, a detokenization that differs in no byte)."""
    layer, kind = layer_and_kind(record)
    if layer in ("ids", "detokenize", "vocabulary") and kind in differences.KINDS:
        return differences.KINDS[kind]
    if layer == "detokenize" and kind == "missing":
        return "detokenize missing"
    return LAYER_FACTS.get(layer, UNCATEGORISED)


def layer_and_kind(record: dict) -> tuple[str, str]:
    """(layer, kind) of a record: its own fields when it has them, else read from its title
    (`"<layer>: <kind> <parts>"`, `harness.compare.signature.Signature.title`)."""
    if record.get("layer") and record.get("kind") in differences.KINDS:
        return str(record["layer"]), str(record["kind"])
    title = str(record.get("title") or "")
    layer, _, rest = title.partition(": ")
    return layer, rest.split(" ", 1)[0] if rest else ""


def sides(record: dict) -> str:
    """Which sides a difference is between: the record's `sides`, else its representative's."""
    if record.get("sides"):
        return str(record["sides"])
    entry = record.get("representative") or {}
    try:
        return entry_signature(str(record.get("model", "")), str(record.get("list", "")), entry, _EMPTY).sides
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):  # a malformed representative: display only
        return "?"


# --- the baseline (`run --baseline`): each difference's status --------------------------------------

def statuses(report: dict) -> dict[str, str]:
    """Signature id -> "new", "unchanged" or "not re-checked", from report.json's `baseline` block."""
    block = report.get("baseline")
    if not isinstance(block, dict):
        return {}
    out = {}
    for status in ("new", "unchanged", "not re-checked"):
        for item in _baseline_list(block, status):
            out[item["id"]] = status
    return out


def fixed(report: dict, status: str = "fixed") -> tuple[list[dict], int]:
    """The baseline's differences this run shows no more (`status` "fixed": checked again; "not re-checked":
    not), the first `FIXED_SHOWN`, and how many more."""
    block = report.get("baseline")
    if not isinstance(block, dict):
        return [], 0
    items = _baseline_list(block, status)
    counted = (block.get("counts") or {}).get(BASELINE_KEYS[status])  # the block lists `baseline.LIST_CAP`
    total = max(counted if isinstance(counted, int) else 0, len(items))
    return items[:FIXED_SHOWN], total - min(len(items), FIXED_SHOWN)


BASELINE_KEYS = {"new": "new", "unchanged": "unchanged", "fixed": "fixed", "not re-checked": "not_rechecked"}


def _baseline_list(block: dict, status: str) -> list[dict]:
    """One of the block's lists (`harness.report.baseline.LISTS`), each item as a dict with an `id`."""
    items = block.get(BASELINE_KEYS[status])
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            out.append({"id": item, "title": item})
        elif isinstance(item, dict) and isinstance(item.get("id"), str):
            out.append({**item, "title": str(item.get("title") or item["id"])})
    return out


# --- the lines --------------------------------------------------------------------------------------

def ordered(report: dict) -> list[dict]:
    """The report's difference records, new ones first when there is a baseline, each with its status."""
    status = statuses(report)
    records = [{**r, "status": status.get(r["id"])} for r in report.get("differences") or []
               if isinstance(r, dict) and "id" in r]
    return sorted(records, key=lambda r: STATUS_ORDER.get(r["status"], 1) if status else 0)


def lines(report: dict) -> tuple[list[dict], dict[str, int]]:
    """(the lines drawn, per model how many differences have no line: report.json keeps `DIFFERENCES_CAP`
    records per model, and its summary counts them all)."""
    records = ordered(report)
    drawn, left = _per_model(records, LINES_PER_MODEL)
    per_model = (report.get("summary") or {}).get("per_model") or {}
    held = differences.per_model(records)
    for model, counts in per_model.items():
        unlisted = int((counts or {}).get("differences") or 0) - held.get(model, 0)  # cut from report.json
        if unlisted > 0:
            left[model] = left.get(model, 0) + unlisted
    return [line(r) for r in drawn], left


def line(record: dict) -> dict[str, Any]:
    flags = record.get("flags") or {}
    return {"id": record["id"], "title": record.get("title", record["id"]), "category": category(record),
            "model": record.get("model", ""), "sides": sides(record), "cases": record.get("cases", 0),
            "findings": record.get("findings", 0), "flag_pairs": len(flags), "flags": sorted(flags),
            "fuzz": bool(record.get("fuzz")), "reproduce": cards.clip(record.get("reproduce") or ""),
            "status": record.get("status")}


def _per_model(records: Iterable[dict], most: int) -> tuple[list[dict], dict[str, int]]:
    seen: dict[str, int] = {}
    drawn = []
    for record in records:
        model = str(record.get("model", ""))
        seen[model] = seen.get(model, 0) + 1
        if seen[model] <= most:
            drawn.append(record)
    return drawn, {m: n - most for m, n in seen.items() if n > most}


# --- the cards --------------------------------------------------------------------------------------

def difference_cards(report: dict, every: dict | None = None) -> tuple[list[dict], int]:
    """One card per difference (the first `CARDS_PER_MODEL` of each model, in the lines' order), and how
    many differences have no card. `every`: the report whose lists hold every finding (default `report`)."""
    drawn, left = _per_model(ordered(report), CARDS_PER_MODEL)
    found = _case_entries(every or report, drawn)
    out = []
    for record in drawn:
        card = cards.difference_card(record, found.get(record["id"], []))
        out.append({**card, **line(record)})
    return out, sum(left.values())


def _case_entries(report: dict, records: list[dict]) -> dict[str, list[dict]]:
    """Signature id -> the findings of its representative's case that show it (every flag pair), in the
    report's order; for a vocabulary difference, its first `cards.VOCAB_ROWS` tokens."""
    wanted = {r["id"]: str((r.get("representative") or {}).get("case_id")) for r in records}
    out: dict[str, list[dict]] = {sig: [] for sig in wanted}
    for kind in FINDINGS:
        for entry in report.get(kind) or []:
            sig = str(entry.get("signature") or _signature(kind, entry))
            if sig not in wanted:
                continue
            mine = out[sig]
            vocab = kind == "vocab_mismatches"
            if len(mine) < (cards.VOCAB_ROWS if vocab else cards.PAIRS) and (
                    vocab or str(entry.get("case_id")) == wanted[sig]):
                mine.append(entry)
    return out


def _signature(kind: str, entry: dict) -> str | None:
    """The signature of an entry a report carries unsigned (written before signatures), or None when its
    fields cannot make one (a merged part's entry is checked by merge-reports only for what merging reads)."""
    try:
        return differences.signature_of(kind, entry)[0]
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return None


# --- the tables below the cards -----------------------------------------------------------------------

SIDE_ROWS = 50          # rows of each side table (engine flakes, harness faults), and of each known crash
MESSAGES_SHOWN = 30     # message-level findings drawn (messages.json keeps them all)
META_CHARS = 500        # characters of one meta value
SHORT_CELL = 600        # characters of one cell of a side table


def meta_rows(report: dict) -> list[tuple[str, str]]:
    """The run's meta block as (key, value) rows, each value cut (a merge's `sources` left out)."""
    meta = report.get("meta") or {}
    return [(str(k), cards.clip(str(v), META_CHARS)) for k, v in meta.items() if k != "sources"]


def side_rows(report: dict, kind: str) -> tuple[list[dict], int]:
    """Engine flakes or harness faults as display rows (the first `SIDE_ROWS`), and how many more."""
    entries = report.get(kind) or []
    rows = []
    for entry in entries[:SIDE_ROWS]:
        if kind == "engine_flakes":
            ids = ", ".join(map(str, entry.get("case_ids") or []))  # a request's cases: 64 at most
            rows.append({"model": entry.get("model", ""), "case_ids": cards.clip(ids, 4 * SHORT_CELL),
                         "op": entry.get("op", ""), "first": cards.clip(str(entry.get("first", "")), SHORT_CELL),
                         "recheck": cards.clip(str(entry.get("recheck", "")), SHORT_CELL)})
        else:
            rows.append({"model": entry.get("model", ""), "case_ids": str(entry.get("case_id", "")),
                         "op": entry.get("op", ""), "first": cards.clip(fault_first(entry.get("crash")), SHORT_CELL),
                         "recheck": "a fresh llama.cpp worker answered: not a llama.cpp crash"})
    return rows, max(len(entries) - SIDE_ROWS, 0)


def fault_first(crash: object) -> str:
    """A llama.cpp worker's crash record in words: killed by a signal, exited, hung, or raised."""
    if not isinstance(crash, dict):
        return str(crash or "")
    kind = crash.get("kind")
    if kind == "timeout":
        limit = crash.get("timeout")
        what = f"hung (no answer within {limit:g}s)" if isinstance(limit, (int, float)) else "hung"
    elif kind == "error":
        what = "raised an error"
    elif crash.get("signal"):
        what = f"was killed by {crash['signal']}"
    else:
        what = f"exited with status {crash.get('exit')}"
    call = f" in {crash['call']}" if crash.get("call") else ""
    return f"the llama.cpp worker {what}{call}" + (f": {crash['stderr']}" if crash.get("stderr") else "")


def known_groups(report: dict) -> list[dict]:
    """Known llama.cpp crashes grouped by list entry: its definition, how many, its first `SIDE_ROWS` rows."""
    definitions = report.get("known_crash_list") or {}
    groups: dict[str, dict] = {}
    for entry in report.get("known_oracle_crashes") or []:
        entry_id = str(entry.get("known_crash", "?"))
        group = groups.setdefault(entry_id, {"id": entry_id, "entry": definitions.get(entry_id, {}), "rows": [],
                                             "models": set(), "count": 0})
        group["count"] += 1
        group["models"].add(entry.get("model"))
        if len(group["rows"]) < SIDE_ROWS:
            group["rows"].append(_known_row(entry))
    return [{**g, "models": sorted(m for m in g["models"] if m)} for _, g in sorted(groups.items())]


def _known_row(entry: dict) -> dict:
    crash: dict = entry["crash"] if isinstance(entry.get("crash"), dict) else {}
    shown = cards.input_fields(entry)
    return {"model": entry.get("model", ""), "case_id": entry.get("case_id"), "text_visible": shown["text_visible"],
            "bytes": shown["bytes"], "crash": {"reason": crash.get("reason", ""), "call": crash.get("call")},
            "command": entry.get("command")}


def messages(report: dict) -> dict | None:
    """The "Messages" section (chat templates, `run --messages`) when the report carries one, its
    findings and three-way cards cut to `MESSAGES_SHOWN`."""
    data = report.get("messages")
    if not data:
        return None
    from .messages import section
    findings = list(data.get("findings") or []) + list(data.get("oracle_crashes") or [])
    blocks = [{**b, "cards": (b.get("cards") or [])[:MESSAGES_SHOWN]} for b in data.get("three_way") or []]
    cut = {**data, "findings": findings[:MESSAGES_SHOWN], "oracle_crashes": [], "three_way": blocks}
    out = section(cut, data.get("lines", []))
    out["truncated"] = max(len(findings) - MESSAGES_SHOWN, 0)
    return out
