"""One card per difference on report.html: its representative case, every flag pair that shows it, bounded.

`difference_card(record, entries)` draws one difference (a record of `harness.report.differences`)
from the findings of its representative case that carry its signature (`entries`, one per flag
pair and class; the representative alone when the report kept no other):

- two sides (`mismatches`): the tokens of both sides as segments that cover the same bytes
  (`harness.compare.diff.byte_aligned`: a split shows as a split, the rows after it line up
  again), each token as the text it stands for with its bytes (`ĠØŃØ¶` is the token's text, in
  its title, never what is drawn), the flag pairs that differ the same way grouped on one table,
  windowed around the difference; the differing pieces are each side's own;
- three sides (`reference_findings`, `run --reference`): each differing (class, flag pair) a row,
  the three rows of tokens (engine, llama.cpp, original) once per distinct set of ids, windowed,
  with the cause each names (its `cause` field, found by experiment, else the first GGUF key line);
- an engine error, a llama.cpp crash: the message, the traceback's or stderr's last lines;
- a vocabulary field: its first `VOCAB_ROWS` tokens.

`causes(entries)` is the table of the three-way findings by model and cause. The input's code
points are listed where they matter (`code_points`). Everything drawn is cut (`clip`, `window`,
`MAX_LINES`): a card's size does not grow with its input or with the number of findings. Nothing
here changes what is compared; it is display only.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from typing import Any

from ..compare.diff import visible

MAX_CODE_POINTS = 48    # code points listed per input
MAX_CHARS = 2000        # characters of an input drawn in a card
SHORT = 300             # characters of a decoded or detokenized text, an error message
MAX_LINES = 30          # lines of a traceback or a crash's stderr (the last ones)
TOKENS_BEFORE, TOKENS_AFTER = 8, 24   # tokens drawn around a three-way table's first difference
PAIRS = 8               # findings of the representative case drawn per card (4 flag pairs, up to 2 classes)
VOCAB_ROWS = 10         # tokens drawn on a vocabulary difference's card
CAUSES = 50             # rows of the causes table
QUIET = frozenset(("Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
                   "Sm", "Sc", "Sk", "So"))   # categories that show as themselves
NO_CAUSE = "unexplained"
DECODE_SHOWN = ("llama_text", "original_text", "original_raw", "original_cleaned")


def cause_of(entry: dict) -> str:
    """The cause a finding names: its `cause` field, else the first GGUF key line, else its class."""
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


def clip(text: Any, most: int = MAX_CHARS) -> Any:
    """`text` cut to `most` characters, saying how much was left out (report.json has it whole)."""
    if not isinstance(text, str) or len(text) <= most:
        return text
    return f"{text[:most]}… ({len(text) - most} more characters in report.json)"


def tail_lines(text: Any, most: int = MAX_LINES) -> str:
    """The last `most` lines of a traceback or a stderr, each clipped, saying how many were left out."""
    lines = [clip(line, SHORT) for line in str(text or "").splitlines()]
    if len(lines) <= most:
        return "\n".join(lines)
    return "\n".join([f"… ({len(lines) - most} lines before, in report.json)", *lines[-most:]])


def pair_name(entry: dict) -> str:
    if entry.get("add_special") is None:
        return "all flag pairs"
    return f"add_special={entry.get('add_special')} parse_special={entry.get('parse_special')}"


def _once(items: list, value: Any) -> None:
    if value not in items:
        items.append(value)


# --- one card per difference ----------------------------------------------------------------------

def difference_card(record: dict, entries: list[dict]) -> dict[str, Any]:
    """The card of one difference (see the module): its representative's input, and per kind of list
    what each flag pair showed."""
    representative = record.get("representative") or {}
    entries = [e for e in entries if isinstance(e, dict)][:PAIRS] or [representative]
    card = input_fields(representative)
    card.update(kind=record.get("list"), command=representative.get("command") or record.get("reproduce"),
                pairs=[], tables=[], detokenize=[], decode=[], causes=[], evidence=[], gguf_keys=[], vocab=[])
    draw = {"mismatches": _two_way, "reference_findings": _three_way, "engine_errors": _error,
            "oracle_crashes": _crash, "vocab_mismatches": _vocab}.get(str(record.get("list")), _error)
    for entry in entries:
        draw(card, entry)
    card["cause"] = card["causes"][0] if card["causes"] else None
    return card


def input_fields(entry: dict) -> dict[str, Any]:
    """The input's fields of a card: made visible and cut, its code points where they matter."""
    data: str | bytes = bytes.fromhex(entry["bytes"]) if entry.get("bytes") else str(entry.get("text") or "")
    return {"case_id": entry.get("case_id"), "text_visible": clip(visible(data)), "bytes": clip(entry.get("bytes")),
            "text_window": entry.get("text_window"), "code_points": code_points(data)}


def _two_way(card: dict, entry: dict) -> None:
    """A flag pair of a two-sided difference: its segments, on the table of the pairs that differ alike."""
    pair = pair_name(entry)
    card["pairs"].append({"flags": pair, "first_diff": entry.get("first_diff")})
    aligned = by_bytes(entry)
    differing = [s for s in aligned["segments"] if s["differs"]]
    key = json.dumps([[[t.get("id") for t in s["expected"]], [t.get("id") for t in s["got"]]] for s in differing])
    for table in card["tables"]:
        if table["key"] == key:
            table["flags"].append(pair)
            break
    else:
        card["tables"].append({"key": key, "flags": [pair], **aligned, "differing": differing[:1]})
    for d in entry.get("detokenize") or []:
        row = {"remove_special": d.get("remove_special"), "unparse_special": d.get("unparse_special"),
               "expected": clip(d.get("expected"), SHORT), "got": clip(d.get("got"), SHORT)}
        for seen in card["detokenize"]:
            if {k: seen[k] for k in row} == row:
                seen["flags"].append(pair)
                break
        else:
            card["detokenize"].append({**row, "flags": [pair]})


