"""Two llama.cpp builds' chat goldens compared, case by case: what a new build changes in chat formatting.

A chat golden (`harness.chat.golden`) is what one llama.cpp build's chat path made of every
conversation of a template: the rendered prompt, its ids, and the legacy
`llama_chat_apply_template` text. `compare(pinned, other)` holds the other build's recording of the
same templates and conversations (`bump-pin` records it in its work tree, with that build's chat
helper) to the pinned one: per template the cases compared, agreeing and differing, each difference
a signed finding (`harness.chat.diff.describe`, `harness.chat.signature`; a legacy-text difference
under the template's name with `:legacy`). A template the other build did not record, or recorded
from another template text, is not compared, and says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import SetupError
from .cases import Case, Target
from .diff import MATCH, describe, verdict
from .golden import expected_answer, load
from .oracle import ChatAnswer

MAX_FINDINGS = 200  # findings kept (all are counted)


def compare(pinned: Path, other: Path, *, other_name: str) -> dict[str, Any]:
    """Every chat golden of `pinned` against the file of the same name in `other`."""
    targets, findings = [], []
    for path in sorted(Path(pinned).glob("*.json")):
        row, found = _target(path, Path(other) / path.name, other_name)
        targets.append(row)
        findings += found
    counts = {key: sum(int(t.get(key, 0)) for t in targets) for key in ("cases", "agree", "differ", "missing")}
    counts["not_compared"] = sum(t["status"] != "compared" for t in targets)
    return {"pinned": str(pinned), "other": str(other), "targets": targets, "counts": counts,
            "findings": findings[:MAX_FINDINGS], "findings_total": len(findings)}


def _target(path: Path, other_path: Path, other_name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        old = load(path)
    except SetupError as exc:
        return {"target": path.stem, "status": "not compared", "why": str(exc)}, []
    row: dict[str, Any] = {"target": old.get("target", path.stem), "model": old.get("model"), "status": "compared",
                           "cases": 0, "agree": 0, "differ": 0, "missing": 0}
    if not other_path.is_file():
        return {**row, "status": "not compared", "why": f"the other build recorded no {other_path.name}"}, []
    try:
        new = load(other_path)
    except SetupError as exc:
        return {**row, "status": "not compared", "why": str(exc)}, []
    if old.get("template_sha256") != new.get("template_sha256"):
        return {**row, "status": "not compared", "why": "recorded from another template text"}, []
    theirs = {str(e.get("case")): e for e in new.get("cases") or [] if isinstance(e, dict)}
    findings = []
    for entry in old.get("cases") or []:
        row["cases"] += 1
        other_entry = theirs.get(str(entry["case"]))
        if other_entry is None:
            row["missing"] += 1
            continue
        found = _case(old, entry, other_entry, other_name)
        row["differ" if found else "agree"] += 1
        findings += found
    return row, findings


def _case(data: dict[str, Any], entry: dict[str, Any], other: dict[str, Any], other_name: str) -> list[dict[str, Any]]:
    """The findings of one case: the prompt (status, text, ids) and the legacy text."""
    conv_id, mode = str(entry["case"]).rsplit("/", 1)
    conv = (data.get("conversations") or {}).get(conv_id) or {}
    case = Case(conv_id, conv.get("messages") or [], conv.get("tools"), mode == "gen")
    name, model = str(data["target"]), str(data.get("model") or "")
    reproduce = f"diff golden/chat/{name}.json ({other_name}'s recording) case {entry['case']}"
    expected, actual = expected_answer(entry), expected_answer(other)
    out = []
    if verdict(expected, actual) != MATCH:
        out.append(describe(Target(name, model, "", str(data.get("origin") or "")), case, expected, actual,
                            reproduce=reproduce))
    if expected.legacy != actual.legacy:
        legacy = Target(f"{name}:legacy", model, "", str(data.get("origin") or ""))
        out.append(describe(legacy, case, _legacy(expected), _legacy(actual), reproduce=reproduce))
    return out


def _legacy(answer: ChatAnswer) -> ChatAnswer:
    """The legacy text as an answer of its own (no ids; "error" when the template is not recognised)."""
    return ChatAnswer("ok", text=answer.legacy) if answer.legacy is not None else ChatAnswer("error", error="none")
