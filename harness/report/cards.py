"""One card per case for the three-way findings, grouped by cause, the page kept small (`report.html`).

report.json keeps every `reference_findings` entry: one per case, flag pair and
class (conversion, engine vs original, decode, reference error). Drawn one
entry at a time, a case that differs under all four flag pairs in two classes
was eight cards with the same rows (one real model's page was 29.8 MB). Here:

- one card per (model, case): each differing (class, flag pair) is a row in it,
  and the three rows of tokens (engine, llama.cpp, original) are drawn once per
  distinct set of ids, labelled with the flag pairs that share it;
- each card names its cause: the entry's `cause` field when the run found one
  (a string, or a dict with `name` and `evidence`), else today's lead, the first
  GGUF key line (`harness.references.gguf_keys`), else the class;
- the page shows the first `PER_CAUSE` cards of each (model, cause), taken in
  turn from each case family (`by_family`), and says how many more there are;
  all of them stay in report.json, and every failing case in
  `<report>/cases/<model>.jsonl` (the reproduce commands replay it);
- `page_cards` also gives the table the findings section starts with: per model and
  cause, the cases and classes.

The input's code points are listed where they matter (`code_points`): a
combining mark, text that NFC would change, an invisible or unassigned
character. Nothing here changes what is compared; it is display only.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from itertools import chain, zip_longest
from typing import Any

PER_CAUSE = 20          # cards drawn per (model, cause); the rest are counted
MAX_CODE_POINTS = 48    # code points listed per input
MAX_CHARS = 2000        # characters of an input or a decoded text drawn in a card
TOKENS_BEFORE, TOKENS_AFTER = 8, 40   # tokens drawn around a table's first difference
QUIET = frozenset(("Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
                   "Sm", "Sc", "Sk", "So"))   # categories that show as themselves
NO_CAUSE = "unexplained"


def cause_of(entry: dict) -> str:
    """The cause a finding names: its `cause` field, else the first GGUF key line, else its category."""
    cause = entry.get("cause")
    if isinstance(cause, dict):
        cause = cause.get("name") or cause.get("cause") or NO_CAUSE
    if isinstance(cause, str) and cause:
        return cause
    keys = entry.get("gguf_keys") or []
    if entry.get("class") in ("conversion", "decode") and keys:
        return str(keys[0])
    return str(entry.get("category") or entry.get("class") or NO_CAUSE)


def evidence_of(entry: dict) -> Any:
    """The `cause` field's evidence (ids after the change, for one), or None."""
    cause = entry.get("cause")
    return cause.get("evidence") if isinstance(cause, dict) else None


