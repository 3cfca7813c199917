"""An engine's known differences (`--expected-differences FILE`): shown as known, not failing, and "fixed"
once they stop showing, so the list cannot rot (docs/run-options.md).

The file is TOML (by its `.toml` suffix) or JSON, one entry per known difference:

    [[difference]]
    signature = "d-3f9a0c12b4e1"   # a difference signature (docs/differences.md); or, or with it:
    case = "edge-0041"             # a case id (with a signature: only that difference on that case)
    model = "llama-bpe"            # optional: fnmatch globs, a string or a list (default: any model)
    add_special = true             # optional: only under this flag (parse_special likewise)
    reason = "the tab is given the newline's id"
    upstream = "https://example.org/issues/12"   # optional
    id = "tab-as-newline"          # optional: the entry's name in reports (default: its signature or case)

In JSON the same entries are a list, or `{"difference": [...]}`. A malformed file is a
`SetupError` naming the entry and the field (exit 2).

A finding of `mismatches`, `engine_errors`, `vocab_mismatches` or `reference_findings` that an
entry names moves to the result's `known_differences` (never a llama.cpp crash: that is
`--known-crashes`); a case left with only such findings is a known-difference case, neither
failing nor passed. Per model each entry it covers gets a status (`ModelResult.expected`):

- `known`: it showed;
- `fixed`: it was checked and did not show: a case entry's case was judged, a signature entry's
  model was checked whole (no `--case`, `-k`, `--lf`, not cut short by `--maxfail`);
- `not checked`: otherwise (nothing compared, its case not judged, the model checked in part).

`report_block(report)` adds those up over the models into report.json's `expected_differences`.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..files import input_limits
from .diff import TokenTable
from .result import FINDINGS, ModelResult
from .signature import entry_signature

MATCHED = ("mismatches", "engine_errors", "vocab_mismatches", "reference_findings")
FIELDS = ("id", "signature", "case", "model", "add_special", "parse_special", "reason", "upstream")
SIGNATURE = re.compile(r"d-[0-9a-f]{12}\Z")
STATUSES = ("known", "fixed", "not checked")
SHOWN = 10  # entries named per status in the terminal
# The fields of a known finding kept in report.json's `known_differences`: what names it and how to reproduce it;
# not its rows of tokens and detokenizations (a finding's display is up to ~40 KB; the reproduce line shows it)
KEPT = ("model", "family", "case_id", "text", "bytes", "text_window", "add_special", "parse_special", "first_diff",
        "category", "class", "compared", "capability", "error", "field", "token", "fuzz", "long", "command",
        "signature_title")
_EMPTY = TokenTable()


class ExpectedDifferencesError(SetupError):
    """The expected-differences file cannot be read or has a malformed entry (named in the message)."""


@dataclass(frozen=True)
class Expected:
    """One known difference: what it names (a signature, a case, or both), where, and why."""

    key: str
    reason: str
    upstream: str | None = None
    signature: str | None = None
    case: str | None = None
    models: tuple[str, ...] = ("*",)
    add_special: bool | None = None
    parse_special: bool | None = None

    def covers(self, model: str) -> bool:
        return any(fnmatch.fnmatchcase(model, glob) for glob in self.models)

    def matches(self, model: str, kind: str, entry: dict) -> bool:
        """True when finding `entry` (of list `kind`, on `model`) is this difference."""
        if kind not in MATCHED or not self.covers(model):
            return False
        if self.case is not None and str(entry.get("case_id")) != self.case:
            return False
        for flag in ("add_special", "parse_special"):
            wanted = getattr(self, flag)
            if wanted is not None and entry.get(flag) is not wanted:
                return False
        return self.signature is None or signature_id(model, kind, entry) == self.signature

    def as_dict(self) -> dict:
        fields = {"signature": self.signature, "case": self.case, "add_special": self.add_special,
                  "parse_special": self.parse_special, "upstream": self.upstream}
        return {"id": self.key, "reason": self.reason, "models": list(self.models),
                **{k: v for k, v in fields.items() if v is not None}}


def signature_id(model: str, kind: str, entry: dict) -> str:
    """A finding's signature id: the one its judge gave it, or one made here (an unsigned load error)."""
    return str(entry.get("signature") or entry_signature(model, kind, entry, _EMPTY).id)


