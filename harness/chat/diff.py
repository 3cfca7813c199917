"""Message-level comparison: our rendered prompt and ids against llama.cpp's.

An *answer* (`chat_oracle.ChatAnswer`) is what one side made of one case: "ok" with
the text and ids, "error" when the template refused or failed, or, for llama.cpp only,
"crash"/"hang". `verdict()` says how two answers relate; `describe()` renders a
finding for people: the character diff with whitespace and control characters visible,
the first differing token, the count difference.
"""

from __future__ import annotations

import difflib
from typing import Any

from tokenizer import Tokenizer
from tokenizer.chat.errors import ChatTemplateError

from ..compare.diff import visible
from .cases import Case, Target, tokenizer_for
from .oracle import NOW, ChatAnswer
from .signature import sign

MATCH, TEXT, IDS, STATUS, ORACLE = "match", "text differs", "ids differ", "status differs", "oracle crash"


def product_answer(tok: Tokenizer, target: Target, case: Case) -> ChatAnswer:
    """Our side: Tokenizer.apply_chat_template + tokenize, as `encode_chat` does."""
    try:
        text = tok.apply_chat_template(case.messages, add_generation_prompt=case.add_generation_prompt,
                                       tools=case.tools, template=target.source, now=NOW)
    except ChatTemplateError as exc:
        return ChatAnswer("error", error=str(exc))
    ids = tok.tokenize(text, add_special=True, parse_special=True)
    return ChatAnswer("ok", text=text.encode("utf-8", "surrogateescape"), ids=ids)


def verdict(expected: ChatAnswer, actual: ChatAnswer) -> str:
    if expected.status in ("crash", "hang"):
        return ORACLE
    if expected.status != actual.status:
        return STATUS
    if expected.status == "error":
        return MATCH  # both refuse the conversation
    if expected.text != actual.text:
        return TEXT
    if expected.ids is not None and expected.ids != actual.ids:
        return IDS
    return MATCH


def char_diff(expected: bytes, actual: bytes, context: int = 40) -> list[tuple[str, str]]:
    """(op, text) runs around each difference: op is "=", "-" (llama.cpp only) or "+" (ours only)."""
    a = expected.decode("utf-8", "replace")
    b = actual.decode("utf-8", "replace")
    runs: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            seg = a[i1:i2]
            runs.append(("=", seg if len(seg) <= 2 * context else seg[:context] + " \u2026 " + seg[-context:]))
        else:
            if i2 > i1:
                runs.append(("-", a[i1:i2]))
            if j2 > j1:
                runs.append(("+", b[j1:j2]))
    return runs


def first_token_difference(expected: list[int] | None, actual: list[int] | None) -> int | None:
    if expected is None or actual is None:
        return None
    for i, (x, y) in enumerate(zip(expected, actual, strict=False)):
        if x != y:
            return i
    return None if len(expected) == len(actual) else min(len(expected), len(actual))


def describe(target: Target, case: Case, expected: ChatAnswer, actual: ChatAnswer,
             reproduce: str | None = None) -> dict[str, Any]:
    """A finding as plain data, for the JSON report and the text/HTML renderers."""
    finding: dict[str, Any] = {
        "target": target.name, "model": target.model, "case": case.key, "verdict": verdict(expected, actual),
        "expected_status": expected.status, "actual_status": actual.status,
        "expected_error": expected.error, "actual_error": actual.error,
        "reproduce": reproduce or f"python -m harness chat {target.selector} --conversation {case.conversation}",
    }
    if expected.text is not None and actual.text is not None:
        finding["diff"] = char_diff(expected.text, actual.text)
    finding["conversation"] = {"messages": case.messages, "tools": case.tools,
                               "add_generation_prompt": case.add_generation_prompt}
    if expected.ids is not None and actual.ids is not None:
        finding["count_expected"], finding["count_actual"] = len(expected.ids), len(actual.ids)
        at = first_token_difference(expected.ids, actual.ids)
        if at is not None:
            finding["first_token_difference"] = {"index": at, "expected": expected.ids[at:at + 8],
                                                 "actual": actual.ids[at:at + 8]}
            finding["tokens"] = token_rows(tokenizer_for(target.model), expected.ids, actual.ids, at)
    return sign(finding)  # its difference signature (harness.chat.signature)


def token_rows(tok: Tokenizer, expected: list[int], actual: list[int], at: int,
               before: int = 3, after: int = 8) -> list[dict[str, Any]]:
    """The two id sequences side by side around index `at`, each id with its piece (display only)."""
    def piece(ids: list[int], i: int) -> tuple[int | None, str | None]:
        if i >= len(ids):
            return None, None
        token = ids[i]
        if not 0 <= token < tok.n_tokens:
            return token, "(not a token id)"
        return token, tok.token_to_piece(token, special=True).decode("utf-8", "replace")
    rows = []
    for i in range(max(0, at - before), min(max(len(expected), len(actual)), at + after)):
        (e, e_piece), (a, a_piece) = piece(expected, i), piece(actual, i)
        rows.append({"index": i, "expected": e, "expected_piece": e_piece, "actual": a,
                     "actual_piece": a_piece, "differs": e != a})
    return rows


def diff_text(finding: dict[str, Any]) -> str:
    """One finding as plain text (terminal)."""
    lines = [f"{finding['target']} [{finding['case']}] {finding['verdict']}"]
    if finding["expected_status"] != finding["actual_status"]:
        lines.append(f"  llama.cpp: {finding['expected_status']} {finding['expected_error'][:200]}")
        lines.append(f"  ours:      {finding['actual_status']} {finding['actual_error'][:200]}")
    for op, seg in finding.get("diff", []):
        if op != "=":
            lines.append(f"  {'llama.cpp' if op == '-' else 'ours     '} {op} {visible(seg)[:300]}")
    if "count_expected" in finding:
        lines.append(f"  count: llama.cpp {finding['count_expected']}, ours {finding['count_actual']}")
    lines.append(f"  reproduce: {finding['reproduce']}")
    return "\n".join(lines)
