"""The identity of one chat difference: the same template bug seen through any conversation, run or night.

A chat finding (`harness.chat.diff.describe`) is one conversation rendered by one template, ours
against llama.cpp's. Its signature names the difference, not the conversation, with the masking of
`harness.compare.signature` (characters by class, numbers and quoted text masked in messages):

- the **template** (the target's name: `phi-3`, `tmpl-GLM-4.6`) and the **verdict class**, from
  both sides' statuses: `oracle crash` (llama.cpp crashed or hung), `status differs` (one side
  rendered, the other refused or ran over its budget), `text differs`, `ids differ`;
- for a text difference, **where the prompts first part**: the shape of the last characters
  before it (`^` at the start), then the first character each side has there (`∅` for none);
- for an ids difference (same text), the shapes of both sides' first differing pieces;
- for a status difference, both statuses and the erring side's message, masked;
- for a llama.cpp crash or hang, its status and message, masked.

`sign(finding)` adds `signature` and `signature_title` to a finding (`describe` signs every finding
it makes), so that two chat results are compared by signature (`--baseline`, `diff`).
"""

from __future__ import annotations

from typing import Any

from ..compare.signature import Signature, masked, shape

SIDES = "engine~llama.cpp"
CONTEXT = 4  # characters before the first difference that say where it is


def chat_signature(finding: dict[str, Any]) -> Signature:
    """The signature of one chat finding (`harness.chat.diff.describe`'s dict)."""
    target = str(finding.get("target") or "")
    expected, actual = str(finding.get("expected_status") or ""), str(finding.get("actual_status") or "")
    parts: tuple[str, ...]
    if expected in ("crash", "hang"):
        kind, parts = "oracle crash", (expected, masked(str(finding.get("expected_error") or "")))
    elif expected != actual:
        erring = finding.get("actual_error") if expected == "ok" else finding.get("expected_error")
        kind, parts = "status differs", (expected, actual, masked(str(erring or "")))
    elif finding.get("diff") and any(op != "=" for op, _ in finding["diff"]):
        kind, parts = "text differs", _text_parting(finding["diff"])
    else:
        rows = [r for r in finding.get("tokens") or [] if r.get("differs")]
        first = rows[0] if rows else {}
        kind, parts = "ids differ", tuple(shape(str(first.get(k) or "").encode("utf-8", "surrogatepass")) or "∅"
                                          for k in ("expected_piece", "actual_piece"))
    return Signature(target, SIDES, "chat", kind, parts)


def _text_parting(diff: list[Any]) -> tuple[str, str, str]:
    """(where, llama.cpp's first character, ours) at the first run of the character diff that is not equal."""
    before, ours, theirs = "", "", ""
    for i, (op, seg) in enumerate(diff):
        if op == "=":
            before = str(seg)
            continue
        rest = [(o, str(s)) for o, s in diff[i:i + 2] if o != "="]
        theirs = next((s for o, s in rest if o == "-"), "")
        ours = next((s for o, s in rest if o == "+"), "")
        break
    where = shape(before[-CONTEXT:].encode("utf-8", "surrogatepass")) if before else "^"
    return where, _first(theirs), _first(ours)


def _first(text: str) -> str:
    return shape(text[:1].encode("utf-8", "surrogatepass")) or "∅"


def sign(finding: dict[str, Any]) -> dict[str, Any]:
    """`finding` with its `signature` id and `signature_title` added (in place; returned)."""
    found = chat_signature(finding)
    finding["signature"], finding["signature_title"] = found.id, found.title
    return finding
