"""What an engine under test offers, and per capability what a run checked (docs/engine-contract.md).

The minimum an engine must do is `tokenize`; every other capability is
optional. `detect(engine)` takes the engine's own `capabilities` declaration,
or finds what it offers by looking; the harness then calls only that. Every
report says per check what was compared, what agreed and what was not
checked, so that nothing unchecked is ever read as a pass:

    ids 188/226 agree; detokenize not offered; text 1/1 agree; ...

A tally is a plain dict (check -> counts), so it travels in report.json and
adds up across models (`add_tallies`).
"""

from __future__ import annotations

from collections.abc import Iterable

CAPABILITIES = ("tokenize", "bytes_input", "detokenize", "token_to_piece", "token_text", "token_score",
                "token_attr", "vocab_info", "specials", "is_eog", "is_control")
ALL = frozenset(CAPABILITIES)
SPECIAL_FLAGS = ("add_bos", "add_eos", "add_sep")


def special_ids() -> tuple[str, ...]:
    """The special ids compared: `harness.golden.records.SPECIALS` (tokenizer.vocab.ROLES and nl), unk included.

    Read late: this module stays importable without numpy for the CLI's --help.
    """
    from ..golden.records import SPECIALS
    return SPECIALS


PER_TOKEN = frozenset({"token_to_piece", "token_text", "token_score", "token_attr", "is_eog", "is_control"})
METHODS = ("detokenize", "token_to_piece", "token_text", "token_score", "token_attr", "is_eog", "is_control")

# check -> (capability it needs, unit counted)
CHECKS = {
    "ids": ("tokenize", "cases"),
    "detokenize": ("detokenize", "cases"),
    "pieces": ("token_to_piece", "vocabularies"),
    "text": ("token_text", "vocabularies"),
    "score": ("token_score", "vocabularies"),
    "attr": ("token_attr", "vocabularies"),
    "vocab_info": ("vocab_info", "vocabularies"),
    "specials": ("specials", "vocabularies"),
    "eog": ("is_eog", "vocabularies"),
    "control": ("is_control", "vocabularies"),
}
CASE_CHECKS = ("ids", "detokenize")
VOCAB_CHECKS = tuple(c for c in CHECKS if c not in CASE_CHECKS)
# vocabulary record field -> the check it belongs to (`harness.golden.records.diff_vocab` row fields)
FIELD_CHECK = {"text": "text", "piece": "pieces", "piece_special": "pieces", "score": "score",
               "attr": "attr", "vocab_type": "vocab_info", "pre": "vocab_info", "specials": "specials",
               "add_bos": "specials", "add_eos": "specials", "add_sep": "specials", "eog": "eog",
               "control": "control"}
COUNTS = ("checked", "agree", "differ", "errors", "not_applicable")


class CapabilityError(ValueError):
    """An engine's `capabilities` declaration that cannot be honoured (names the bad entry)."""


def declared(names: Iterable[str]) -> frozenset[str]:
    """A declaration checked against the known names; `tokenize` is implied."""
    if isinstance(names, (str, bytes)):
        raise CapabilityError(f"capabilities must be a list of names, not {type(names).__name__}")
    out = set()
    for name in names:
        if not isinstance(name, str) or name not in ALL:
            raise CapabilityError(f"unknown capability {name!r} (known: {', '.join(CAPABILITIES)})")
        out.add(name)
    return frozenset(out | {"tokenize"})


def detect(engine: object) -> frozenset[str]:
    """The engine's capabilities: its declaration if it has one, else what it visibly offers.

    Without a declaration, `bytes_input` is not found here: `probe_bytes` decides
    it by calling `tokenize` once, which the caller does under its own guard.
    """
    if not callable(getattr(engine, "tokenize", None)):
        raise CapabilityError(f"the engine ({type(engine).__name__}) has no callable tokenize")
    names = getattr(engine, "capabilities", None)
    if names is not None:
        return declared(names)
    found = {"tokenize"} | {m for m in METHODS if callable(getattr(engine, m, None))}
    if not _has(engine, "n_tokens"):
        found -= PER_TOKEN
    if _has(engine, "vocab_type", "pre"):
        found.add("vocab_info")
    if _has(engine, *special_ids(), *SPECIAL_FLAGS):
        found.add("specials")
    return frozenset(found)


def _has(engine: object, *names: str) -> bool:
    try:
        return all(hasattr(engine, name) for name in names)
    except Exception:  # noqa: BLE001 - a property that raises means "not offered"
        return False


def probe_bytes(engine: object) -> bool:
    """True when `tokenize(b"a")` works; a `TypeError`/`AttributeError` means str only."""
    try:
        engine.tokenize(b"a", add_special=False, parse_special=False)  # type: ignore[attr-defined]
    except (TypeError, AttributeError):
        return False
    except Exception:  # noqa: BLE001 - it took bytes and failed for another reason: cases will show it
        return True
    return True


# --- tallies ------------------------------------------------------------------------------------

def new_tally(caps: Iterable[str]) -> dict[str, dict]:
    """One row per check; status `not offered` for the engine's missing capabilities."""
    caps = frozenset(caps)
    rows = {}
    for check, (capability, unit) in CHECKS.items():
        status = "not checked" if capability in caps else "not offered"
        rows[check] = {"capability": capability, "unit": unit, "status": status, **dict.fromkeys(COUNTS, 0)}
    return rows


