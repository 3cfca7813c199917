"""The three-way findings as one card per case, grouped by cause, on a page that stays small
(harness/report/cards.py, templates/case_cards.html.j2). Entries are built here in report.json's form."""

from __future__ import annotations

from harness.report import build, cards

ROWS = [{"side": "engine", "ids": [7, 8], "tokens": [{"id": 7, "text": "à¤ķ", "piece": "क", "bytes": "e0 a4 95"},
                                                       {"id": 8, "text": "x"}]},
        {"side": "llama.cpp", "ids": [7, 8], "tokens": [{"id": 7, "text": "à¤ķ", "piece": "क", "bytes": "e0 a4 95"},
                                                          {"id": 8, "text": "x"}]},
        {"side": "original", "ids": [9], "tokens": [{"id": 9, "text": "kx"}]}]
PAIRS = [(a, p) for a in (False, True) for p in (False, True)]


def finding(case_id: str, cls: str = "conversion", pair=(False, False), **extra) -> dict:
    return {"model": "m", "case_id": case_id, "text": "e\u0301x", "class": cls,
            "category": "conversion" if cls == "conversion" else "engine vs original",
            "add_special": pair[0], "parse_special": pair[1], "expected": [7, 8], "got": [9], "first_diff": 0,
            "rows": ROWS, "gguf_keys": ["tokenizer.ggml.pre: GGUF smaug-bpe, original ignore_merges"],
            "command": "python -m harness run --model m.gguf --reference hf:o", **extra}


def eight(case_id: str, **extra) -> list[dict]:
    """What one case that differs under every flag pair in both classes gives today: eight entries."""
    return [finding(case_id, cls, pair, **extra) for cls in ("conversion", "engine_vs_original") for pair in PAIRS]


def page(entries: list[dict]) -> str:
    report = build.build([], meta={})
    report["reference_findings"] = entries
    return build.render_html(report)


def test_a_case_differing_under_every_pair_and_class_is_one_card_with_its_pairs_as_rows():
    html = page(eight("c1"))
    assert html.count('class="entry card"') == 1
    assert html.count('data-pair-class="conversion"') == 4 and html.count('data-pair-class="engine_vs_original"') == 4
    assert html.count('data-side="original"') == 1  # the same ids under every pair: one table of tokens
    assert "add_special=True parse_special=False" in html


def test_a_byte_level_token_is_shown_as_the_text_it_stands_for_with_its_bytes():
    html = page(eight("c1"))
    assert "<code>क</code><small> e0 a4 95</small>" in html and "token text à¤ķ" in html


def test_code_points_are_listed_where_they_matter():
    assert cards.code_points("e\u0301x") == ["U+0065 LATIN SMALL LETTER E", "U+0301 COMBINING ACUTE ACCENT",
                                             "U+0078 LATIN SMALL LETTER X"]
    assert cards.code_points("plain words, 12!") == []
    assert cards.code_points("a\u200bb")[1] == "U+200B ZERO WIDTH SPACE"
    assert "U+0301 COMBINING ACUTE ACCENT" in page(eight("c1"))


def test_the_cause_field_names_the_card_and_leads_the_causes_table():
    entries = eight("c1", cause={"name": "add_space_prefix", "evidence": {"ids": [9]}}) + eight("c2")
    html = page(entries)
    assert html.index('id="causes"') < html.index('class="entry card"')
    assert 'data-cause="add_space_prefix"' in html and "evidence: <code>{&#34;ids&#34;: [9]}</code>" in html
    # without a cause field: today's lead, the model's first GGUF key line
    assert 'data-cause="tokenizer.ggml.pre: GGUF smaug-bpe, original ignore_merges"' in html
    assert cards.cause_of({"class": "engine_vs_original", "category": "engine vs original"}) == "engine vs original"
    assert cards.cause_of({"cause": "unexplained", "gguf_keys": ["x"]}) == "unexplained"


def test_the_page_draws_the_first_cards_per_cause_and_counts_the_rest():
    entries = [e for i in range(cards.PER_CAUSE + 7) for e in eight(f"c{i}")]
    html = page(entries)
    assert html.count('class="entry card"') == cards.PER_CAUSE
    assert "7 more in report.json; every case in cases/m.jsonl" in html


def test_a_thousand_cases_of_eight_findings_make_a_small_page():
    """The 29.8 MB page was one card per entry; with one card per case and 20 per cause it stays small."""
    causes = ["pre", "types", "scores", "marks", "unicode"]
    entries = [e for i in range(1000) for e in eight(f"c{i}", cause=causes[i % len(causes)])]
    html = page(entries)
    assert html.count('class="entry card"') == len(causes) * cards.PER_CAUSE
    assert len(html.encode()) < 1_000_000, len(html.encode())


def test_a_long_case_draws_its_tokens_around_the_first_difference_and_its_text_cut():
    long = [{"id": i, "text": f"t{i}"} for i in range(1000)]
    rows = [{"side": "engine", "ids": list(range(1000)), "tokens": long},
            {"side": "llama.cpp", "ids": list(range(1000)), "tokens": long},
            {"side": "original", "ids": [*range(500), 5000], "tokens": [*long[:500], {"id": 5000, "text": "x"}]}]
    html = page([finding("c1", rows=rows, text="y" * 5000)])
    assert html.count('class="tok"') == 3 * (cards.TOKENS_BEFORE + cards.TOKENS_AFTER) - (cards.TOKENS_AFTER - 1)
    assert "… 492 tokens before" in html and "… 460 more tokens" in html
    assert f"… ({5000 - cards.MAX_CHARS} more characters in report.json)" in html


def test_the_cards_drawn_for_a_cause_span_its_case_families():
    entries = ([e for i in range(30) for e in eight(f"edge-combining-{i:02d}")]
               + [e for i in range(3) for e in eight(f"bnd-orig-normal-{i:04d}")])
    html = page(entries)
    assert html.count('class="entry card"') == cards.PER_CAUSE
    assert all(f'data-case="bnd-orig-normal-{i:04d}"' in html for i in range(3))
    assert cards.family("bnd-orig-normal-0003") == "bnd-orig-normal" and cards.family("vocab-151661-bare") == "vocab"
