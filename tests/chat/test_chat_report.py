"""The message-level report: a planted difference reaches messages.html and report.html,
with its conversation, character diff, token rows, count and reproduce command; the
verdict and merged reports count it; a GGUF given by path is a chat target."""

from __future__ import annotations

import html
import json
import re

import pytest

from harness.chat import golden as chat_golden
from harness.chat.cases import all_targets, file_targets
from harness.chat.run import ChatSummary
from harness.compare.verdict import EXIT_FOUND, exit_status
from harness.errors import SetupError
from harness.models.shipped import models_dir, shipped_path
from harness.report import build as report
from harness.report import messages as chat_report
from tests.chat_plants import plant_one_character_change

pytestmark = pytest.mark.skipif(not (models_dir() / "ggml-vocab-phi-3.gguf").is_file(),
                                reason="vocabularies not fetched: python -m harness fetch")


@pytest.fixture
def planted(monkeypatch) -> ChatSummary:
    """The phi-3 template's golden replayed with a renderer that changes one character."""
    plant_one_character_change(monkeypatch)
    target = next(t for t in all_targets() if t.name == "phi-3")
    checked, findings = chat_golden.replay(target, chat_golden.load(chat_golden.golden_path(target)))
    return ChatSummary(targets=1, cases=checked, matched=checked - len(findings), findings=findings)


def test_planted_change_is_shown_in_full(planted, tmp_path):
    finding = planted.findings[0]
    assert finding["verdict"] == "text differs"
    assert [seg for op, seg in finding["diff"] if op != "="] == ["<sX"], "the BOS text '<s>' became '<sX'"
    assert finding["conversation"]["messages"], "the conversation travels with the finding"
    rows = finding["tokens"]
    assert any(r["differs"] for r in rows) and all(isinstance(r["expected_piece"], str | None) for r in rows)
    assert finding["reproduce"].startswith("python -m harness chat --target phi-3 --conversation ")

    page = chat_report.write(planted.data(), planted.lines(), tmp_path).read_text(encoding="utf-8")
    assert 'id="msg-filter-target"' in page and 'id="msg-filter-verdict"' in page
    assert f"{len(planted.findings)} of {len(planted.findings)} shown" in page
    assert html.escape(finding["reproduce"]) in page
    assert "<ins>&lt;sX</ins>" in page and 'class="differs"' in page
    assert "token count: llama.cpp" in page
    first_role = finding["conversation"]["messages"][0]["role"]
    assert f"<th>{first_role}</th>" in page
    data = json.loads((tmp_path / "messages.json").read_text(encoding="utf-8"))
    assert len(data["findings"]) == len(planted.findings)


def test_report_html_carries_the_messages_section_and_the_verdict_counts_it(planted, tmp_path):
    base = report.build([report.ModelResult("phi-3", "spm", cases=3)], meta={"command": "test"})
    assert exit_status(base) == 0
    with_messages = {**base, "messages": {**planted.data(), "lines": planted.lines()}}
    assert exit_status(with_messages) == EXIT_FOUND, "a message-level difference is a difference"
    assert "messages: " in report.one_line(with_messages)
    _, page = report.write(with_messages, tmp_path)
    text = page.read_text(encoding="utf-8")
    assert '<h2 id="messages">Messages</h2>' in text and "msg-entry" in text
    merged = report.merge([report.load(tmp_path), base], meta={"command": "merge"})
    assert len(merged["messages"]["findings"]) == len(planted.findings)
    assert exit_status(merged) == EXIT_FOUND


def test_clean_report_has_no_messages_section(tmp_path):
    _, page = report.write(report.build([report.ModelResult("phi-3", "spm", cases=3)], meta={}), tmp_path)
    assert 'id="messages"' not in page.read_text(encoding="utf-8")


def test_a_gguf_by_path_is_a_chat_target():
    path = shipped_path("phi-3")
    targets = file_targets(str(path))
    assert [t.origin for t in targets] == ["file"] and targets[0].model == str(path.resolve())
    assert targets[0].selector == f"--model {path.resolve()}"
    with pytest.raises(SetupError, match=re.escape("no tokenizer.chat_template")):
        file_targets(str(shipped_path("bert-bge")))


def _helper_built() -> bool:
    from harness.chat import helper_build as chat_helper_build
    try:
        return chat_helper_build.helper_path().is_file()
    except SetupError:
        return False


@pytest.mark.oracle
@pytest.mark.skipif(not _helper_built(), reason="chat helper not built: python -m harness chat --build-helper")
def test_run_messages_puts_a_planted_difference_in_the_report(monkeypatch, tmp_path, capsys):
    """`run --messages` end to end: llama.cpp's chat helper against a planted renderer."""
    from harness.cli import main
    plant_one_character_change(monkeypatch)
    corpus = tmp_path / "one.jsonl"
    corpus.write_text('{"id": "a", "text": "hello world"}\n', encoding="utf-8")
    out = tmp_path / "report"
    code = main(["run", "--model", "phi-3", "--corpus", str(corpus), "--no-default-corpora", "--messages",
                 "--report", str(out)])
    assert code == EXIT_FOUND
    saved = report.load(out)
    assert saved["summary"]["mismatches"] == 0 and saved["messages"]["findings"]
    assert exit_status(saved) == EXIT_FOUND
    assert 'id="messages"' in (out / "report.html").read_text(encoding="utf-8")


def test_the_messages_section_spells_whitespace_as_the_token_cards_do():
    """One `visible()` for the whole page: a space is `␣` in the messages section as in the token cards."""
    from harness.compare.diff import visible
    finding = {"target": "t", "case": "c", "verdict": "text differs", "diff": [("=", "a b\n"), ("+", "\tc")],
               "conversation": {"messages": [{"role": "user", "content": "hi there\nyou"}]}}
    shown = chat_report.section({"findings": [finding], "oracle_crashes": []}, [])["findings"][0]
    assert shown["turns"][0]["content"] == visible("hi there\nyou", line_breaks=True) == "hi␣there↵\nyou"
    assert shown["diff_html"] == "<pre class=chatdiff>a␣b↵\n<ins>⇥c</ins></pre>"
    assert visible(b"a b\n") == "a␣b↵"