def code_points(data: str | bytes) -> list[str]:
    """`U+0301 COMBINING ACUTE ACCENT`-style lines for the input, when a code point in it is hard to see:
    a mark, a character NFC changes, an invisible, private or unassigned one; [] otherwise."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    plain = all(ch == " " or unicodedata.category(ch) in QUIET for ch in text)
    if not text or (plain and unicodedata.is_normalized("NFC", text)):
        return []
    return [f"U+{ord(ch):04X} {unicodedata.name(ch, '(' + unicodedata.category(ch) + ')')}"
            for ch in text[:MAX_CODE_POINTS]]


def cards(entries: Iterable[dict]) -> list[dict]:
    """The display entries of kind `reference_findings` folded into one card per (model, case), in order."""
    by_case: dict[tuple[str, str], dict] = {}
    for entry in entries:
        key = (str(entry.get("model", "")), str(entry.get("case_id")))
        card = by_case.get(key)
        if card is None:
            card = by_case[key] = _new_card(entry)
        _add(card, entry)
    return [_finish(card) for card in by_case.values()]


def _new_card(entry: dict) -> dict:
    return {"model": entry.get("model", ""), "case_id": entry.get("case_id"),
            "text_visible": clip(entry["text_visible"]),
            "text_window": entry.get("text_window"),  # [start, end, length]: a long case shows a window
            "bytes": entry.get("bytes"), "command": entry.get("command"), "causes": [], "evidence": [],
            "categories": [], "pairs": [], "tables": [], "decode": [], "gguf_keys": [],
            "code_points": code_points(bytes.fromhex(entry["bytes"]) if entry.get("bytes")
                                       else entry.get("text") or "")}


def _add(card: dict, entry: dict) -> None:
    pair = _pair_name(entry)
    _once(card["causes"], cause_of(entry))
    _once(card["categories"], str(entry.get("category")))
    for row in _pair_evidence(entry):
        _once(card["evidence"], row)
    for line in entry.get("gguf_keys") or []:
        _once(card["gguf_keys"], str(line))
    card["pairs"].append({"category": entry.get("category"), "class": entry.get("class"), "flags": pair,
                          "first_diff": entry.get("first_diff"), "error": entry.get("error"),
                          "cause": cause_of(entry)})
    card["decode"] += [{**{k: clip(v) if k.endswith(("_visible", "_hex")) else v for k, v in d.items()},
                        "flags": pair} for d in entry.get("decode") or []]
    rows = entry.get("rows")
    if rows:
        key = json.dumps([r.get("ids") for r in rows])
        for table in card["tables"]:
            if table["key"] == key:
                _once(table["flags"], pair)
                return
        card["tables"].append({"key": key, "flags": [pair], "rows": window(rows)})


def _pair_evidence(entry: dict) -> list[dict]:
    """The cause's evidence for this entry's own flag pair (the ids after the change, both sides), shown
    once per pair on the card; evidence of another shape is shown whole."""
    evidence = evidence_of(entry)
    if not isinstance(evidence, list):
        return [] if evidence is None else [{"raw": json.dumps(evidence, ensure_ascii=False)}]
    pair = (entry.get("add_special"), entry.get("parse_special"))
    rows = [row for row in evidence if isinstance(row, dict) and "original" in row
            and (row.get("add_special"), row.get("parse_special")) == pair]
    return [{"flags": _pair_name(entry), "original": row["original"], "llama": row.get("llama.cpp")} for row in rows]


def clip(text: str) -> str:
    """`text` cut to `MAX_CHARS`, saying how much was left out (report.json has it whole)."""
    if not isinstance(text, str) or len(text) <= MAX_CHARS:
        return text
    return f"{text[:MAX_CHARS]}… ({len(text) - MAX_CHARS} more characters in report.json)"


def window(rows: list[dict]) -> list[dict]:
    """The rows with their tokens cut to the part around the first index where the sides differ
    (`TOKENS_BEFORE` before it, `TOKENS_AFTER` from it); each row says how many it left out, counting
    what a long case's row had left out already (its own `before` and `after`)."""
    lists: list[list[dict]] = [r["tokens"] for r in rows if r.get("tokens") is not None]
    ids = [[t.get("id") for t in tokens] for tokens in lists]
    shortest = min((len(i) for i in ids), default=0)
    first = next((k for k in range(shortest) if len({tuple(i[k:k + 1]) for i in ids}) > 1), shortest)
    start = max(first - TOKENS_BEFORE, 0)
    out = []
    for row in rows:
        tokens = row.get("tokens")
        if tokens is None:
            out.append(row)
            continue
        end = first + TOKENS_AFTER
        out.append({**row, "tokens": tokens[start:end], "before": int(row.get("before") or 0) + start,
                    "after": max(len(tokens) - end, 0) + int(row.get("after") or 0)})
    return out


def _finish(card: dict) -> dict:
    card["cause"] = card["causes"][0] if card["causes"] else NO_CAUSE
    return card


def _pair_name(entry: dict) -> str:
    if entry.get("add_special") is None:
        return "all flag pairs"
    return f"add_special={entry.get('add_special')} parse_special={entry.get('parse_special')}"


def _once(items: list, value: Any) -> None:
    if value not in items:
        items.append(value)


def page_cards(all_cards: list[dict], per_cause: int = PER_CAUSE) -> tuple[list[dict], list[dict]]:
    """(the cards drawn: the first `per_cause` of each (model, cause), the causes table's rows).

    Both in the causes' order, the commonest first. Each row: model, cause, cases, shown,
    more (cases not drawn), classes.
    """
    groups: dict[tuple[str, str], list[dict]] = {}
    for card in all_cards:
        groups.setdefault((card["model"], card["cause"]), []).append(card)
    drawn, rows = [], []
    for (model, cause), members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = by_family(members)[:per_cause]
        drawn += shown
        classes = sorted({c for card in members for c in card["categories"]})
        rows.append({"model": model, "cause": cause, "cases": len(members), "shown": len(shown),
                     "more": len(members) - len(shown), "classes": classes})
    return drawn, rows


def family(case_id: object) -> str:
    """A case id's family: the id up to its first `-<digits>` (`bnd-orig-normal-0003` -> `bnd-orig-normal`)."""
    return re.split(r"-\d", str(case_id), maxsplit=1)[0]


def by_family(members: list[dict]) -> list[dict]:
    """The cards taken in turn from each case family, in order of first appearance, so that the first
    cards drawn of a cause span its families (corpora, boundary slice, derived cases), not the first
    family alone."""
    families: dict[str, list[dict]] = {}
    for card in members:
        families.setdefault(family(card["case_id"]), []).append(card)
    return [card for card in chain.from_iterable(zip_longest(*families.values())) if card is not None]
