"""tools/conversion_causes.py: each cause of a conversion finding is named by the fix that removes it.

Tiny originals built in the test (a byte-level BPE tokenizer.json from
tests/reference_files.py; a WordPiece one written here) and their GGUF twins
as llama.cpp's converter lays them out. The ids compared are llama.cpp's (on
the GGUF) and `tokenizers`' (on the tokenizer.json), never our engine's.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.references import causes
from tests import reference_files as rf

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "conversion_causes.py"

pytestmark = pytest.mark.oracle

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["a", "b", "ab", "##a", "##b", "the", "ᄒ", "##ᅡ", "##ᆫ", "क", "##ा", "1", "##⃣"]


@pytest.fixture(scope="module")
def cc():
    spec = importlib.util.spec_from_file_location("conversion_causes", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules["conversion_causes"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def wpm_pair(tmp: Path) -> tuple[Path, Path]:
    """all-MiniLM's settings on a tiny vocabulary: BertNormalizer (lowercase, strip_accents from it),
    BertPreTokenizer, WordPiece with max_input_chars_per_word 100; the GGUF as BertModel.set_vocab writes it."""
    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS)}
    data = {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for i, t in enumerate(SPECIALS)],
            "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                           "strip_accents": None, "lowercase": True},
            "pre_tokenizer": {"type": "BertPreTokenizer"}, "decoder": None,
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}},
                                          {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                               "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                        {"Sequence": {"id": "B", "type_id": 1}}],
                               "special_tokens": {t: {"id": t, "ids": [SPECIALS.index(t)], "tokens": [t]}
                                                  for t in ("[CLS]", "[SEP]")}},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": vocab}}
    original = tmp / "wpm" / "tokenizer.json"
    original.parent.mkdir(parents=True)
    original.write_text(json.dumps(data), encoding="utf-8")
    from harness.models import gguf_writer
    tokens = SPECIALS + [w[2:] if w.startswith("##") else "\u2581" + w for w in WORDS]
    gguf = tmp / "wpm.gguf"
    gguf_writer.write(gguf, {
        "general.architecture": "bert", "general.name": "tiny-wpm",
        "tokenizer.ggml.model": "bert", "tokenizer.ggml.pre": "jina-v2-en", "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [3] * len(SPECIALS) + [1] * len(WORDS),
        "tokenizer.ggml.unknown_token_id": 1, "tokenizer.ggml.bos_token_id": 2,
        "tokenizer.ggml.seperator_token_id": 3, "tokenizer.ggml.padding_token_id": 0,
    })
    return gguf, original


@pytest.fixture(scope="module")
def wpm(cc, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wpm")
    gguf, original = wpm_pair(tmp)
    sides = cc.Sides(gguf, original.parent, tmp)
    return sides, cc.fixes_for(sides)


@pytest.mark.parametrize(("text", "cause"), [
    ("a" * 101, "word-length"),          # one [UNK] in the original, pieces in llama.cpp
    ("a\x0bb", "control-whitespace"),    # removed by HF's clean_text ("ab"), a word break in llama.cpp
    ("a\x85b", "control-whitespace"),
    ("한", "hangul-nfd"),                # llama.cpp's NFD keeps the first jamo only
    ("का", "spacing-marks"),             # U+093E (Mc): llama.cpp strips it, HF keeps it
    ("1\u20e3", "spacing-marks"),        # U+20E3 (Me)
    ("a\U00011b00", "unicode-tables"),   # Po since Unicode 15.0: split by llama.cpp, unknown to HF's tables
    ("a\u2581b", "phantom-space"),       # the converter's word-start marker, typed by the user
])
def test_each_wpm_cause_is_the_one_fix_that_makes_them_agree(cc, wpm, text, cause):
    sides, fixes = wpm
    original, llama = sides.rows(text, (False, False))
    assert original != llama  # a finding to explain
    assert cc.minimal_fix_sets(sides, text, cc.PAIRS, fixes) == [(cause,)]


def test_agreeing_text_needs_no_fix(cc, wpm):
    sides, fixes = wpm
    assert cc.minimal_fix_sets(sides, "ab the " + "a" * 100, cc.PAIRS, fixes) == [()]


@pytest.fixture(scope="module")
def bpe(cc, tmp_path_factory):
    """The planted smaug-bpe twin of tests/runs/test_third_side.py, with <tool> (special=false) typed CONTROL."""
    tmp = tmp_path_factory.mktemp("bpe")
    original = rf.bpe_json(tmp / "o" / "tokenizer.json", ignore_merges=True, bos=False)
    gguf = rf.bpe_gguf(original, tmp / "smaug.gguf", pre="smaug-bpe", add_bos=False)
    from harness.models.gguf_writer import rewrite
    from tokenizer.gguf.reader import read
    types = list(read(gguf).metadata["tokenizer.ggml.token_type"])
    tool = next(t["id"] for t in json.loads(original.read_text())["added_tokens"] if t["content"] == rf.TOOL)
    types[tool] = 3
    rewrite(gguf, tmp / "control.gguf", {"tokenizer.ggml.token_type": types})
    sides = cc.Sides(tmp / "control.gguf", original.parent, tmp)
    return sides, cc.fixes_for(sides)


def test_bpe_causes_are_the_gguf_keys_that_fix_them(cc, bpe):
    sides, fixes = bpe
    assert cc.minimal_fix_sets(sides, " zebra", cc.PAIRS, fixes) == [("ignore-merges",)]
    # <tool> differs only where parse_special is off: llama.cpp skips a CONTROL token there
    assert cc.minimal_fix_sets(sides, "x <tool>", [(False, False)], fixes) == [("added-token-type",)]
    assert cc.minimal_fix_sets(sides, "x <tool>", [(False, True)], fixes) == [()]


def test_the_report_mode_counts_every_conversion_finding(cc, wpm, tmp_path):
    sides, _ = wpm
    findings = [{"class": "conversion", "case_id": f"c{i}", "text": text, "add_special": False,
                 "parse_special": False} for i, text in enumerate(["a\x0bb", "한", "a\x0cb"])]
    findings.append({"class": "parity", "case_id": "p", "text": "x", "add_special": False, "parse_special": False})
    (tmp_path / "report.json").write_text(json.dumps({"reference_findings": findings}), encoding="utf-8")
    done = subprocess.run([sys.executable, str(TOOL), str(tmp_path), str(sides.gguf), str(sides.tokenizer_json.parent)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 conversion findings (cases):" in done.stdout
    assert "    2  control-whitespace" in done.stdout and "    1  hangul-nfd" in done.stdout


def test_the_evidence_of_a_long_case_keeps_the_first_ids_and_the_lengths():
    """A long document's cause must not copy its 100,000 ids per side into every card (report.json)."""
    ids = list(range(5000))
    row = causes._row((True, False), ids, ids + [1])
    assert row["original"] == ids[:causes.EVIDENCE_IDS] and row["llama.cpp"] == ids[:causes.EVIDENCE_IDS]
    assert row["ids_n"] == {"original": 5000, "llama.cpp": 5001}
    assert "ids_n" not in causes._row((True, False), [1, 2], [1, 2])
