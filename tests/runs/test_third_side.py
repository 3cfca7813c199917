"""`run --reference SPEC`: the original tokenizer as the check's third side (harness/runs/third_side.py).

The original is a tiny tokenizer.json built in the test by `tokenizers`
(tests/reference_files.py); its GGUF twin is written with our writer, with a
planted conversion fault (a pre name that drops ignore_merges, a missing
add_bos). Expected ids: the original's from `tokenizers` in this process,
llama.cpp's from llama.cpp (`OracleSession`), never from our engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.golden.records import FLAGS
from harness.oracle.session import OracleSession
from tests import reference_files as rf

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["the cat sat", " zebra", "hello <|bos|> world <tool>", "Hello, World! It's", ""]

pytestmark = pytest.mark.oracle


def library_ids(path: Path, text: str, add_special: bool, parse_special: bool) -> list[int]:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(path))
    tok.encode_special_tokens = not parse_special
    return tok.encode(text, add_special_tokens=add_special).ids


def llama_ids(gguf: Path, text: str) -> list[list[int]]:
    with OracleSession(gguf, timeout=60) as oracle:
        record = oracle.evaluate({"id": "x", "text": text})
    return [e["ids"] for e in record["encode"]]


def three_way(tmp_path: Path, *, pre: str = "llama-bpe", add_bos: bool = True, texts=TEXTS,
              extra: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, Path, Path, Path]:
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=True)
    gguf = rf.bpe_gguf(original, tmp_path / f"{pre}.gguf", pre=pre, add_bos=add_bos)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    report = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--reference",
                           f"hf:{original.parent}", "--no-default-corpora", "--corpus", str(corpus), "--long-docs", "0",
                           "--jobs", "1", "--report", str(report), "--quiet", *(extra or ("--fuzz", "0"))],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    return done, original, gguf, report


def test_a_planted_conversion_finding_is_classified_counted_and_carded(tmp_path):
    """smaug-bpe drops ignore_merges: " zebra" is one token in the original, merged pieces in llama.cpp."""
    done, original, gguf, report_dir = three_way(tmp_path, pre="smaug-bpe")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    assert report["mismatches"] == []  # our engine agrees with llama.cpp: no parity finding
    conversion = [e for e in report["reference_findings"] if e["class"] == "conversion"]
    assert {e["text"] for e in conversion} == {" zebra"}
    assert len(conversion) == 4  # every flag pair
    llama = llama_ids(gguf, " zebra")
    for entry in conversion:
        pair = (entry["add_special"], entry["parse_special"])
        want_original = library_ids(original, " zebra", *pair)
        assert entry["expected"] == llama[FLAGS.index(pair)] and entry["got"] == want_original
        assert [r["side"] for r in entry["rows"]] == ["engine", "llama.cpp", "original"]
        assert [r["ids"] for r in entry["rows"]][1:] == [entry["expected"], want_original]
        assert any(line.startswith("tokenizer.ggml.pre:") for line in entry["gguf_keys"])
        assert "--reference" in entry["command"] and entry["command"].endswith(f"hf:{original.parent}")
    assert {e["class"] for e in report["reference_findings"]} == {"conversion", "engine_vs_original"}
    block = report["summary"]["reference"]
    assert block["cases"] == len(TEXTS)
    assert block["classes"]["conversion"] == {"checked": 5, "agree": 4, "differ": 1, "not_applicable": 0}
    assert block["classes"]["parity"] == {"checked": 5, "agree": 5, "differ": 0, "not_applicable": 0}
    assert block["classes"]["engine_vs_original"]["differ"] == 1
    assert block["findings"] == {"conversion": 4, "engine_vs_original": 4}
    assert block["pairs_not_applicable"] == {}
    page = (report_dir / "report.html").read_text()
    # one card per difference (conversion, engine vs original), each with its 4 differing flag pairs as rows and
    # one table of tokens per distinct set of ids (with and without the BOS), not 8 cards with the same rows
    assert page.count('class="entry card"') == 2 and page.count('data-pair-class="conversion"') == 4
    assert page.count('data-side="original"') == 4 and "tokenizer.ggml.pre: GGUF" in page


def test_each_conversion_finding_names_its_cause_found_by_experiment(tmp_path):
    """The smallest change that makes the case agree: tokenizer.ggml.pre rewritten (llama-bpe sets ignore_merges)."""
    done, original, _, report_dir = three_way(tmp_path, pre="smaug-bpe")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    conversion = [e for e in report["reference_findings"] if e["class"] == "conversion"]
    data = json.loads(original.read_text())
    whole = [data["model"]["vocab"][rf.WORD]]
    bos = [next(t["id"] for t in data["added_tokens"] if t["content"] == rf.BOS)]
    for entry in conversion:
        assert entry["cause"]["cause"] == "pre-name"
        assert {"pre-name", "original-ignore-merges"} <= set(entry["cause"]["sets"])
        for row in entry["cause"]["evidence"]:  # " zebra" whole, after the BOS where add_special is on
            assert row["original"] == row["llama.cpp"] == (bos if row["add_special"] else []) + whole
    assert report["summary"]["reference"]["causes"] == {"pre-name": 1}
    page = (report_dir / "report.html").read_text()
    assert 'data-cause="pre-name"' in page and "Causes of the conversion findings" in page
    assert page.count("after the change, this flag pair: original <code>") == len(conversion)


def test_the_reproduce_line_reruns_the_case_three_ways(tmp_path):
    _, _, _, report_dir = three_way(tmp_path, pre="smaug-bpe")
    entry = json.loads((report_dir / "report.json").read_text())["reference_findings"][0]
    again = tmp_path / "again"
    command = entry["command"].split() + ["--report", str(again), "--quiet", "--jobs", "1"]
    rerun = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr
    redone = json.loads((again / "report.json").read_text())
    assert redone["summary"]["reference"]["cases"] == 1
    assert {e["text"] for e in redone["reference_findings"]} == {" zebra"}


def test_a_missing_add_bos_is_a_conversion_finding_on_the_add_special_pairs(tmp_path):
    done, original, _, report_dir = three_way(tmp_path, add_bos=False)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    conversion = [e for e in report["reference_findings"] if e["class"] == "conversion"]
    assert {(e["add_special"], len(e["got"]) - len(e["expected"])) for e in conversion} == {(True, 1)}
    assert len(conversion) == 2 * len(TEXTS)
    assert all(e["got"][0] == library_ids(original, "", True, True)[0] for e in conversion)  # the original's BOS
    assert any(line.startswith("tokenizer.ggml.add_bos_token:") for line in conversion[0]["gguf_keys"])
    assert report["summary"]["reference"]["classes"]["conversion"]["differ"] == len(TEXTS)
    assert {e["cause"]["cause"] for e in conversion} == {"add-bos"}
    assert report["summary"]["reference"]["causes"] == {"add-bos": len(TEXTS)}


def test_all_three_agreeing_exits_0(tmp_path):
    done, _, _, report_dir = three_way(tmp_path, pre="llama-bpe")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    assert report["reference_findings"] == [] and report["mismatches"] == []
    assert report["summary"]["reference"]["classes"]["conversion"] == {"checked": 5, "agree": 5, "differ": 0,
                                                                      "not_applicable": 0}
    assert report["meta"]["reference"].startswith("hf:")


def test_a_fuzzed_conversion_finding_is_shrunk_and_saved_under_the_reports_found(tmp_path):
    """A GGUF without add_bos: every input differs under add_special: the hunt shrinks the first, counts the rest."""
    done, original, _, report_dir = three_way(tmp_path, add_bos=False, texts=[],
                                                 extra=("--fuzz", "20", "--seed", "1"))
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    assert report["mismatches"] == []
    fuzzed = [e for e in report["reference_findings"] if e.get("fuzz") and e["class"] == "conversion"]
    assert fuzzed, report["summary"]
    [name] = report["summary"]["per_model"]
    saved = [json.loads(line) for line in (report_dir / "found" / f"{name}.jsonl").read_text().splitlines()]
    text = saved[0].get("text")  # the first difference found (one saved per difference: the hunt goes on)
    assert len(text) <= 1, text  # minimised: the BOS alone decides it
    assert {e["add_special"] for e in fuzzed} == {True}
    shrunk = next(e for e in fuzzed if e["text"] == text)
    assert shrunk["got"][:1] == library_ids(original, text, True, True)[:1]
    assert any("fuzz: new difference" in n for n in report["summary"]["per_model"][name]["notes"])


def test_a_reference_that_could_compare_nothing_is_not_checked_not_a_pass(tmp_path):
    """Only bytes that are not UTF-8: the original (str only) is not applicable on every case: exit 2."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json")
    gguf = rf.bpe_gguf(original, tmp_path / "llama-bpe.gguf")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"b{i}", "bytes": b}) + "\n" for i, b in enumerate(("ff20", "c328"))))
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--reference",
                           f"hf:{original.parent}", "--no-default-corpora", "--corpus", str(corpus), "--fuzz", "0",
                           "--long-docs", "0", "--jobs", "1", "--report", str(tmp_path / "r"), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    [reason] = report["summary"]["not_checked"].values()
    assert "could be compared on no case" in reason
    assert report["summary"]["reference"]["classes"]["conversion"] == {"checked": 0, "agree": 0, "differ": 0,
                                                                      "not_applicable": 2}


