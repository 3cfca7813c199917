"""drift.html: both builds, each changed case's input and its ids and pieces before and after, escaped and
bounded at any number of changes; rendered by headless Chromium."""

from __future__ import annotations

import pytest

from harness.golden import drift
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN
from harness.report import drift_page

OLD = {"ggml_commit": "abc1234", "ggml_version": "0.25.1", "llama_cpp_python": "0.3.30"}
NEW = {"ggml_commit": "0c1e570", "ggml_version": "0.25.3", "llama_cpp_python": PIN}


def changed_case(i: int, text: str = "Hello world") -> dict:
    return {"case_id": f"c{i}", "text": text, "input_bytes": len(text.encode()), "cut": False, "changes": [
        {"what": "ids", "flags": "add_special=False parse_special=False", "first_diff": 1, "start": 0,
         "before": {"ids": [1, 15043, 3186], "length": 3, "pieces": ["<s>", "␣Hello", "␣world"]},
         "after": {"ids": [1, 15043, 29871, 3186], "length": 4, "pieces": ["<s>", "␣Hello", "␣", "world"]}},
        {"what": "detokenize", "flags": "add_special=True parse_special=True remove_special=False unparse_special=True",
         "ids": [1], "before": {"text": "<b>x</b>"}, "after": {"bytes": "ff"}},
        {"what": "crash", "before": "answered", "after": "llama.cpp crash (abort 6)", "line": "ok -> oracle crash"}]}


def result(goldens: int, cases: int) -> dict:
    entries = [drift.entry(f"g{g}.json", cases=cases, changes=[f"case c{i}: ids" for i in range(cases)],
                           recorded=OLD, live=NEW, changed_cases=[changed_case(i) for i in range(min(cases, 100))],
                           cut=max(0, cases - 100)) for g in range(goldens)]
    return drift.result("golden", entries)


def test_the_page_names_both_builds_and_shows_each_change_escaped():
    data = result(1, 1)
    data["goldens"][0]["changed_cases"][0]["text"] = "<script>alert(1)</script>\t"
    page = drift_page.render(data, drift.verdict_line(data))
    assert "llama-cpp-python 0.3.30, ggml 0.25.1 (abc1234)" in page and f"llama-cpp-python {PIN}" in page
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;⇥" in page
    assert page.count('<tr class="differs">') == 2 and "␣Hello" in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "llama.cpp crash (abort 6)" in page and "behaviour changed in 1 of 1" in page


def test_the_page_stays_small_at_any_number_of_changes():
    data = result(117, 5_000)  # every golden changed everywhere: 585,000 change lines, 11,700 cases described
    page = drift_page.render(data, drift.verdict_line(data))
    assert len(page.encode()) < 1_000_000
    assert page.count('class="known case"') == drift_page.PAGE_CASES
    assert "4950 more change line(s)" in page and "more changed case(s) not drawn here" in page


def test_a_result_with_no_change_says_so():
    data = drift.result("golden", [drift.entry("g.json", cases=3, recorded=NEW, live=NEW),
                                   drift.entry("h.json", skipped="cannot find h.gguf")])
    page = drift_page.render(data, drift.verdict_line(data))
    assert 'id="no-change"' in page and "cannot find h.gguf" in page and "(the same build)" not in page


@pytest.mark.browser
def test_chromium_renders_the_page(tmp_path):
    from tests.report.test_report_browser import dump_dom

    data = result(3, 200)
    path = drift_page.write(data, drift.verdict_line(data), tmp_path)
    dom = dump_dom(path.as_uri(), tmp_path)
    assert "behaviour changed in 3 of 3 golden file(s) replayed" in dom
    assert dom.count('class="known case"') == drift_page.PAGE_CASES
