"""Chat goldens: our prompts, ids and counts against llama.cpp's recordings (golden/chat/).

Policy: the files are recorded from llama.cpp by `python -m harness chat --record` and
never edited by hand; a difference we cannot reasonably match is listed in
`KNOWN_DIFFERENCES` with its reason and in docs/chat.md's "Differs from llama.cpp" table.
A missing vocabulary skips with the command that fetches it.
"""

from __future__ import annotations

import functools
import json

import pytest

from harness.chat import golden as chat_golden
from harness.chat.cases import all_targets, tokenizer_for
from harness.chat.oracle import NOW
from harness.errors import SetupError
from harness.models.shipped import models_dir
from tests.chat_plants import plant_one_character_change

GOLDEN = chat_golden.GOLDEN_DIR
# target -> case keys where we knowingly differ (reason in docs/chat.md's table).
KNOWN_DIFFERENCES: dict[str, set[str]] = json.loads(
    (GOLDEN / "known_differences.json").read_text()) if (GOLDEN / "known_differences.json").is_file() else {}


def _targets():
    if not models_dir().is_dir():
        return []
    try:
        return [t for t in all_targets() if chat_golden.golden_path(t).is_file()]
    except SetupError:
        return []


TARGETS = _targets()
pytestmark = pytest.mark.skipif(not TARGETS, reason="no chat goldens or vocabularies: python -m harness fetch")


@functools.cache
def _replayed(name: str) -> tuple[int, tuple[dict, ...]]:
    target = next(t for t in TARGETS if t.name == name)
    checked, findings = chat_golden.replay(target, chat_golden.load(chat_golden.golden_path(target)))
    return checked, tuple(findings)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_golden_replays(target):
    checked, findings = _replayed(target.name)
    assert checked > 0
    unexpected = [f for f in findings if f["case"] not in KNOWN_DIFFERENCES.get(target.name, set())]
    assert not unexpected, "\n".join(str(f)[:600] for f in unexpected[:5])


def test_count_equals_oracle_count_everywhere():
    """count_tokens (len of encode_chat) equals llama.cpp's count on every recorded case."""
    for target in TARGETS:
        tok = tokenizer_for(target.model)
        data = chat_golden.load(chat_golden.golden_path(target))
        known = KNOWN_DIFFERENCES.get(target.name, set())
        for entry in data["cases"]:
            if entry["status"] != "ok" or entry["case"] in known:
                continue
            conv_id, mode = entry["case"].rsplit("/", 1)
            conv = data["conversations"][conv_id]
            ours = tok.count_tokens(conv["messages"], tools=conv["tools"], add_generation_prompt=mode == "gen",
                                    template=target.source, now=NOW)
            assert ours == entry["count"], (target.name, entry["case"])


def test_planted_one_character_change_is_caught(monkeypatch):
    """A renderer that changes one character of the output must fail the replay."""
    plant_one_character_change(monkeypatch)
    target = TARGETS[0]
    _, findings = chat_golden.replay(target, chat_golden.load(chat_golden.golden_path(target)))
    assert findings and all(f["verdict"] in ("text differs", "status differs") for f in findings)


CAPS = ("supports_string_content", "supports_typed_content", "supports_system_role", "supports_tools",
        "supports_tool_calls", "supports_object_arguments")


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_template_capabilities_equal_llama_cpp(target):
    """Our probes (tokenizer.chat.caps) find the capabilities llama.cpp's caps_get found."""
    from tokenizer.chat.caps import caps_of
    from tokenizer.chat.render import _source_fixes
    recorded = chat_golden.load(chat_golden.golden_path(target))["caps"]
    ours = caps_of(_source_fixes(target.source))
    assert {k: getattr(ours, k) for k in CAPS} == {k: recorded[k] for k in CAPS}
