"""The self-test's page (selftest.html): rendered from a template through the one jinja2 environment."""

from __future__ import annotations

from harness.report.templating import environment
from harness.selftest.report import html_page

REPORT = {
    "columns": ["golden", "live"],
    "settings": {"scope": "main", "fuzz": 5, "seed": 0}, "seconds": 12.6,
    "summary": {"mutants": 3,
                "per_detector": {"golden": {"killed": 1, "judged": 2, "survivors": ["m2"]},
                                 "live": {"killed": 1, "judged": 1, "survivors": []}},
                "per_area": {"spm": {"golden": (1, 2), "live": (1, 1)}}},
    "mutants": [
        {"id": "m1", "file": "tokenizer/engines/spm.py", "area": "spm", "description": "drops <0x0A>",
         "results": {"golden": {"killed": True, "outcome": "killed", "vocab": "llama-spm", "detail": "1 mismatch"},
                     "live": {"outcome": "timeout", "detail": "slow", "killed": False}}},
        {"id": "m2", "file": "tokenizer/engines/spm.py", "area": "spm", "description": "",
         "results": {"golden": {"killed": False, "tried": ["a", "b"]}, "live": {"killed": True, "implied": True}}},
        {"id": "m3", "file": "tokenizer/engines/spm.py", "area": "spm", "description": "",
         "results": {"golden": {"outcome": "not-run"}}},
    ],
    "baseline_failures": {"live": {"llama-bpe": "exit 1 <before>"}, "golden": {}},
}


def test_the_page_is_the_template_rendered_by_the_one_environment():
    page = html_page(REPORT)
    assert environment().get_template("selftest.html.j2").filename.endswith("selftest.html.j2")
    assert "<h1>Mutation self-test</h1>" in page and "3 mutants of <code>tokenizer/</code>" in page


def test_every_cell_kind_and_the_baseline_failures_are_shown_escaped():
    page = html_page(REPORT)
    assert "<td class=k>killed on llama-spm<br><small>1 mismatch</small></td>" in page
    assert "<td class=t>timeout (inconclusive)<br><small>slow</small></td>" in page
    assert "<td class=s>survived<br><small>2 vocabularies</small></td>" in page
    assert "<td class=k>killed (implied)</td>" in page and "<td class=n>not run</td>" in page
    assert "drops &lt;0x0A&gt;" in page and "<li>live on llama-bpe: exit 1 &lt;before&gt;</li>" in page
    assert "<td>golden</td><td>1/2" in page
