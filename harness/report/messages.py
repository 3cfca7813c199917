"""The message-level report: messages.json, messages.html and the "Messages" section of report.html.

`section(data)` turns a `ChatSummary`'s data (as messages.json holds it) into
what templates/messages.html.j2 renders: each finding with its conversation made
visible, the character diff of the two rendered prompts, the token rows around the
first differing id, the count difference and the reproduce command, filterable by
template and verdict like the token cards.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ..compare.diff import visible
from ..files.atomic import write_text_atomic
from .templating import environment

HTML_LIMIT = 500  # findings shown on the page; messages.json keeps them all


def section(data: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    findings = data["findings"] + data["oracle_crashes"]
    shown = [_display(f) for f in findings[:HTML_LIMIT]]
    blocks = data.get("three_way") or []
    cards = [c for block in blocks for c in block.get("cards", [])]
    templates = [(Path(block["model"]).stem, t["class"]) for block in blocks for t in block.get("templates", [])]
    targets = {f["target"] for f in findings} | {c["target"] for c in cards} | {t for t, _ in templates}
    verdicts = {f["verdict"] for f in findings} | {c["class"] for c in cards} | {c for _, c in templates}
    return {"lines": lines, "findings": shown, "truncated": max(len(findings) - HTML_LIMIT, 0),
            "targets": sorted(targets), "verdicts": sorted(verdicts),
            "three_way": [_three_way(block) for block in data.get("three_way") or []]}


def _three_way(block: dict[str, Any]) -> dict[str, Any]:
    """A GGUF's three-way block (`harness.chat.three_way.ThreeWay.data`) for the page: each card's three
    sides, the original-against-llama.cpp character diff, and the template findings' line diffs."""
    cards = []
    for c in block.get("cards", [])[:HTML_LIMIT]:
        shown = _display(c)
        cards.append({**c, "turns": shown["turns"], "tools": shown["tools"],
                      "add_generation_prompt": shown["add_generation_prompt"], "diff_html": shown["diff_html"]})
    return {**block, "cards": cards, "target": Path(block["model"]).stem}


def _display(finding: dict[str, Any]) -> dict[str, Any]:
    conv = finding.get("conversation") or {}
    turns = [{"role": str(m.get("role", "?")) if isinstance(m, dict) else "?",
              "content": visible(_content(m.get("content") if isinstance(m, dict) else m), line_breaks=True)}
             for m in conv.get("messages") or []]
    tools = conv.get("tools")
    return {**finding, "turns": turns, "add_generation_prompt": conv.get("add_generation_prompt"),
            "tools": json.dumps(tools, ensure_ascii=False, indent=1) if tools else None,
            "diff_html": diff_html(finding) if finding.get("diff") else None,
            "count_expected": finding.get("count_expected"), "count_actual": finding.get("count_actual"),
            "tokens": finding.get("tokens"), "expected_error": (finding.get("expected_error") or "")[:300],
            "actual_error": (finding.get("actual_error") or "")[:300]}


def diff_html(finding: dict[str, Any]) -> str:
    """The character diff as HTML: deletions (the first side only) and insertions (the second only) marked."""
    parts = []
    for op, seg in finding.get("diff", []):
        text = html.escape(visible(seg, line_breaks=True))
        tag = "del" if op == "-" else "ins"
        parts.append(text if op == "=" else f"<{tag}>{text}</{tag}>")
    return "<pre class=chatdiff>" + "".join(parts) + "</pre>"


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return "(none)"
    return json.dumps(content, ensure_ascii=False)  # content parts, tool calls


def write(data: dict[str, Any], lines: list[str], out: Path) -> Path:
    """messages.json and messages.html in `out` (each written whole or not at all); the page's path."""
    write_text_atomic(out / "messages.json", json.dumps({**data, "lines": lines}, ensure_ascii=False, indent=1) + "\n")
    page = environment().get_template("messages_page.html.j2").render(messages=section(data, lines))
    return write_text_atomic(out / "messages.html", page)


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several reports' "messages" data as one: counts added, findings and lines joined."""
    out: dict[str, Any] = {"lines": []}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, list):
                out[key] = out.get(key, []) + value
            elif isinstance(value, int | float) and not isinstance(value, bool):
                out[key] = out.get(key, 0) + value
    return out
