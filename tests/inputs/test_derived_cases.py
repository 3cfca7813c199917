"""Cases derived from the original's own rules (harness/inputs/derived.py, harness/references/original.py).

The unit tests read rules from tokenizer.json data built here. The oracle tests run
`run --reference` with the default corpora on tiny originals whose GGUF twin loses
what the original has (llama.cpp's rewrite of a pattern's case classes; an NFC
normalizer the GGUF cannot carry): expected ids come from llama.cpp and from the
original's own library, never from our engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from harness.golden.records import FLAGS
from harness.inputs import derived
from harness.references import original
from tests import reference_files as rf

ROOT = Path(__file__).resolve().parents[2]
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
CASE_WORDS = ("Ç", "Ã", "AÇ", "AÇÃ", "AÇÃO")   # each two earlier tokens joined: "AÇÃO" is one token


def rules(**fields) -> original.OriginalRules:
    return original.OriginalRules(kind="hf", **fields)


def split(pattern: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


def test_a_pattern_with_case_classes_gets_all_caps_words_that_mix_ascii_and_non_ascii_letters():
    probes = derived.case_probes([rf.TEKKEN_PATTERN])
    assert {"AÇÃO", "SÃO PAULO", "ոՈ"} <= set(probes)
    assert any(p.isupper() and not p.isascii() and any(c.isascii() for c in p) for p in probes)


def test_a_pattern_without_case_classes_gets_none():
    assert derived.case_probes([LLAMA3_PATTERN]) == []
    assert derived.mark_probes([LLAMA3_PATTERN])  # it names \p{L}: letters with marks, per script


def test_an_nfc_normalizer_gets_the_vocabularys_own_words_composed_and_decomposed():
    data = {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split(LLAMA3_PATTERN),
                                                                    {"type": "ByteLevel", "use_regex": False}]},
            "model": {"type": "BPE", "vocab": {rf.byte_level(" école"): 0, "cat": 1}}}
    read = original.hf_rules(data, {})
    assert read.normalizers == ("NFC",) and read.patterns == (LLAMA3_PATTERN,)
    probes = derived.normal_probes(read.normalizers, read.vocab_words)
    assert probes == [" école", unicodedata.normalize("NFD", " école")]
    assert derived.normal_probes((), read.vocab_words) == []


def test_added_tokens_are_read_with_their_flags_and_probed_in_context():
    data = {"added_tokens": [{"id": 5, "content": "<x>", "special": False, "lstrip": True, "rstrip": False,
                              "single_word": True, "normalized": True}],
            "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}},
                                                                        {"Sequence": {"id": "A"}}]}}
    read = original.hf_rules(data, {"add_bos_token": True})
    assert read.added == (original.AddedToken("<x>", lstrip=True, single_word=True, normalized=True),)
    assert read.add_bos is True and read.add_eos is None and read.post_bos and not read.post_eos
    probes = derived.added_probes(read.added)
    assert {"a<x>b", "a <x> b", "x\t<x>\n y", "<x><x>", "word<x>"} <= set(probes)
    assert derived.policy_probes(read) == ["Hello world", " ", "a"]


def test_a_bytelevel_pre_tokenizer_that_splits_is_read_as_gpt2s_pattern():
    read = original.hf_rules({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False}}, {})
    assert read.patterns == (original.GPT2_PATTERN,)


def test_every_unicode_version_has_probes_and_those_python_knows_are_assigned():
    probes = derived.unicode_probes()
    assert " \U0001fae9" in probes  # U+1FAE9, Unicode 16.0
    known = unicodedata.unidata_version
    for version, points in derived.UNICODE_VERSIONS.items():
        assert points
        if tuple(map(int, version.split("."))) <= tuple(map(int, known.split(".")[:2])):
            assert all(unicodedata.category(chr(cp)) != "Cn" for cp in points), version


def test_derived_cases_are_packed_by_family_and_off_gives_none():
    read = rules(patterns=(rf.TEKKEN_PATTERN,), normalizers=("NFKC",), vocab_words=("é",))
    cases = derived.derived_cases(read)
    tags = {c["id"].rsplit("-", 1)[0] for c in cases}
    assert tags == {"bnd-orig-case", "bnd-orig-marks", "bnd-orig-normal", "bnd-orig-uni"}
    assert len(derived.derived_cases(read, "full")) > len(cases)
    assert derived.derived_cases(read, "off") == []


def test_an_unreadable_original_gives_empty_rules(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    assert original.read(f"hf:{bad}") == original.OriginalRules(kind="hf")


# --- end to end, three ways (llama.cpp in the loop) ------------------------------------------------

def run_default(tmp_path: Path, gguf: Path, spec: str, *,
                long: bool = True) -> tuple[subprocess.CompletedProcess, dict]:
    """`run --reference SPEC` with the default cases; without `long`, none of the long inputs (documents in the
    corpora, the long phases), which have their own tests."""
    report_dir = tmp_path / "r"
    short = [] if long else ["--long-docs", "0", "--calls", "0"]
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--reference", spec,
                           "--fuzz", "0", "--jobs", "1", *short, "--report", str(report_dir), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, **({} if long else {"GGUF_PARITY_DOCUMENTS": "off"})})
    assert (report_dir / "report.json").is_file(), f"exit {done.returncode}: {done.stderr[-2000:]}"
    return done, json.loads((report_dir / "report.json").read_text())


def llama_ids(gguf: Path, text: str) -> list[list[int]]:
    from harness.oracle.session import OracleSession
    with OracleSession(gguf, timeout=60) as oracle:
        record = oracle.evaluate({"id": "x", "text": text})
    return [e["ids"] for e in record["encode"]]


@pytest.mark.oracle
def test_llama_cpps_rewrite_of_the_case_classes_is_found_by_a_default_run(tmp_path):
    """tekken's pattern (o200k-style case classes): "AÇÃO" is one piece and one token in the original;
    llama.cpp's rewrite spells upper case as "a letter not a-z", so its first alternative stops before the
    ASCII "O": two tokens. Only the cases derived from the original's pattern reach it."""
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tekken = rf.tekken_json(tmp_path / "o" / "tekken.json", words=CASE_WORDS)
    gguf = rf.tekken_gguf(tekken, tmp_path / "tekken.gguf")
    done, report = run_default(tmp_path, gguf, f"tekken:{tekken.parent}", long=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert report["mismatches"] == []
    found = [e for e in report["reference_findings"]
             if e["class"] == "conversion" and e["case_id"].startswith("bnd-orig-case-") and "AÇÃO" in e["text"]]
    assert found, sorted({e["case_id"] for e in report["reference_findings"]})
    entry = found[0]
    pair = (entry["add_special"], entry["parse_special"])
    assert entry["expected"] == llama_ids(gguf, entry["text"])[FLAGS.index(pair)]
    assert entry["got"] == Tekkenizer.from_file(tekken).encode(entry["text"], bos=pair[0], eos=False)
    whole = Tekkenizer.from_file(tekken).encode("AÇÃO", bos=False, eos=False)
    assert len(whole) == 1 and len(llama_ids(gguf, "AÇÃO")[0]) == 2


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
@pytest.mark.usefixtures("default_environment")  # a default run, also in the nightly
def test_an_nfc_normalizer_the_gguf_cannot_carry_is_found_by_a_default_run(tmp_path):
    """The original composes "e" + U+0301 into "é" (NFC) and finds " école" whole; llama.cpp has no NFC for
    BPE and splits the decomposed bytes. The vocabulary's own word, decomposed, is a derived case."""
    from tokenizers import Tokenizer

    tokenizer_json = rf.bpe_json(tmp_path / "o" / "tokenizer.json", words=(" école",), nfc=True)
    gguf = rf.bpe_gguf(tokenizer_json, tmp_path / "nfc.gguf")
    done, report = run_default(tmp_path, gguf, f"hf:{tokenizer_json.parent}")
    assert done.returncode == 1, done.stdout + done.stderr
    decomposed = unicodedata.normalize("NFD", " école")
    found = [e for e in report["reference_findings"] if e["class"] == "conversion"
             and e["case_id"].startswith("bnd-orig-normal-") and decomposed in e["text"]]
    assert found, sorted({e["case_id"] for e in report["reference_findings"]})
    entry = found[0]
    pair = (entry["add_special"], entry["parse_special"])
    hf = Tokenizer.from_file(str(tokenizer_json))
    hf.encode_special_tokens = not pair[1]
    assert entry["got"] == hf.encode(entry["text"], add_special_tokens=pair[0]).ids
    assert entry["expected"] == llama_ids(gguf, entry["text"])[FLAGS.index(pair)]
    # the default corpora's long document differs too; its findings show a window, so each stays small
    long = [e for e in report["reference_findings"] if e.get("text_window")]
    assert long and all(e["text_window"][2] > len(e["text"]) for e in long)
    assert max(len(json.dumps(e)) for e in report["reference_findings"]) < 100_000


# --- on the pinned real set (nightly: converted by `python -m harness convert --real`) --------------

REAL_CLASSES = [  # (entry, spec kind, derived family whose case must differ, a probe that must be in it)
    pytest.param("mistral-tekken-240911", "tekken", "case", "ոՈ", id="letter-case-tekken"),
    pytest.param("qwen2-5", "hf", "normal", None, id="nfc-qwen2-5"),
    pytest.param("llama3-2", "hf", "uni", "\U00010d50", id="unicode-16-llama3-2"),
]


@pytest.mark.nightly
@pytest.mark.oracle
@pytest.mark.parametrize(("name", "kind", "family", "probe"), REAL_CLASSES)
def test_a_run_on_a_pinned_original_finds_its_class(tmp_path, name, kind, family, probe):
    """The default cases but the long inputs (documents, long phases: the nightly's real-set step runs them on
    these files; the three took 273 s with them, 60 s without): the derived case finds the class."""
    from harness.models.real_set import real_dir, real_gguf_dir
    gguf = real_gguf_dir() / f"{name}.gguf"
    if not gguf.is_file():
        pytest.skip(f"{gguf} not converted: python -m harness fetch --real && python -m harness convert --real")
    done, report = run_default(tmp_path, gguf, f"{kind}:{real_dir() / name}", long=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert report["mismatches"] == []
    found = [e for e in report["reference_findings"] if e["class"] == "conversion"
             and e["case_id"].startswith(f"bnd-orig-{family}-") and (probe is None or probe in e["text"])]
    assert found, sorted({e["case_id"] for e in report["reference_findings"]})