@dataclass(frozen=True)
class ExpectedDifferences:
    """The loaded list (possibly empty) and the file it came from."""

    entries: tuple[Expected, ...] = ()
    source: str | None = None

    def match(self, model: str, kind: str, entry: dict) -> Expected | None:
        return next((x for x in self.entries if x.matches(model, kind, entry)), None)

    def describe(self) -> dict | None:
        """report.json's `meta.expected_differences`: the file and its entries (None without a file)."""
        if self.source is None:
            return None
        return {"source": self.source, "entries": [x.as_dict() for x in self.entries]}

    def sort_out(self, result: ModelResult, *, judged: set[str] | None, whole: bool) -> None:
        """Move the findings this list names to `result.known_differences`, and give each entry covering the
        model its status (`result.expected`). `judged`: the case ids judged (None: every case);
        `whole`: the model was checked with its whole selection of cases."""
        covering = [x for x in self.entries if x.covers(result.model)]
        if not covering:
            return
        compared = _compared(result)
        hits = _move(self, result)
        for entry in covering:
            found = hits.get(entry.key, [])
            result.expected[entry.key] = {"status": _status(entry, found, compared, judged, whole),
                                          "findings": len(found),
                                          "cases": len({str(e.get("case_id")) for e in found})}


    def unexpected_failing(self, result: ModelResult) -> int:
        """How many of `result`'s failing cases have a finding this list does not name (before `sort_out`)."""
        failing = result.failing - _case_ids(result)  # failing without a finding of their own
        for kind in FINDINGS:
            for entry in getattr(result, kind):
                case_id = entry.get("case_id")
                if kind == "vocab_mismatches" or case_id is None or str(case_id).startswith("<"):
                    continue
                if str(case_id) not in failing and self.match(result.model, kind, entry) is None:
                    failing.add(str(case_id))
        return len(failing)


NONE = ExpectedDifferences()


def _compared(result: ModelResult) -> bool:
    """Whether anything was compared on the model (loaded by both sides, not refused)."""
    if result.not_checked or result.expected_refusal:
        return False
    return not any(str(e.get("case_id")) == "<load>" for kind in (*FINDINGS, "known_oracle_crashes")
                   for e in getattr(result, kind))


def _status(entry: Expected, found: list[dict], compared: bool, judged: set[str] | None, whole: bool) -> str:
    if found:
        return "known"
    if not compared:
        return "not checked"
    if entry.case is not None:
        return "fixed" if judged is None or entry.case in judged else "not checked"
    return "fixed" if whole else "not checked"


def _case_ids(result: ModelResult) -> set[str]:
    """The case ids a finding of `result` fails (as `ModelResult.add` counts them)."""
    return {str(e["case_id"]) for kind in FINDINGS if kind != "vocab_mismatches" for e in getattr(result, kind)
            if e.get("case_id") is not None and not str(e["case_id"]).startswith("<")}


def _move(expected: ExpectedDifferences, result: ModelResult) -> dict[str, list[dict]]:
    """The named findings moved out of the finding lists; the failing cases counted again. Entry key -> findings."""
    before = _case_ids(result)
    hits: dict[str, list[dict]] = {}
    for kind in MATCHED:
        entries = getattr(result, kind)
        keep = []
        for entry in entries:
            hit = expected.match(result.model, kind, entry)
            if hit is None:
                keep.append(entry)
                continue
            hits.setdefault(hit.key, []).append(entry)
            kept = {k: v for k, v in entry.items() if k in KEPT}  # what names it; its diff is the same every time
            result.known_differences.append({**kept, "signature": signature_id(result.model, kind, entry),
                                             "list": kind, "expected_difference": hit.key})
        entries[:] = keep
    if not hits:
        return hits
    unnamed = result.failing - before  # failing without a finding of their own: the engine did not load
    moved = [e for found in hits.values() for e in found]
    if any(e.get("case_id") == "<load>" for e in moved) and not any(
            e.get("case_id") == "<load>" for kind in FINDINGS for e in getattr(result, kind)):
        result.known_difference_ids |= unnamed  # its load failure is the known difference
        unnamed = set()
    still = unnamed | _case_ids(result)
    named = {str(e.get("case_id")) for e in moved if not str(e.get("case_id")).startswith("<")}
    result.known_difference_ids |= (named - still)
    result.failing.intersection_update(still)
    return hits


