"""A chat difference's signature: one planted template bug is one signature through every conversation;
another bug, another template or another class is another. The findings are the chat goldens replayed
with a planted renderer (offline: llama.cpp's side is the recording)."""

from __future__ import annotations

import pytest

from harness.chat import golden as chat_golden
from harness.chat.cases import all_targets
from harness.chat.signature import chat_signature
from harness.models.shipped import models_dir
from tests.chat_plants import plant_one_character_change

pytestmark = pytest.mark.skipif(not (models_dir() / "ggml-vocab-phi-3.gguf").is_file(),
                                reason="vocabularies not fetched: python -m harness fetch")


def replayed(name: str) -> list[dict]:
    target = next(t for t in all_targets() if t.name == name)
    return chat_golden.replay(target, chat_golden.load(chat_golden.golden_path(target)))[1]


def test_one_planted_bug_is_one_signature_in_every_conversation(monkeypatch):
    plant_one_character_change(monkeypatch)
    findings = [f for f in replayed("phi-3") if f["verdict"] == "text differs"]
    assert len({f["case"] for f in findings}) > 3
    assert len({f["signature"] for f in findings}) == 1, {f["signature_title"] for f in findings}
    assert findings[0]["signature_title"].startswith("chat: text differs ")
    assert findings[0]["signature"] == chat_signature(findings[0]).id, "describe signs what chat_signature gives"


def test_another_bug_or_template_is_another_signature(monkeypatch):
    from tokenizer.chat import jinja as chat_jinja
    real = chat_jinja.render
    plant_one_character_change(monkeypatch)
    first = {f["signature"] for f in replayed("phi-3")}
    others = [t.name for t in all_targets() if t.name != "phi-3" and chat_golden.golden_path(t).is_file()][:1]
    assert others and not first & {f["signature"] for f in replayed(others[0])}, "another template"

    def drop_last(*args, **kwargs):
        out = real(*args, **kwargs)
        return out[:-1] if kwargs.get("observer") is None and out else out
    monkeypatch.setattr(chat_jinja, "render", drop_last)
    second = {f["signature"] for f in replayed("phi-3")}
    assert second - first, "the last character dropped is another difference (where the prompts first part)"


def test_status_and_crash_signatures_mask_numbers_and_quotes():
    base = {"target": "t", "model": "m", "case": "c/gen", "diff": []}
    refused = [chat_signature({**base, "expected_status": "ok", "actual_status": "error",
                               "actual_error": f"line {n}: unknown filter '{name}'"})
               for n, name in ((3, "tojson"), (17, "items"))]
    assert refused[0].id == refused[1].id and refused[0].kind == "status differs"
    crash = chat_signature({**base, "expected_status": "crash", "actual_status": "ok",
                            "expected_error": "the helper died (exit status 134)"})
    assert crash.kind == "oracle crash" and crash.id != refused[0].id
    budget = chat_signature({**base, "expected_status": "ok", "actual_status": "over its budget",
                             "actual_error": "render stopped after 10000000 steps"})
    assert budget.kind == "status differs" and budget.parts[1] == "over its budget"
