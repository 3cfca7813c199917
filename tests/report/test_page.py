"""report.html leads with the differences (harness/report/page.py): one line each, then one card each, then the
run's tables; every list on it bounded, whatever the number of findings. Findings are made by the real judge on
a toy vocabulary (tests/synthetic_reports.py)."""

from __future__ import annotations

import re

from harness.report import baseline, build, page
from tests import synthetic_reports as sr


def html_of(report: dict, every: dict | None = None) -> str:
    return build.render_html(report, every=every)


def lines_of(html: str) -> list[str]:
    return re.findall(r'<tr class="difference"[^>]*data-difference="([^"]+)"', html)


def test_the_page_leads_with_a_line_per_difference_then_a_card_each_then_the_tables():
    report = build.build([sr.failing_result("toy", 40)], meta={"command": "test"})
    html = html_of(report)
    records = {r["id"]: r for r in report["differences"]}
    assert sorted(lines_of(html)) == sorted(records) and len(records) == 2
    assert html.count('class="entry card"') == 2
    assert html.index('id="difference-lines"') < html.index('class="entry card"') < html.index('class="meta"') \
        < html.index('id="families"') < html.index('id="models"')
    for sig, record in records.items():
        row = re.search(rf'<tr class="difference"[^>]*data-difference="{sig}".*?</tr>', html, re.S).group(0)
        assert record["title"].split(": ", 1)[1].split(" ", 1)[0] in row or record["title"] in row
        assert "toy · engine~llama.cpp" in row and f"<td>{record['cases']} <small>(80 findings)" in row
        assert f'data-copy="{record["reproduce"]}"' in row and '<button type="button" class="copy"' in row


def test_one_planted_bug_is_one_line_and_one_card_whatever_its_cases_and_flag_pairs():
    """The tab bug in 8 cases under 4 flag pairs was 32 cards; it is one line and one card of 4 flag pairs."""
    result = sr.ModelResult("toy", "bpe", cases=10)
    for case in range(8):
        for flags in sr.FLAG_PAIRS:
            result.add("mismatches", sr.tab_bug("toy", case, flags, words=case))
    html = html_of(build.build([result], meta={}))
    assert len(lines_of(html)) == 1 and html.count('class="entry card"') == 1
    assert "8 cases, 32 findings under 4 flag pairs" in html
    assert html.count('<table class="seq by-bytes"') == 1  # with and without the BOS: the same difference
    assert "add_special=True parse_special=True" in html and "the shortest input of 8" in html


def test_a_difference_is_categorised_by_its_signature_never_by_the_comparators_guess():
    """The comparator calls the tab bug `normalisation` under one flag pair and `special-token partition`
    under another; the page shows neither: the difference's category is its signature's kind in words."""
    result = sr.ModelResult("toy", "bpe", cases=4)
    for flags in sr.FLAG_PAIRS:
        result.add("mismatches", sr.tab_bug("toy", 0, flags))
    report = build.build([result], meta={})
    assert {e["category"] for e in report["mismatches"]} == {"normalisation", "special-token partition"}
    html = html_of(report)
    assert '<span class="cat">different bytes</span>' in html
    assert "normalisation" not in html and "special-token partition" not in html
    assert page.category({"title": "ids: split N|N / engine only"}) == "split differently"
    assert page.category({"title": "engine error: tokenize ValueError: #"}) == "engine error"
    assert page.category({"title": "ids: document doc-mixed"}) == "uncategorised"  # a golden's digest: no rule
    assert page.category({"title": "detokenize: same"}) == "uncategorised"


def test_with_a_baseline_new_differences_come_first_and_fixed_ones_are_listed():
    report = build.build([sr.failing_result("toy", 40)], meta={})
    first, second = report["differences"]
    assert lines_of(html_of(report)) == [first["id"], second["id"]] and "data-status" not in html_of(report)
    gone = {**first, "id": "d-000000000001", "title": "ids: bytes ␣ / ⇥"}
    elsewhere = {**first, "id": "d-000000000002", "title": "ids: bytes ␣ / ↵", "model": "other"}
    report["baseline"] = baseline.sort([first, gone, elsewhere], report["differences"],
                                       {gone["id"]: {"case_id": "c"}}, {elsewhere["id"]: "its model not in the run"})
    assert report["baseline"]["counts"] == {"new": 1, "fixed": 1, "unchanged": 1, "not_rechecked": 1}
    html = html_of(report)
    assert lines_of(html) == [second["id"], first["id"]]  # the new one first
    assert f'data-difference="{second["id"]}" data-status="new"' in html
    assert f'data-difference="{first["id"]}" data-status="unchanged"' in html
    assert '<span class="status new">new</span>' in html and 'id="fixed-list"' in html
    assert re.search(r'<ul id="fixed-list"><li data-difference="d-000000000001">ids: bytes ␣ / ⇥', html)
    assert re.search(r'<ul id="not-rechecked-list"><li data-difference="d-000000000002">ids: bytes ␣ / ↵ '
                     r'<small>d-000000000002 · other: its model not in the run', html)


def test_ten_thousand_distinct_differences_on_long_inputs_keep_the_page_small():
    result = sr.failing_result("toy", 10_000, distinct=True, long=True)
    report = build.build([result], meta={})
    assert report["summary"]["differences"] == 10_000
    html = html_of(build.differences.bounded(report), every=report)
    assert len(html.encode()) < 1_000_000, len(html.encode())
    assert len(lines_of(html)) == page.LINES_PER_MODEL == 50
    assert html.count('class="entry card"') == page.CARDS_PER_MODEL
    assert "and 9950 more differences" in html  # report.json keeps 50 of them: the summary counts all


def test_the_side_lists_are_cut_and_say_how_many_more():
    result = sr.ModelResult("toy", "bpe", cases=5000)
    for i in range(5000):
        result.add_flake({"case_ids": [f"c{i}"], "op": "tokenize", "first": "exited", "recheck": "answered"})
        result.add_fault({"case_id": f"c{i}", "op": "tokenize", "crash": {"kind": "signal", "signal": "SIGKILL"},
                          "reason": "a fresh worker answered"})
        result.add("known_oracle_crashes", {"case_id": f"k{i}", "text": "x" * 5000, "known_crash": "abort",
                                            "crash": {"reason": "killed by SIGABRT"}})
    result.notes = [f"long documents: a new difference in document {i} " + "x" * 1000 for i in range(500)]
    report = build.build([result], meta={"command": "x" * 100_000})
    message = {"target": "t", "model": "m", "case": "c", "verdict": "text differs", "expected_status": "ok",
               "actual_status": "ok", "expected_error": "", "actual_error": "", "reproduce": "r",
               "conversation": {"messages": [{"role": "user", "content": "hi" * 1000}]}, "diff": [["=", "x" * 1000]]}
    report["messages"] = {"cases": 500, "findings": [message] * 500, "oracle_crashes": [], "lines": []}
    html = html_of(report)
    assert len(html.encode()) < 1_000_000, len(html.encode())
    assert html.count("<tr data-model=\"toy\"><td class=\"name\">toy</td><td class=\"name\">c") == 2 * page.SIDE_ROWS
    assert "and 4950 more (report.json's <code>engine_flakes</code>)" in html
    assert "and 4950 more (report.json's <code>harness_faults</code>)" in html
    assert "abort · 5000 crashes on 1 model" in html and html.count('<td class="name">k') == page.SIDE_ROWS
    assert html.count('class="msg-entry"') == page.MESSAGES_SHOWN and "(470 more in messages.json)" in html
    assert "(and 490 more notes in report.json)" in html and "document 1 " in html and "document 10 " not in html