def by_bytes(entry: dict) -> dict[str, Any]:
    """The entry's segments (`by_bytes`), or for a finding written before them its rows by index, one
    token a segment, as they were drawn then."""
    found = entry.get("by_bytes")
    if isinstance(found, dict) and isinstance(found.get("segments"), list):
        return {"segments": found["segments"], "before": found.get("before") or 0,
                "after": found.get("after") or [0, 0], "by": "bytes"}
    segments = []
    for row in entry.get("aligned") or []:
        sides = [[] if row.get(s) is None else [{"id": row[s], "text": row.get(f"{s}_text") or ""}]
                 for s in ("expected", "got")]
        segments.append({"expected": sides[0], "got": sides[1], "differs": bool(row.get("differs"))})
    return {"segments": segments, "before": 0, "after": [0, 0], "by": "index"}


def _three_way(card: dict, entry: dict) -> None:
    """A (class, flag pair) of a three-sided difference: a row of the pairs table, its rows of tokens once
    per distinct set of ids, its decodes, its cause and the GGUF keys involved."""
    pair = pair_name(entry)
    _once(card["causes"], cause_of(entry))
    for row in _pair_evidence(entry):
        _once(card["evidence"], row)
    for line in entry.get("gguf_keys") or []:
        _once(card["gguf_keys"], clip(str(line), SHORT))
    card["pairs"].append({"category": entry.get("category"), "class": entry.get("class"), "flags": pair,
                          "first_diff": entry.get("first_diff"), "error": clip(entry.get("error"), SHORT)})
    card["decode"] += [{**{k: clip(v, SHORT) for k, v in d.items()},
                        **{f"{k}_visible": clip(visible(d.get(k) or ""), SHORT) for k in DECODE_SHOWN},
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
        return [] if evidence is None else [{"raw": clip(json.dumps(evidence, ensure_ascii=False), SHORT)}]
    pair = (entry.get("add_special"), entry.get("parse_special"))
    rows = [row for row in evidence if isinstance(row, dict) and "original" in row
            and (row.get("add_special"), row.get("parse_special")) == pair]
    return [{"flags": pair_name(entry), "original": clip(str(row["original"]), SHORT),
             "llama": clip(str(row.get("llama.cpp")), SHORT)} for row in rows]


def _error(card: dict, entry: dict) -> None:
    card["pairs"].append({"flags": pair_name(entry), "capability": entry.get("capability")})
    if "error" not in card:
        card["error"] = clip(str(entry.get("error") or ""), SHORT)
        card["traceback"] = tail_lines(entry.get("traceback"))


def _crash(card: dict, entry: dict) -> None:
    card["pairs"].append({"flags": pair_name(entry)})
    crash: dict = entry["crash"] if isinstance(entry.get("crash"), dict) else {}
    card.setdefault("crash", {"reason": clip(str(crash.get("reason") or crash), SHORT),
                              "call": crash.get("call"), "stderr": tail_lines(crash.get("stderr"))})


def _vocab(card: dict, entry: dict) -> None:
    def side(value: Any) -> dict:
        if entry.get("sides") and isinstance(value, dict):
            return {k: clip(str(value.get(k)), SHORT) for k in ("text", "score", "attr")}
        return {"text": clip(str(value), SHORT)}
    card["vocab"].append({"token": entry.get("token"), "field": entry.get("field"),
                          "expected": side(entry.get("expected")), "got": side(entry.get("got"))})


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


# --- the three-way findings by cause --------------------------------------------------------------

def difference_class(entry: dict) -> str:
    """The class of difference a finding's cause names (`cause["class"]`, found by experiment), or ''."""
    cause = entry.get("cause")
    return str(cause.get("class") or "") if isinstance(cause, dict) else ""


def causes(entries: Iterable[dict]) -> tuple[list[dict], int]:
    """The causes table of the three-way findings: per (model, cause) the cases, the finding classes and the
    classes of difference found by experiment, the commonest first (the first `CAUSES` rows), and how many
    rows were left out."""
    groups: dict[tuple[str, str], dict[str, set]] = {}
    for entry in entries:
        group = groups.setdefault((str(entry.get("model", "")), cause_of(entry)),
                                  {"cases": set(), "classes": set(), "kinds": set()})
        group["cases"].add(str(entry.get("case_id")))
        group["classes"].add(str(entry.get("category") or entry.get("class")))
        if kind := difference_class(entry):
            group["kinds"].add(kind)
    rows = [{"model": model, "cause": clip(cause, SHORT), "cases": len(g["cases"]), "classes": sorted(g["classes"]),
             "kinds": sorted(g["kinds"])}
            for (model, cause), g in sorted(groups.items(), key=lambda kv: (-len(kv[1]["cases"]), kv[0]))]
    return rows[:CAUSES], max(len(rows) - CAUSES, 0)