@pytest.mark.parametrize(("args", "message"), [
    (["--reference", "hf:/nonexistent/folder"], "error: reference 'hf:/nonexistent/folder': no such file"),
    (["--reference", "tok:/x"], "error: --reference 'tok:/x': expected hf:PATH, spm:PATH or tekken:PATH"),
    (["--reference-arg", "add_bos=true"], "error: --reference-arg needs --reference"),
])
def test_a_bad_reference_is_one_line_and_exit_2(tmp_path, args, message):
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "llama-bpe", *args,
                           "--report", str(tmp_path / "r"), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith(message), done.stderr


def test_summary_reference_adds_up_over_models_and_over_merged_reports():
    from harness.compare.result import ModelResult
    from harness.references import classify
    from harness.report import build

    def result(name: str, differ: bool) -> ModelResult:
        counts = classify.Counts()
        counts.add_case([[1]] * 4, [[1]] * 4, [[2] if differ else [1], None, [1], None])
        made = ModelResult(name, "bpe", cases=1)
        made.reference = counts.as_dict()
        if differ:
            made.add("reference_findings", {"case_id": "c0", "text": "x", "class": "conversion"})
        return made

    one = build.build([result("a", True)], meta={})
    two = build.build([result("b", False)], meta={})
    assert one["summary"]["reference"]["classes"]["conversion"] == {"checked": 1, "agree": 0, "differ": 1,
                                                                   "not_applicable": 0}
    merged = build.merge([one, two, build.build([result("a", False)], meta={})], meta={})["summary"]["reference"]
    assert merged["cases"] == 3 and merged["models"] == ["a", "b"]
    assert merged["classes"]["conversion"] == {"checked": 3, "agree": 2, "differ": 1, "not_applicable": 0}
    assert merged["pairs_not_applicable"] == {"add_special=False,parse_special=True": 3,
                                              "add_special=True,parse_special=True": 3}
    assert merged["findings"] == {"conversion": 1}
    assert "reference" not in build.build([ModelResult("c", "bpe", cases=1)], meta={})["summary"]


