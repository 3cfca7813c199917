"""report.html in a real headless browser: the page loads offline, a planted failure shows
up, and the model/category filters (driven from the URL hash) hide exactly the other entries.

Uses Debian's `chromium` with `--dump-dom`; no browser download. Skips when chromium is missing.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from harness.compare import diff
from harness.report import build as report

pytestmark = pytest.mark.browser

INSTALL = "apt-get update && apt-get install -y chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"chromium is not installed: {INSTALL}")


def planted_report() -> dict:
    table = diff.TokenTable(texts=[b"<s>", b"\xe2\x96\x81he", b"llo", b"hel", b"lo"],
                               attrs=[8, 4, 4, 4, 4], edge_ids=frozenset({0}))
    found = diff.diff_encoding([0, 1, 2], [0, 3, 4], table)
    spm = report.ModelResult("llama-spm", "spm", cases=4)
    spm.add("mismatches", {"case_id": "planted-1", "text": "he llo\t<b>", "add_special": True,
                           "parse_special": False, "command": "python -m harness run --model llama-spm",
                           **found})
    bpe = report.ModelResult("gpt-2", "bpe", cases=3)
    bpe.add("engine_errors", {"case_id": "planted-2", "text": "x", "error": "ValueError: boom"})
    clean = report.ModelResult("qwen2", "bpe", cases=2)
    return report.build([spm, bpe, clean], meta={"command": "test"})


def dump_dom(url: str, tmp_path) -> str:
    cmd = [chromium(), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", url]
    done = subprocess.run(cmd, capture_output=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode("utf-8")


def entries(dom: str) -> dict[str, bool]:
    """case id -> visible, from the entry divs in the dumped DOM."""
    out = {}
    for tag in re.findall(r'<div class="entry"[^>]*>', dom):
        case = re.search(r'data-case="([^"]*)"', tag).group(1)
        out[case] = "hidden" not in tag
    return out


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    _, html = report.write(planted_report(), out)
    return html


def test_page_is_self_contained(page):
    text = page.read_text(encoding="utf-8")
    assert not re.search(r'(src|href)="(https?:)?//', text)


def test_planted_failure_shows(page, tmp_path):
    dom = dump_dom(page.as_uri(), tmp_path)
    assert entries(dom) == {"planted-1": True, "planted-2": True}
    assert "2 of 2 shown" in dom
    assert "he␣llo⇥&lt;b&gt;" in dom  # whitespace made visible, then escaped


@pytest.mark.parametrize(("query", "visible"), [
    pytest.param("model=llama-spm", {"planted-1": True, "planted-2": False}, id="model-spm"),
    pytest.param("model=gpt-2", {"planted-1": False, "planted-2": True}, id="model-gpt2"),
    pytest.param("category=engine%20error", {"planted-1": False, "planted-2": True}, id="category"),
    pytest.param("model=qwen2", {"planted-1": False, "planted-2": False}, id="clean-model"),
])
def test_filter_from_url(page, tmp_path, query, visible):
    dom = dump_dom(f"{page.as_uri()}#{query}", tmp_path)
    assert entries(dom) == visible
    assert f"{sum(visible.values())} of 2 shown" in dom


# --- the "Messages" section (chat templates): its own filters, untouched by the token filters ----

def _message_finding(target: str, case: str, verdict: str) -> dict:
    return {"target": target, "model": "phi-3", "case": case, "verdict": verdict,
            "expected_status": "ok", "actual_status": "ok", "expected_error": "", "actual_error": "",
            "reproduce": f"python -m harness chat --target {target} --conversation {case.split('/')[0]}",
            "conversation": {"messages": [{"role": "user", "content": "hi\tthere"}], "tools": None,
                             "add_generation_prompt": True},
            "diff": [["=", "<|user|>"], ["-", "a"], ["+", "b"]], "count_expected": 5, "count_actual": 6}


@pytest.fixture(scope="module")
def messages_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("messages")
    findings = [_message_finding("tmpl-A", "c1/gen", "text differs"),
                _message_finding("tmpl-B", "c2/nogen", "ids differ")]
    planted = {**planted_report(), "messages": {"cases": 4, "findings": findings, "oracle_crashes": [],
                                                "lines": ["messages: 2 templates, 4 cases"]}}
    _, html = report.write(planted, out)
    return html


def message_entries(dom: str) -> dict[str, bool]:
    return {re.search(r'data-target="([^"]*)"', tag).group(1): "hidden" not in tag
            for tag in re.findall(r'<div class="msg-entry"[^>]*>', dom)}


@pytest.mark.parametrize(("query", "visible", "tokens"), [
    pytest.param("", {"tmpl-A": True, "tmpl-B": True}, 2, id="all"),
    pytest.param("template=tmpl-A", {"tmpl-A": True, "tmpl-B": False}, 2, id="template"),
    pytest.param("verdict=ids%20differ", {"tmpl-A": False, "tmpl-B": True}, 2, id="verdict"),
    pytest.param("model=gpt-2", {"tmpl-A": True, "tmpl-B": True}, 1, id="token-filter-leaves-messages"),
])
def test_messages_filter_from_url(messages_page, tmp_path, query, visible, tokens):
    dom = dump_dom(f"{messages_page.as_uri()}#{query}", tmp_path)
    assert message_entries(dom) == visible
    assert f"{sum(visible.values())} of 2 shown" in dom
    assert sum(entries(dom).values()) == tokens, "the token cards keep their own filter"
    # one visible() for the whole page: a tab is ⇥ in the messages section as in the token cards
    assert "hi⇥there" in dom and "python -m harness chat --target tmpl-A --conversation c1" in dom
