"""One card per difference (harness/report/cards.py, templates/difference_card.html.j2): the two sides aligned by
bytes, tokens drawn as the text they stand for, the flag pairs that differ alike on one table, windowed; the
three-way findings of `run --reference` as one card per difference with its classes, pairs, rows and cause."""

from __future__ import annotations

import re

from harness.compare import diff
from harness.report import build, cards
from tests import synthetic_reports as sr


def page_of(entries: list[dict], kind: str = "mismatches") -> str:
    report = build.build([], meta={})
    report[kind] = entries
    return build.render_html(build.with_differences(report, build.differences.group(report)))


def rows_of(html: str) -> list[tuple[str, str, bool]]:
    """(llama.cpp's cell, the engine's cell, differs) of each row of the cards' byte-aligned tables."""
    out = []
    for cls, left, right in re.findall(r'<tr class="(differs)?"><td>(.*?)</td><td>(.*?)</td></tr>', html):
        ids = [re.findall(r"\">(\d+) <code>", cell) for cell in (left, right)]
        out.append((" ".join(ids[0]), " ".join(ids[1]), cls == "differs"))
    return out


def test_a_split_shows_as_a_split_and_the_rows_after_it_line_up_again():
    """`048` against `04|8`, twice: by index every row after the first split was red; by bytes the two
    engine tokens sit beside the one llama.cpp token, and the rows between and after agree."""
    found = sr.digit_split("toy", 0, before=3)
    segments = found["by_bytes"]["segments"]
    assert [(len(s["expected"]), len(s["got"]), s["differs"]) for s in segments] == [
        (1, 1, False)] * 3 + [(1, 2, True), (1, 1, False), (1, 2, True), (1, 1, False), (1, 1, False)]
    html = page_of([found])
    d048, d04, d8, space, y, ha, x = (str(t) for t in (sr.D048, sr.D04, sr.D8, sr.SPACE, sr.Y, sr.SPACE_HA,
                                                         sr.SPACE_X))
    assert rows_of(html) == [(x, x, False)] * 3 + [(d048, f"{d04} {d8}", True), (space, space, False),
                                                  (d048, f"{d04} {d8}", True), (y, y, False), (ha, ha, False)]
    # "differing pieces": each side's own, not the span spelled twice
    assert "differing pieces: llama.cpp <code>048</code> · engine <code>04</code> <code>8</code>" in html


def test_a_byte_level_token_is_drawn_as_the_text_it_stands_for_with_its_bytes():
    html = page_of([sr.digit_split("toy", 0)])
    assert f'title="id {sr.SPACE_HA} · token text ĠØŃ">{sr.SPACE_HA} <code>␣ح</code><small> 20 d8 ad</small>' in html
    assert "ĠØŃ</code>" not in html and ">ĠØŃ" not in html  # the raw text only in the title


def test_the_flag_pairs_that_differ_alike_share_one_table():
    entries = [sr.tab_bug("toy", 0, flags) for flags in sr.FLAG_PAIRS]
    assert entries[2]["expected"][0] == sr.BOS  # add_special: the ids differ by a BOS, the difference does not
    html = page_of(entries)
    assert html.count('<table class="seq by-bytes"') == 1
    flags = re.search(r'<table class="seq by-bytes"[^>]*><tr><th colspan="2" class="name">([^<]*)', html).group(1)
    assert flags.split("; ") == [cards.pair_name({"add_special": a, "parse_special": p}) for a, p in sr.FLAG_PAIRS]
    assert rows_of(html) == [(str(sr.A), str(sr.A), False), (str(sr.TAB), str(sr.NEWLINE), True),
                             (str(sr.B), str(sr.B), False)]


def test_a_long_input_is_drawn_around_its_difference():
    found = sr.digit_split("toy", 0, before=50_000)
    html = page_of([found])
    assert "… 49996 tokens before" in html and len(rows_of(html)) == diff.CONTEXT + 5
    assert len(html.encode()) < 60_000


def test_a_finding_written_before_the_byte_alignment_is_drawn_by_index_and_says_so():
    found = sr.digit_split("toy", 0)
    old = {k: v for k, v in found.items() if k != "by_bytes"}
    html = page_of([old])
    assert 'data-by="index"' in html and "rows by index" in html
    assert rows_of(html)[0] == (str(sr.D048), str(sr.D04), True)


# --- the three-way findings (`run --reference`) ---------------------------------------------------------

