"""harness/data/corpora/diverse.txt, the cold benchmark text, is diverse: many scripts, many words that occur once.

At least a dozen scripts, and at least half of its distinct words occurring
once; `corpora/build_diverse.py` (which needs wordfreq and Faker to rebuild the
file, but only `regex` for the statistics) computes both.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_diverse():
    spec = importlib.util.spec_from_file_location("build_diverse", ROOT / "corpora" / "build_diverse.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_diverse_corpus_has_a_dozen_scripts_and_mostly_hapax_words():
    stats = build_diverse().stats((ROOT / "harness" / "data" / "corpora" / "diverse.txt").read_text(encoding="utf-8"))
    assert len(stats["scripts"]) >= 12, stats["scripts"]
    assert stats["hapax_of_distinct"] >= 0.5
    assert stats["chars"] >= 250_000


def test_the_statistics_see_a_repetitive_text():
    stats = build_diverse().stats("the cat sat on the mat. " * 100 + "Москва 東京")
    assert stats["hapax_of_distinct"] < 0.5
    assert stats["scripts"] == ["Latin"]  # 200+ letters needed to count a script