# --- decoding: the original decodes llama.cpp's ids (harness/references/decoding.py) --------------

BANG = "Hello, World! It's"


def _replace_bang(original: Path) -> None:
    """A planted decode-only fault: the original's decoder also turns "!" into "?" (its ids are untouched)."""
    data = json.loads(original.read_text(encoding="utf-8"))
    data["decoder"] = {"type": "Sequence", "decoders": [
        data["decoder"], {"type": "Replace", "pattern": {"String": "!"}, "content": "?"}]}
    original.write_text(json.dumps(data), encoding="utf-8")


def llama_record(gguf: Path, text: str) -> dict:
    with OracleSession(gguf, timeout=60) as oracle:
        return oracle.evaluate({"id": "x", "text": text})


def library_decode(path: Path, ids: list[int], unparse_special: bool) -> str:
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(path)).decode(ids, skip_special_tokens=not unparse_special)


def run_three_way(tmp_path: Path, original: Path, gguf: Path, texts: list[str], *extra: str):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    report = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--reference",
                           f"hf:{original.parent}", "--no-default-corpora", "--corpus", str(corpus), "--fuzz", "0",
                           "--long-docs", "0", "--jobs", "1", "--report", str(report), "--quiet", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    return done, report


def test_a_decode_only_difference_is_a_decode_finding_carded_counted_and_exit_1(tmp_path):
    """Ids agree three ways; only the original's decode of llama.cpp's ids differs: a decode finding."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json")
    _replace_bang(original)
    gguf = rf.bpe_gguf(original, tmp_path / "llama-bpe.gguf")
    done, report_dir = run_three_way(tmp_path, original, gguf, ["the cat sat", BANG])
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    assert report["mismatches"] == []
    assert {e["class"] for e in report["reference_findings"]} == {"decode"}  # no ids class differs
    block = report["summary"]["reference"]
    assert block["classes"]["conversion"]["differ"] == 0 and block["classes"]["conversion"]["agree"] == 2
    record = llama_record(gguf, BANG)
    want_differ = 0
    for entry in report["reference_findings"]:
        assert entry["text"] == BANG and entry["category"] == "decode conversion"
        pair = (entry["add_special"], entry["parse_special"])
        encoded = record["encode"][FLAGS.index(pair)]
        assert entry["ids"] == encoded["ids"]  # what is decoded: llama.cpp's ids
        assert [r["side"] for r in entry["rows"]] == ["engine", "llama.cpp", "original"]
        detok = {(d["remove_special"], d["unparse_special"]): d["text"] for d in encoded["detokenize"]}
        for shown in entry["decode"]:
            flags = (shown["remove_special"], shown["unparse_special"])
            assert bytes.fromhex(shown["llama_hex"]) == detok[flags].encode()  # byte-exact, from llama.cpp
            assert shown["original_text"] == library_decode(original, encoded["ids"], flags[1])
            assert "?" in shown["original_text"] and "!" in shown["llama_text"]
            want_differ += 1
    assert len(report["reference_findings"]) == 4  # one per flag pair
    assert block["decode"]["differ"] == want_differ and block["findings"] == {"decode": 4}
    assert block["decode"].get("agree", 0) + want_differ + block["decode"].get("not_applicable", 0) == 2 * 16
    assert f"decode {block['decode']['agree']}/{block['decode']['agree'] + want_differ} agree" in done.stdout
    page = (report_dir / "report.html").read_text()
    assert page.count('data-decode="original"') == want_differ and "decode conversion" in page


def test_a_clean_up_difference_stays_a_finding_with_its_cause(tmp_path):
    """llama.cpp's detokenize cleans " ," where the original (no clean_up_tokenization_spaces) does not: a known
    llama.cpp behaviour explains the difference, it does not make it agreement (issue 42: 288 such
    detokenizations on a cl100k model were counted "explained" and reported as no finding). Where the original's
    own tokenizer_config.json asks for the clean-up, the decodes agree and nothing is set aside as a finding."""
    from harness.references import classify
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json")
    gguf = rf.bpe_gguf(original, tmp_path / "llama-bpe.gguf")
    text = "Hello , World ! don 't"
    encoded = llama_record(gguf, text)["encode"][0]
    llama = next(d["text"] for d in encoded["detokenize"] if not d["remove_special"] and not d["unparse_special"])
    raw = library_decode(original, encoded["ids"], False)
    outcome = classify.decode_outcome(llama.encode(), {"raw": raw, "cleaned": classify_clean(raw), "applied": raw})
    if outcome != "explained:clean_up_tokenization_spaces":
        pytest.skip(f"llama.cpp's detokenize does not clean spaces here ({llama!r} vs {raw!r})")
    done, report_dir = run_three_way(tmp_path, original, gguf, [text], "--long-docs", "0", "--calls", "0")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    decode = report["summary"]["reference"]["decode"]
    assert decode["explained:clean_up_tokenization_spaces"] >= 4  # the same ids under each add_special off pair
    entries = report["reference_findings"]
    assert entries and {e["class"] for e in entries} == {"decode"}
    for entry in entries:
        assert entry["cause"]["cause"] == "clean_up_tokenization_spaces"
        assert "clean_up_tokenization_spaces: 'absent'" in entry["cause"]["why"]
        assert {d["outcome"] for d in entry["decode"]} == {"explained:clean_up_tokenization_spaces"}
    assert "explained, 0 unexplained" in done.stdout.split("decode ", 1)[1]
    (original.parent / "tokenizer_config.json").write_text(json.dumps({"clean_up_tokenization_spaces": True}))
    done, report_dir = run_three_way(tmp_path, original, gguf, [text], "--long-docs", "0", "--calls", "0")
    assert done.returncode == 0, done.stdout + done.stderr  # the original asks for the clean-up: they agree
    assert json.loads((report_dir / "report.json").read_text())["reference_findings"] == []


def classify_clean(text: str) -> str:
    from harness.references.flags import clean_up_tokenization
    return clean_up_tokenization(text)


def test_compare_with_a_reference_replays_the_golden_three_ways(tmp_path):
    """`compare --reference`: the golden is llama.cpp's side; the same summary.reference, cards and exit 1."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=True)
    _replace_bang(original)
    gguf = rf.bpe_gguf(original, tmp_path / "smaug-bpe.gguf", pre="smaug-bpe")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    golden = tmp_path / "g"
    recorded = subprocess.run([sys.executable, "-m", "harness", "record", "--model", str(gguf), "--corpus",
                               str(corpus), "--out", str(golden), "--jobs", "1"],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    live, live_dir = run_three_way(tmp_path, original, gguf, TEXTS)
    report_dir = tmp_path / "cmp"
    done = subprocess.run([sys.executable, "-m", "harness", "compare", "--golden", str(golden), "--model", str(gguf),
                           "--reference", f"hf:{original.parent}", "--report", str(report_dir), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 1 == live.returncode, done.stdout + done.stderr
    replayed = json.loads((report_dir / "report.json").read_text())
    live_report = json.loads((live_dir / "report.json").read_text())
    assert replayed["meta"]["reference"] == f"hf:{original.parent}"
    golden_cases = {c["id"] for c in json.loads(next(golden.glob("*.json")).read_text())["cases"]}
    block, live_block = replayed["summary"]["reference"], live_report["summary"]["reference"]
    assert block["cases"] == len(golden_cases)
    assert {e["class"] for e in replayed["reference_findings"]} == {"conversion", "engine_vs_original", "decode"}
    conversion = [e for e in replayed["reference_findings"] if e["class"] == "conversion"]
    assert " zebra" in {e["text"] for e in conversion} and all(e["rows"] for e in conversion)
    decode = [e for e in replayed["reference_findings"] if e["class"] == "decode"]
    assert {e["text"] for e in decode} == {BANG}
    # the cases both runs hold are judged alike: per text, the same findings
    def by_text(report):
        return sorted((e["text"], e["class"], e["add_special"], e["parse_special"])
                      for e in report["reference_findings"] if e["text"] in TEXTS)
    assert by_text(replayed) == by_text(live_report)
    assert block["decode"]["differ"] == live_block["decode"]["differ"]
    assert "reference: parity" in done.stdout and "decode" in done.stdout


def test_a_fuzzed_decode_finding_is_shrunk_and_saved(tmp_path):
    """The original's decoder also turns " " into "_": any input with a space differs in decode alone."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json")
    data = json.loads(original.read_text(encoding="utf-8"))
    data["decoder"] = {"type": "Sequence", "decoders": [
        data["decoder"], {"type": "Replace", "pattern": {"String": " "}, "content": "_"}]}
    original.write_text(json.dumps(data), encoding="utf-8")
    gguf = rf.bpe_gguf(original, tmp_path / "llama-bpe.gguf")
    done, report_dir = run_three_way(tmp_path, original, gguf, [], "--fuzz", "30", "--seed", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    fuzzed = [e for e in report["reference_findings"] if e.get("fuzz")]
    assert fuzzed and {e["class"] for e in fuzzed} == {"decode"}, report["summary"]
    # the hunt spends its budget: other inputs differ too, but the one difference's first input is shrunk to
    # one space, the least that decodes differently, and only that one is saved as a find
    assert len({e["signature"] for e in fuzzed}) == 1
    shrunk = [e for e in fuzzed if e["text"] == " "]
    assert shrunk, {e["text"] for e in fuzzed}
    shown = shrunk[0]["decode"][0]
    assert bytes.fromhex(shown["llama_hex"]) == b" " and shown["original_text"] == "_"
    [name] = report["summary"]["per_model"]
    saved = [json.loads(line) for line in (report_dir / "found" / f"{name}.jsonl").read_text().splitlines()]
    assert [c.get("text") for c in saved] == [" "]


# --- tekken: a Mistral tekken.json through mistral-common -------------------------------------------

def tekken_ids(path: Path, text: str, add_special: bool) -> list[int]:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    return Tekkenizer.from_file(path).encode(text, bos=add_special, eos=False)


def test_tekken_three_ways_finds_llama_cpps_tekken_regex_dropping_marks(tmp_path):
    """llama.cpp's tekken regex (llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_TEKKEN) spells the letter classes
    as "a letter that is not a-z / A-Z" and so leaves out \\p{M}: KA + the vowel sign I, one piece and one
    token for tekken, is split before the mark. The GGUF is laid out by the converter's own MistralVocab."""
    original = rf.tekken_json(tmp_path / "o" / "tekken.json")
    gguf = rf.tekken_gguf(original, tmp_path / "tekken.gguf")
    texts = ["the cat sat", rf.KI, "hello [INST] world", " école"]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"c{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    report_dir = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--reference",
                           f"tekken:{original.parent}", "--no-default-corpora", "--corpus", str(corpus), "--fuzz",
                           "0", "--long-docs", "0", "--jobs", "1", "--report", str(report_dir), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    assert report["mismatches"] == []
    conversion = [e for e in report["reference_findings"] if e["class"] == "conversion"]
    assert {e["text"] for e in conversion} == {rf.KI} and len(conversion) == 4
    llama = llama_ids(gguf, rf.KI)
    for entry in conversion:
        pair = (entry["add_special"], entry["parse_special"])
        assert entry["expected"] == llama[FLAGS.index(pair)]
        assert entry["got"] == tekken_ids(original, rf.KI, pair[0])
        assert entry["command"].endswith(f"tekken:{original.parent}")
        assert any(line.startswith("tokenizer.ggml.pre:") and "\\p{M}" in line for line in entry["gguf_keys"])
    assert len(conversion[0]["got"]) < len(conversion[0]["expected"])  # one token in tekken, two in llama.cpp
    block = report["summary"]["reference"]
    assert block["classes"]["conversion"] == {"checked": 4, "agree": 3, "differ": 1, "not_applicable": 0}
    # "[INST]" in text: llama.cpp parses it, tekken never does: those two pairs are not applicable
    assert block["pairs_not_applicable"] == {"add_special=False,parse_special=True": 1,
                                             "add_special=True,parse_special=True": 1}


def test_the_originals_own_added_tokens_become_boundary_cases(tmp_path):
    """The GGUF writes the original's plain added token <tool> NORMAL (as the converter did to Mistral v3's
    user-defined pieces): the GGUF's special lists no longer name it; the original's list does (`bnd-ref-`
    cases, with the default corpora), and llama.cpp splits what the original matches whole."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=True)
    gguf = rf.bpe_gguf(original, tmp_path / "retyped.gguf", retype={rf.TOOL: 1})
    report_dir = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--reference",
                           f"hf:{original.parent}", "--fuzz", "0", "--jobs", "1", "--report", str(report_dir),
                           "--quiet", "--long-docs", "0", "--calls", "0",
                           # five cases: report.json lists 40 findings a list, and these are the ones looked at
                           "-k", " or ".join(f"bnd-ref-{i:04d}" for i in range(5))],
                          capture_output=True, text=True, cwd=ROOT,
                          timeout=900, env={**os.environ, "GGUF_PARITY_DOCUMENTS": "off"})  # the boundary cases only
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    assert report["mismatches"] == [] and "listed" not in report["summary"]["per_model"][gguf.stem]
    conversion = [e for e in report["reference_findings"] if e["class"] == "conversion"]
    # (the tiny file's ByteLevel split is not llama-bpe's: digit runs and long words differ as well, and
    # <tool>, now NORMAL, is among the longest tokens the GGUF's own slice spells, which a real file's is not)
    with_tool = {e["case_id"] for e in conversion if rf.TOOL in e["text"]}
    assert {f"bnd-ref-{i:04d}" for i in range(5)} <= with_tool, with_tool
    entry = next(e for e in conversion if e["case_id"] == "bnd-ref-0000")
    from tokenizers import Tokenizer
    tool = Tokenizer.from_file(str(original)).token_to_id(rf.TOOL)
    assert tool in entry["got"] and tool not in entry["expected"]  # whole in the original, split by llama.cpp
    assert entry["expected"] == llama_ids(gguf, entry["text"])[FLAGS.index((entry["add_special"],
                                                                             entry["parse_special"]))]


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
def test_the_fuzzer_draws_the_originals_own_added_tokens_too(tmp_path):
    """<tool> written NORMAL is in neither of the GGUF's special lists the fuzzer draws from; with
    --reference the original's own list is added to them, so the hunt finds and shrinks it (with the GGUF's
    lists alone, seeds 1 to 3 found nothing in 100 inputs each)."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=False)
    gguf = rf.bpe_gguf(original, tmp_path / "retyped.gguf", pre="gpt-2", retype={rf.TOOL: 1})
    report_dir = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--reference",
                           f"hf:{original.parent}", "--no-default-corpora", "--fuzz", "60", "--seed", "1",
                           "--jobs", "1", "--report", str(report_dir), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((report_dir / "report.json").read_text())
    fuzzed = [e for e in report["reference_findings"] if e.get("fuzz") and e["class"] == "conversion"]
    assert fuzzed and all(rf.TOOL in e["text"] for e in fuzzed)
    for entry in fuzzed:
        assert entry["expected"] == llama_ids(gguf, entry["text"])[FLAGS.index((entry["add_special"],
                                                                                 entry["parse_special"]))]
    [name] = report["summary"]["per_model"]
    saved = [json.loads(line) for line in (report_dir / "found" / f"{name}.jsonl").read_text().splitlines()]
    assert [c["text"] for c in saved] == [fuzzed[0]["text"]]