ROWS = [{"side": "engine", "ids": [7, 8], "tokens": [{"id": 7, "text": "à¤ķ", "piece": "क", "bytes": "e0 a4 95"},
                                                       {"id": 8, "text": "x"}]},
        {"side": "llama.cpp", "ids": [7, 8], "tokens": [{"id": 7, "text": "à¤ķ", "piece": "क", "bytes": "e0 a4 95"},
                                                          {"id": 8, "text": "x"}]},
        {"side": "original", "ids": [9], "tokens": [{"id": 9, "text": "kx"}]}]


def three_way(case_id: str, cls: str = "conversion", pair=(False, False), **extra) -> dict:
    sides = ["llama.cpp", "original"] if cls == "conversion" else ["engine", "original"]
    entry = {"model": "m", "case_id": case_id, "text": "e\u0301x", "class": cls,
             "category": "conversion" if cls == "conversion" else "engine vs original",
             "add_special": pair[0], "parse_special": pair[1], "expected": [7, 8], "got": [9], "first_diff": 0,
             "compared": sides, "rows": ROWS,
             "gguf_keys": ["tokenizer.ggml.pre: GGUF smaug-bpe, original ignore_merges"],
             "command": "python -m harness run --model m.gguf --reference hf:o", **extra}
    return {**entry, "signature": build.differences.signature_of("reference_findings", entry)[0]}


def eight(case_id: str, **extra) -> list[dict]:
    """One case that differs under every flag pair in both classes: eight findings, two differences."""
    return [three_way(case_id, cls, pair, **extra) for cls in ("conversion", "engine_vs_original")
            for pair in sr.FLAG_PAIRS]


def test_a_three_way_case_is_a_card_per_difference_with_its_pairs_as_rows():
    html = page_of(eight("c1"), "reference_findings")
    assert html.count('class="entry card"') == 2  # llama.cpp~original and engine~original
    assert html.count('data-pair-class="conversion"') == 4 and html.count('data-pair-class="engine_vs_original"') == 4
    assert html.count('data-side="original"') == 2  # the same ids under every pair: one table each
    assert "<code>क</code><small> e0 a4 95</small>" in html and "token text à¤ķ" in html


def test_code_points_are_listed_where_they_matter():
    assert cards.code_points("e\u0301x") == ["U+0065 LATIN SMALL LETTER E", "U+0301 COMBINING ACUTE ACCENT",
                                             "U+0078 LATIN SMALL LETTER X"]
    assert cards.code_points("plain words, 12!") == []
    assert cards.code_points("a\u200bb")[1] == "U+200B ZERO WIDTH SPACE"
    assert "U+0301 COMBINING ACUTE ACCENT" in page_of(eight("c1"), "reference_findings")


def test_the_cause_field_names_the_card_and_the_causes_table_counts_cases():
    entries = eight("c1", cause={"name": "add_space_prefix", "evidence": {"ids": [9]}}) + eight("c2")
    html = page_of(entries, "reference_findings")
    assert 'data-cause="add_space_prefix"' in html and "evidence: <code>{&#34;ids&#34;: [9]}</code>" in html
    assert re.search(r'<tr data-model="m" data-cause="add_space_prefix">.*?<td>1</td>', html)
    # without a cause field: the model's first GGUF key line leads
    assert 'data-cause="tokenizer.ggml.pre: GGUF smaug-bpe, original ignore_merges"' in html
    assert cards.cause_of({"class": "engine_vs_original", "category": "engine vs original"}) == "engine vs original"
    assert cards.cause_of({"cause": "unexplained", "gguf_keys": ["x"]}) == "unexplained"


def test_a_thousand_three_way_cases_make_a_small_page():
    """One card per case was 29.8 MB on a real model; one card per difference stays small."""
    entries = [e for i in range(1000) for e in eight(f"c{i}", cause=f"cause-{i % 5}")]
    html = page_of(entries, "reference_findings")
    assert html.count('class="entry card"') == 2 and len(html.encode()) < 200_000


def test_a_long_three_way_case_draws_its_tokens_around_the_first_difference_and_its_text_cut():
    long = [{"id": i, "text": f"t{i}"} for i in range(1000)]
    rows = [{"side": "engine", "ids": list(range(1000)), "tokens": long},
            {"side": "llama.cpp", "ids": list(range(1000)), "tokens": long},
            {"side": "original", "ids": [*range(500), 5000], "tokens": [*long[:500], {"id": 5000, "text": "x"}]}]
    html = page_of([three_way("c1", rows=rows, text="y" * 5000)], "reference_findings")
    assert html.count('class="tok"') == 3 * (cards.TOKENS_BEFORE + cards.TOKENS_AFTER) - (cards.TOKENS_AFTER - 1)
    assert "… 492 tokens before" in html and "… 476 more tokens" in html
    assert f"… ({5000 - cards.MAX_CHARS} more characters in report.json)" in html