# --- the file ---------------------------------------------------------------------------------------------

def load(path: str | Path) -> ExpectedDifferences:
    """Read and check an expected-differences file (bounded: `harness.files.input_limits.read_side_text`)."""
    path = Path(path)
    what = "expected-differences file"
    try:
        text = input_limits.read_side_text(path, what)
    except OSError as exc:
        raise ExpectedDifferencesError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ExpectedDifferencesError(f"cannot read the {what}: {exc}") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else input_limits.loads(text, str(path))
    except tomllib.TOMLDecodeError as exc:
        raise ExpectedDifferencesError(f"{path}: not TOML ({exc})") from None
    except ValueError as exc:
        raise ExpectedDifferencesError(str(exc)) from None
    return ExpectedDifferences(parse(data, where=str(path)), source=str(path))


def parse(data: Any, *, where: str) -> tuple[Expected, ...]:
    """The entries of a decoded file: a list, or a table whose only key is `difference`."""
    if isinstance(data, dict) and set(data) <= {"difference"}:
        data = data.get("difference", [])
    if not isinstance(data, list):
        raise ExpectedDifferencesError(f"{where}: expected a list of entries ([[difference]] tables in TOML), "
                                       f"not {type(data).__name__}")
    entries: list[Expected] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(data):
        entry = _entry(raw, f"{where}: entry {index + 1}")
        if entry.key in seen:
            raise ExpectedDifferencesError(f"{where}: entry {index + 1}: {entry.key!r} is entry {seen[entry.key]} "
                                           "already (give each an id of its own)")
        seen[entry.key] = index + 1
        entries.append(entry)
    return tuple(entries)


def _entry(raw: Any, where: str) -> Expected:
    if not isinstance(raw, dict):
        raise ExpectedDifferencesError(f"{where}: must be a table/object with a signature or a case, and a reason")
    if isinstance(raw.get("id"), str):
        where = f"{where} (id {raw['id']!r})"
    unknown = sorted(set(raw) - set(FIELDS), key=str)
    if unknown:
        raise ExpectedDifferencesError(f"{where}: unknown field {', '.join(repr(f) for f in unknown)} "
                                       f"(known: {', '.join(FIELDS)})")
    for name in ("id", "signature", "case", "reason", "upstream"):
        if name in raw and (not isinstance(raw[name], str) or not raw[name].strip()):
            raise ExpectedDifferencesError(f"{where}: field {name!r} must be a non-empty string")
    if "reason" not in raw:
        raise ExpectedDifferencesError(f"{where}: missing field 'reason' (why the engine differs here)")
    if "signature" not in raw and "case" not in raw:
        raise ExpectedDifferencesError(f"{where}: give a 'signature' (d- and 12 hex digits) or a 'case' id")
    if "signature" in raw and not SIGNATURE.match(raw["signature"]):
        raise ExpectedDifferencesError(f"{where}: field 'signature' {raw['signature'][:40]!r} is not a "
                                       "signature id (d- and 12 hex digits, as report.json's differences have)")
    for name in ("add_special", "parse_special"):
        if name in raw and not isinstance(raw[name], bool):
            raise ExpectedDifferencesError(f"{where}: field {name!r} must be true or false")
    return Expected(key=raw.get("id") or raw.get("signature") or f"case {raw['case']}", reason=raw["reason"],
                    upstream=raw.get("upstream"), signature=raw.get("signature"), case=raw.get("case"),
                    models=_models(raw.get("model", "*"), where),
                    add_special=raw.get("add_special"), parse_special=raw.get("parse_special"))


