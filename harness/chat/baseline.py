"""`chat --baseline` (and `run --messages --baseline`): a baseline's chat differences carried into the check.

Each chat signature of the baseline (`harness.runs.baseline.Baseline.chat_records`, the `signature`
its findings carry: `harness.chat.signature`) has a representative finding, whose conversation is
carried into the check of its template (`ChatCarry.__call__`, called by `harness.chat.run.live` with
each target's cases) unless the template's cases already hold it. `evidence(data)` then says which
baseline signatures were checked again: the template was in the check and every case of the check
was asked (no deadline passed, no case left "not asked", no interruption); a signature the check does
not show is "fixed" only then.
"""

from __future__ import annotations

from typing import Any

from ..report.baseline import conversation_digest
from .cases import Case, Target


def case_of(finding: dict[str, Any]) -> Case | None:
    """The conversation of a baseline finding as a `Case`, or None when it is not a well-formed one."""
    conv = finding.get("conversation")
    key = finding.get("case")
    if not isinstance(conv, dict) or not isinstance(key, str) or "/" not in key:
        return None
    messages, tools, agp = conv.get("messages"), conv.get("tools"), conv.get("add_generation_prompt")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages) or not isinstance(agp, bool):
        return None
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        return None
    return Case(key.rsplit("/", 1)[0], messages, tools, agp)


def _same(a: Case, b: Case) -> bool:
    return (a.messages, a.tools, a.add_generation_prompt) == (b.messages, b.tools, b.add_generation_prompt)


class ChatCarry:
    """The baseline's chat representatives, by template; called with each template's cases."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records
        self.cases: dict[str, Case] = {}
        for record in records:
            case = case_of(record.get("representative") or {})
            if case is not None:
                self.cases[record["id"]] = case
        self.ran: set[str] = set()
        self.planned: dict[str, str] = {}  # signature -> the case key that checks it
        self.carried = 0

    def __call__(self, target: Target, todo: list[Case]) -> list[Case]:
        """`todo` (one template's cases) with the baseline's conversations of that template added."""
        self.ran.add(target.name)
        out = list(todo)
        keys = {c.key for c in out}
        for record in self.records:
            case = self.cases.get(record["id"])
            if record.get("model") != target.name or case is None:
                continue
            same = next((c for c in out if _same(c, case)), None)
            if same is None:
                if case.key in keys:
                    case = Case(f"baseline:{case.conversation}", case.messages, case.tools, case.add_generation_prompt)
                out.append(case)
                keys.add(case.key)
                self.carried += 1
                same = case
            self.planned[record["id"]] = same.key
        return out

    def evidence(self, data: dict[str, Any] | None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        """(signature -> the case that checked it again, signature -> why it was not) after the check."""
        rechecked: dict[str, dict[str, Any]] = {}
        reasons: dict[str, str] = {}
        data = data or {}
        incomplete = ("the check was interrupted" if data.get("interrupted") else
                      "the check's deadline passed" if data.get("deadline_passed") else
                      "cases were left not asked" if data.get("not_asked") else None)
        for record in self.records:
            sig, target = record["id"], str(record.get("model", ""))
            if sig not in self.cases:
                reasons[sig] = "its conversation is not in the baseline (or not a well-formed one)"
            elif target not in self.ran:
                reasons[sig] = f"template {target} was not in this check"
            elif incomplete:
                reasons[sig] = incomplete
            else:
                case = self.cases[sig]
                rechecked[sig] = {"case_id": f"{target} {self.planned[sig]}", "input": conversation_digest(
                    case.messages, case.tools, case.add_generation_prompt)}
        return rechecked, reasons