def count(tally: dict[str, dict], check: str, outcome: str) -> None:
    """One unit of `check` judged: outcome is agree, differ, errors or not_applicable."""
    row = tally[check]
    row[outcome] += 1
    if outcome != "not_applicable":
        row["checked"] += 1
        row["status"] = "checked"


def case_outcomes(caps: frozenset[str], expected: dict, got: dict) -> dict[str, str]:
    """check -> agree/differ/errors for one case both sides evaluated (records as `evaluate_case`)."""
    ids = all(e["ids"] == g["ids"] for e, g in zip(expected["encode"], got["encode"], strict=True))
    out = {"ids": "agree" if ids else "differ"}
    if "detokenize" in caps:
        if any("detokenize_error" in g for g in got["encode"]):
            out["detokenize"] = "errors"
        else:
            same = all(_detok(e) == _detok(g) for e, g in zip(expected["encode"], got["encode"], strict=True))
            out["detokenize"] = "agree" if same else "differ"
    return out


def _detok(item: dict) -> list:
    return [(d.get("text"), d.get("bytes")) for d in item.get("detokenize", [])]


def vocab_outcomes(caps: frozenset[str], rows: list[dict] | None) -> dict[str, str]:
    """check -> outcome for the vocabulary checks; `rows` are diff rows, None when the engine erred."""
    offered = [c for c in VOCAB_CHECKS if CHECKS[c][0] in caps]
    if rows is None:
        return dict.fromkeys(offered, "errors")
    differ = {FIELD_CHECK.get(row["field"]) for row in rows}
    if any(row["field"] == "n_tokens" for row in rows):
        differ |= {c for c in offered if CHECKS[c][0] in PER_TOKEN}
    return {c: "differ" if c in differ else "agree" for c in offered}


def add_tallies(tallies: Iterable[dict[str, dict]]) -> dict[str, dict]:
    """The sum of several models' tallies; a check is checked when any model checked it."""
    total: dict[str, dict] = {}
    for tally in tallies:
        for check, row in tally.items():
            into = total.setdefault(check, {**row, **dict.fromkeys(COUNTS, 0), "status": row["status"]})
            for key in COUNTS:
                into[key] += int(row.get(key, 0))
            into["status"] = _merged_status(into["status"], row["status"])
    return total


def _merged_status(a: str, b: str) -> str:
    for status in ("checked", "not checked", "not offered"):
        if status in (a, b):
            return status
    return a


def figures(tally: dict[str, dict]) -> str:
    """The separate agreement figures in one line, e.g. 'ids 188/226 agree; detokenize not offered'."""
    parts = []
    for check, row in tally.items():
        if row["status"] != "checked":
            parts.append(f"{check} {row['status']}")
            continue
        text = f"{check} {row['agree']}/{row['checked']} agree"
        if row["errors"]:
            text += f" ({row['errors']} errors)"
        if row["not_applicable"]:
            text += f", {row['not_applicable']} not applicable"
        parts.append(text)
    return "; ".join(parts)


def clean_verdict(tally: dict[str, dict] | None) -> str:
    """The verdict of a run without findings: "all match" only when every check was made."""
    if tally and any(row["status"] != "checked" for row in tally.values()):
        return "all checked agree (some capabilities not checked)"
    return "all match"


def all_checked_agree(tally: dict[str, dict]) -> bool:
    """True when something was checked and every checked unit agreed."""
    checked = [row for row in tally.values() if row["status"] == "checked"]
    return bool(checked) and all(row["agree"] == row["checked"] for row in checked)


# --- filling a model's tally (`harness.compare.result.ModelResult.capabilities`) ---------------------------------

def start(result, caps: frozenset[str]) -> None:
    """Give `result` an empty tally for an engine offering `caps`."""
    result.capabilities = new_tally(caps)


def tally_case(result, caps: frozenset[str], case: dict, expected: dict | None, got: object) -> None:
    """Count one case: not applicable, an engine error, or per check agree/differ.

    A case llama.cpp crashed on (`expected` None) compared nothing and is not counted.
    """
    if not result.capabilities or expected is None or got is None:
        return
    if isinstance(got, dict):
        for check, outcome in case_outcomes(caps, expected, got).items():
            count(result.capabilities, check, outcome)
    elif hasattr(got, "error"):
        capability = getattr(got, "capability", "tokenize")
        count(result.capabilities, "detokenize" if capability == "detokenize" else "ids", "errors")
    else:
        count(result.capabilities, "ids", "not_applicable")
        result.not_applicable.add(str(case["id"]))


def tally_vocab(result, caps: frozenset[str], found: list[tuple[str, dict]]) -> None:
    """Count the vocabulary checks from `findings.vocab_findings` output."""
    if not result.capabilities:
        return
    erred = any(kind == "engine_errors" for kind, _ in found)
    fields = [{"field": entry.get("field")} for kind, entry in found if kind == "vocab_mismatches"]
    for check, outcome in vocab_outcomes(caps, None if erred else fields).items():
        count(result.capabilities, check, outcome)


def tally_unloaded(result, cases: int) -> None:
    """The engine could not load: every case is an engine error for ids (never a pass)."""
    result.capabilities = new_tally({"tokenize"})
    row = result.capabilities["ids"]
    row.update(checked=cases, errors=cases, status="checked" if cases else "not checked")