def _models(value: Any, where: str) -> tuple[str, ...]:
    globs = [value] if isinstance(value, str) else value
    if not isinstance(globs, list) or not globs or not all(isinstance(g, str) and g.strip() for g in globs):
        raise ExpectedDifferencesError(f"{where}: field 'model' must be a model name or glob, or a non-empty "
                                       "list of them")
    return tuple(globs)


# --- report.json ------------------------------------------------------------------------------------------

def fold(into: dict, counts: dict) -> None:
    """A part's per-model statuses (`counts["expected_differences"]`) folded into `into` (merge-reports): an
    entry is known if any part saw it, else fixed if a part checked it whole, else not checked; counts add."""
    theirs = counts.get("expected_differences")
    if not isinstance(theirs, dict) or not theirs:
        return
    ours = into.setdefault("expected_differences", {})
    for key, state in theirs.items():
        if not isinstance(state, dict) or state.get("status") not in STATUSES:
            continue
        held = ours.get(key)
        if held is None:
            ours[key] = {"status": state["status"], "findings": int(state.get("findings") or 0),
                         "cases": int(state.get("cases") or 0)}
            continue
        held["status"] = next(s for s in STATUSES if s in (held["status"], state["status"]))
        held["findings"] += int(state.get("findings") or 0)
        held["cases"] += int(state.get("cases") or 0)


def merged_description(metas: list[dict]) -> dict | None:
    """The parts' one `meta.expected_differences` (None when no part had a list); parts that were given
    different lists cannot be judged as one: `ValueError` naming the sources."""
    described = [m.get("expected_differences") for m in metas if isinstance(m, dict)]
    given = [d for d in described if isinstance(d, dict)]
    if not given:
        return None
    if len(given) != len(described) or any(d != given[0] for d in given[1:]):
        sources = sorted({str(d.get("source")) if isinstance(d, dict) else "none" for d in described})
        raise ValueError(f"the parts were given different --expected-differences lists ({', '.join(sources)})")
    return given[0]


def report_block(report: dict) -> dict | None:
    """report.json's `expected_differences`: each entry of `meta.expected_differences` with its status over
    the models (known if it showed anywhere, else fixed if checked anywhere, else not checked), per model too."""
    described = (report.get("meta") or {}).get("expected_differences")
    if not isinstance(described, dict):
        return None
    per_model = report.get("summary", {}).get("per_model", {})
    rows = []
    for entry in described.get("entries") or []:
        models = {m: c["expected_differences"][entry["id"]] for m, c in per_model.items()
                  if entry["id"] in (c.get("expected_differences") or {})}
        statuses = {s["status"] for s in models.values()}
        status = next((s for s in STATUSES if s in statuses), "not checked")
        rows.append({**entry, "status": status, "findings": sum(s["findings"] for s in models.values()),
                     "cases": sum(s["cases"] for s in models.values()),
                     "per_model": {m: s["status"] for m, s in models.items()}})
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUSES}
    return {"source": described.get("source"), **counts, "entries": rows}


def line(report: dict) -> str:
    """The verdict's words for the list ("" without one)."""
    block = report.get("expected_differences")
    if not block:
        return ""
    findings = sum(r["findings"] for r in block["entries"])
    return (f"; expected differences: {block['known']} known ({findings} finding(s)), {block['fixed']} fixed, "
            f"{block['not checked']} not checked")


def terminal_lines(report: dict) -> list[str]:
    """A line for each entry that no longer shows (fixed: take it out of the file) or was not checked."""
    block = report.get("expected_differences")
    if not block:
        return []
    out = []
    for status, say in (("fixed", "no longer differs (fixed? remove it from {source})"),
                        ("not checked", "not checked by this run")):
        rows = [r for r in block["entries"] if r["status"] == status]
        for row in rows[:SHOWN]:
            out.append(f"expected difference {row['id']} {say.format(source=block['source'])}")
        if len(rows) > SHOWN:
            out.append(f"... and {len(rows) - SHOWN} more {status} (report.json's expected_differences)")
    return out
