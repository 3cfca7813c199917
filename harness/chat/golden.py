"""The chat golden: llama.cpp's rendered prompts, ids and counts, one file per target.

`golden/chat/<target>.json` (schema below) is recorded from the chat helper by
`python -m harness record --chat` and replayed against our `Tokenizer` with no
llama.cpp at all. Files are deterministic (fixed clock `chat_oracle.NOW`, TZ=UTC, keys
in a fixed order): re-recording an unchanged llama.cpp gives the same bytes. Never edit
one by hand; re-record and review the diff.

    {"schema": 1, "kind": "chat", "llama_cpp_python": "X.Y.Z", "target": "tmpl-X",
     "model": "qwen2", "origin": "X.jinja", "template_sha256": "...", "now": 1735689600,
     "caps": {...}, "conversations": {"id": {"messages": [...], "tools": [...]|null}},
     "cases": [{"case": "id/gen", "status": "ok", "text": "...", "ids": [...], "count": 12,
                "legacy": "..." | null, "error": ""}]}

`legacy` is `llama_chat_apply_template`'s text, null when it does not recognise the
template. A text that is not valid UTF-8 is stored as `text_hex` instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..environment import project_root
from ..errors import SetupError
from ..files.atomic import write_text_atomic
from ..files.input_limits import MAX_GOLDEN_BYTES, read_side_json
from ..models.shipped import LLAMA_CPP_PYTHON_VERSION
from .cases import Case, Target, cases, tokenizer_for
from .diff import MATCH, describe, product_answer, verdict
from .oracle import NOW, ChatAnswer, ChatOracle, request

SCHEMA = 1
GOLDEN_DIR = project_root() / "golden" / "chat"


def golden_path(target: Target, root: Path = GOLDEN_DIR) -> Path:
    return root / f"{target.name}.json"


def oracle_request(target: Target, case: Case) -> dict[str, Any]:
    from ..models.paths import resolve
    return request(template=target.source, messages=case.messages, tools=case.tools,
                   add_generation_prompt=case.add_generation_prompt, model=resolve(target.model))


def _text_fields(key: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {key: None}
    try:
        return {key: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{key}_hex": data.hex()}


def _record_case(case: Case, answer: ChatAnswer) -> dict[str, Any]:
    entry: dict[str, Any] = {"case": case.key, "status": answer.status}
    entry.update(_text_fields("text", answer.text))
    entry["ids"] = answer.ids
    entry["count"] = len(answer.ids) if answer.ids is not None else None
    entry.update(_text_fields("legacy", answer.legacy))
    entry["error"] = answer.error
    return entry


def record_target(target: Target, oracle: ChatOracle, conversations: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask llama.cpp about every case of `target`; the golden document."""
    data: dict[str, Any] = {
        "schema": SCHEMA, "kind": "chat", "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
        "target": target.name, "model": target.model, "origin": target.origin,
        "template_sha256": target.sha256, "now": NOW, "caps": {}, "conversations": {}, "cases": []}
    for case in cases(target, conversations):
        data["conversations"].setdefault(case.conversation, {"messages": case.messages, "tools": case.tools})
        answer = oracle.ask(oracle_request(target, case))
        data["caps"] = data["caps"] or answer.caps
        data["cases"].append(_record_case(case, answer))
    return data


def dumps(data: dict[str, Any]) -> str:
    """One header field per line, then one case per line: diffable, and a third of indented JSON."""
    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)
    head = [f" {one(k)}: {one(v)}," for k, v in data.items() if k not in ("conversations", "cases")]
    convs = ",\n".join(f"  {one(k)}: {one(v)}" for k, v in data["conversations"].items())
    cases = ",\n".join(f"  {one(c)}" for c in data["cases"])
    return "{\n" + "\n".join(head) + f'\n "conversations": {{\n{convs}\n }},\n "cases": [\n{cases}\n ]\n}}\n'


def write(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, dumps(data), "chat golden")


def load(path: Path) -> dict[str, Any]:
    try:
        data = read_side_json(path, "chat golden", limit=MAX_GOLDEN_BYTES)
    except (OSError, ValueError) as exc:
        raise SetupError(f"cannot read chat golden {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != "chat" or data.get("schema") != SCHEMA:
        raise SetupError(f"{path}: not a chat golden of schema {SCHEMA}")
    return data


def _bytes(entry: dict[str, Any], key: str) -> bytes | None:
    if f"{key}_hex" in entry:
        return bytes.fromhex(entry[f"{key}_hex"])
    value = entry.get(key)
    return None if value is None else value.encode("utf-8")


def expected_answer(entry: dict[str, Any]) -> ChatAnswer:
    return ChatAnswer(entry["status"], text=_bytes(entry, "text"), ids=entry.get("ids"),
                      legacy=_bytes(entry, "legacy"), error=entry.get("error", ""))


def replay(target: Target, data: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """Our answers against the recorded ones: (cases checked, findings)."""
    if data["template_sha256"] != target.sha256:
        raise SetupError(f"chat golden {data['target']}: the template changed since it was recorded; re-record")
    tok = tokenizer_for(target.model)
    findings = []
    for entry in data["cases"]:
        conv_id, mode = entry["case"].rsplit("/", 1)
        conv = data["conversations"][conv_id]
        case = Case(conv_id, conv["messages"], conv["tools"], mode == "gen")
        expected = expected_answer(entry)
        actual = product_answer(tok, target, case)
        if verdict(expected, actual) != MATCH:
            findings.append(describe(target, case, expected, actual))
    return len(data["cases"]), findings
