"""`harness.runs.check`: the one per-model check that golden replay, live runs and the fuzzer share.

The expected side is llama.cpp, as recorded in the committed golden (golden/ggml-vocab-llama-spm.json);
the engine is ours, or ours with one fault planted on one case, so every finding below must name
exactly that case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.compare.result import ModelResult
from harness.golden.files import GOLDEN_DIR, load_golden
from harness.models.model import open_model
from harness.runs import check
from harness.runs.config import RunConfig
from harness.runs.outcomes import engine_vocab
from harness.runs.progress import Progress
from harness.runs.replay import GoldenExpected
from harness.subjects.guard import InProcessEngine

pytestmark = pytest.mark.vocab
CASES = 40  # short cases of the golden, in order; enough to hold texts the planted faults pick


class Planted:
    """Our tokenizer, with one planted fault on inputs equal to `target` (bytes): a lost last token or a raise."""

    def __init__(self, tokenizer, target: bytes, fault: str) -> None:
        self._tok, self._target, self._fault = tokenizer, target, fault
        self.asked: list[bytes] = []

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def tokenize(self, text, *, add_special: bool, parse_special: bool) -> list[int]:
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
        self.asked.append(data)
        ids = self._tok.tokenize(text, add_special=add_special, parse_special=parse_special)
        if data == self._target and self._fault == "raise":
            raise RuntimeError("planted engine error")
        return ids[:-1] if data == self._target else ids


@pytest.fixture(scope="module")
def golden(require_vocab) -> dict:
    require_vocab("llama-spm")
    return load_golden(GOLDEN_DIR / "ggml-vocab-llama-spm.json")


def short_cases(golden: dict) -> list[dict]:
    return [c for c in golden["cases"] if "document" not in c and not c.get("crash")][:CASES]


def checked(golden: dict, cases: list[dict], tmp_path: Path, planted=None) -> ModelResult:
    """`subject` + `judge_cases` + `conclude` on `cases`, llama.cpp's side read from the golden."""
    from tokenizer import Tokenizer

    model = open_model("llama-spm")
    engine = InProcessEngine.load(lambda path: planted or Tokenizer.from_gguf(path), model.path, "test", {})
    config = RunConfig(models=("llama-spm",), report_dir=tmp_path, found_dir=None, quiet=True)
    result = ModelResult("llama-spm", "spm")
    subject = check.subject(model=model, engine=engine, vocab=golden["vocab"], pieces=None,
                            got_vocab=lambda: engine_vocab(engine), config=config, result=result)
    with Progress(total=len(cases), quiet=True) as bar:
        check.judge_cases(subject, cases, GoldenExpected(), result, bar)
    return check.conclude(result, cases, config)


def target_case(golden: dict) -> dict:
    """A case whose ids are not empty under any flag pair, so a lost last token shows in all four."""
    return next(c for c in short_cases(golden)[5:] if c.get("text", "").strip() and len(c["text"]) > 8)


def test_our_engine_agrees_with_the_golden_on_every_case(golden, tmp_path):
    cases = short_cases(golden)
    result = checked(golden, cases, tmp_path)
    assert result.cases == len(cases) == CASES
    assert (result.failing, result.mismatches, result.engine_errors, result.oracle_crashes) == (set(), [], [], [])
    assert result.not_checked is None


def test_a_planted_wrong_id_is_a_mismatch_on_that_case_only(golden, tmp_path):
    from tokenizer import Tokenizer

    target = target_case(golden)
    planted = Planted(Tokenizer.from_gguf(open_model("llama-spm").path), target["text"].encode(), "drop")
    result = checked(golden, short_cases(golden), tmp_path, planted)
    assert result.failing == {target["id"]}
    assert {m["case_id"] for m in result.mismatches} == {target["id"]} and len(result.mismatches) == 4
    saved = (tmp_path / "cases" / "llama-spm.jsonl").read_text(encoding="utf-8")
    assert target["id"] in saved and saved.count("\n") == 1  # the failing case kept for its reproduce line


def test_an_engine_error_is_a_finding_for_that_case(golden, tmp_path):
    from tokenizer import Tokenizer

    target = target_case(golden)
    planted = Planted(Tokenizer.from_gguf(open_model("llama-spm").path), target["text"].encode(), "raise")
    result = checked(golden, short_cases(golden), tmp_path, planted)
    assert result.failing == {target["id"]} and result.mismatches == []
    assert [e["case_id"] for e in result.engine_errors] == [target["id"]]
    assert "planted engine error" in result.engine_errors[0]["error"]


def test_a_case_llama_cpp_crashed_on_is_not_asked_of_the_engine(golden, tmp_path):
    from tokenizer import Tokenizer

    crashed = {"id": "crashed", "text": "ZQX never asked",
               "crash": {"kind": "signal", "signal": "SIGABRT", "exit": -6, "stderr": "GGML_ASSERT", "call": None}}
    planted = Planted(Tokenizer.from_gguf(open_model("llama-spm").path), b"\x00no such input", "drop")
    result = checked(golden, [*short_cases(golden)[:3], crashed], tmp_path, planted)
    assert b"ZQX never asked" not in planted.asked and len(planted.asked) > 0
    assert [c["case_id"] for c in result.oracle_crashes] == ["crashed"] and result.mismatches == []


def test_an_engine_that_did_not_load_fails_every_case():
    result = check.engine_unloaded(ModelResult("m", "spm"), [{"id": "a"}, {"id": "b"}])
    assert (result.cases, result.failing) == (2, {"a", "b"})
