"""The fuzzer: strategies are small, documented and readable; cases replay exactly; and
(oracle) our engine agrees with live llama.cpp on fuzzed inputs.

The differential tests take their settings from the Hypothesis profile
(`GGUF_PARITY_HYPOTHESIS_PROFILE`, default `ci`); the nightly sweep over every
shipped vocabulary runs with `--nightly`.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from harness.environment import project_root
from harness.inputs import fuzz, strategies
from harness.models.shipped import SHIPPED
from harness.oracle import known_crashes

VIEW = strategies.VocabView("toy", pieces=(b"\xe2\x96\x81he", b"llo", b"\xe2\x96"), specials=("<s>", "<|im_end|>"),
                      byte_fallback=True)

STRATEGIES = {
    "any_category": strategies.any_category(),
    "weighted_categories": strategies.weighted_categories(),
    "digits_of_many_scripts": strategies.digits_of_many_scripts(),
    "whitespace_runs": strategies.whitespace_runs(),
    "format_controls": strategies.format_controls(),
    "rare_code_points": strategies.rare_code_points(),
    "nfc_nfd_pair": strategies.nfc_nfd_pair(),
    "combining_marks": strategies.combining_marks(),
    "contraction": strategies.contraction(),
    "emoji_sequences": strategies.emoji_sequences(),
    "script_words": strategies.script_words(),
    "unicode_heavy": strategies.unicode_heavy(),
    "vocab_concat": strategies.vocab_concat(VIEW),
    "special_tokens": strategies.special_tokens(VIEW),
    "byte_fallback_triggers": strategies.byte_fallback_triggers(),
    "vocab_aware": strategies.vocab_aware(VIEW),
    "invalid_utf8": strategies.invalid_utf8(),
    "fuzz_inputs": strategies.fuzz_inputs(VIEW),
}


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in STRATEGIES])
def test_repr_shows_the_call(name):
    assert repr(STRATEGIES[name]).startswith(f"{name}(")
    assert "VocabView('toy')" in repr(STRATEGIES[name]) or "view" not in repr(STRATEGIES[name])


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in STRATEGIES])
def test_docstring_names_the_trap(name):
    doc = getattr(strategies, name).__doc__ or ""
    assert len(doc.strip()) > 20


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in STRATEGIES])
def test_inputs_become_replayable_cases(name):
    @settings(max_examples=30, database=None, deadline=None)
    @given(STRATEGIES[name])
    def check(value):
        assert isinstance(value, (str, bytes))
        case = strategies.as_case(value)
        assert strategies.input_bytes(strategies.case_input(case)) == strategies.input_bytes(value)
        assert ("bytes" in case) == (not _valid(strategies.input_bytes(value)))
        assert case == strategies.as_case(value)  # stable id
    check()


def _valid(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize(("strategy", "wanted"), [
    pytest.param(strategies.invalid_utf8(), lambda v: isinstance(v, bytes) and not _valid(v), id="invalid-utf8"),
    pytest.param(strategies.whitespace_runs(), lambda v: "\r\n" in v and "\u2028" in v, id="crlf-and-u2028"),
    pytest.param(strategies.format_controls(), lambda v: "\u200d" in v, id="zwj"),
    pytest.param(strategies.rare_code_points(), lambda v: 0xE000 <= ord(v) <= 0xF8FF, id="private-use"),
    pytest.param(strategies.rare_code_points(), lambda v: ord(v) & 0xFFFE == 0xFFFE, id="noncharacter"),
    pytest.param(strategies.special_tokens(VIEW), lambda v: v.startswith("word<|im_end|>"), id="special-glued"),
    pytest.param(strategies.vocab_concat(VIEW), lambda v: isinstance(v, bytes), id="split-mid-utf8"),
    pytest.param(strategies.digits_of_many_scripts(), lambda v: any(c.isdigit() and not c.isascii() for c in v),
                 id="non-ascii-digits"),
])
def test_strategy_reaches_its_trap(strategy, wanted):
    find(strategy, wanted, settings=settings(max_examples=2000, database=None, deadline=None))


def test_vocab_view_keeps_specials_and_samples_pieces():
    texts = [b"<s>", b"<0x41>", b"a", b"b", b"<user>"]
    attrs = [8, 32, 4, 4, 16]
    view = strategies.vocab_view(name="v", texts=texts, attrs=attrs, pieces=[b"", b"A", b"a", b"b", b"<user>"])
    assert view.specials == ("<s>", "<user>")
    assert view.pieces == (b"a", b"b")
    assert view.byte_fallback


def test_profiles_and_environment(monkeypatch):
    for name in ("ci", "dev", "nightly"):
        assert settings.get_profile(name).deadline is None
    assert settings.get_profile("ci").max_examples < settings.get_profile("nightly").max_examples
    monkeypatch.setenv(fuzz.PROFILE_ENV, "nightly")
    try:
        assert fuzz.load_profile() == "nightly"
        assert settings.default.max_examples == settings.get_profile("nightly").max_examples
    finally:
        settings.load_profile("default")


def test_database_lives_in_the_project(monkeypatch):
    monkeypatch.delenv(fuzz.DB_ENV, raising=False)
    assert fuzz.database_dir() == project_root() / ".hypothesis" / "examples"


# --- differential: our engine against live llama.cpp ------------------------------------------

def differential(model: str, require_vocab, *, n: int, corpora: tuple = ()):
    pytest.importorskip("tokenizer.api", reason="tokenizer.Tokenizer has not landed yet")
    from harness.models.model import open_model
    from harness.runs.config import RunConfig
    from harness.runs.live import check_model
    from harness.subjects.spec import load_engine

    require_vocab(model)
    config = RunConfig(models=(model,), report_dir=_tmp_report(), default_corpora=False, fuzz=n, corpora=corpora,
                       seed=None if os.environ.get(fuzz.PROFILE_ENV) else 7, found_dir=None, quiet=True,
                       known_crashes=known_crashes.from_option(None))
    result = check_model(open_model(model), config, load_engine(None))
    assert result.cases > 0
    assert not nightly_problems(result), nightly_problems(result)[0]
    return result


def nightly_problems(result) -> list[dict]:
    """What makes `run` exit 1 (harness.compare.result.FINDINGS): known llama.cpp crashes are not among them."""
    from harness.compare.result import FINDINGS

    return [entry for kind in FINDINGS for entry in getattr(result, kind)]


def _tmp_report():
    import tempfile
    from pathlib import Path
    return Path(tempfile.mkdtemp(prefix="fuzz-report-"))


def _budget() -> int:
    fuzz.load_profile()
    budget = settings.default.max_examples
    settings.load_profile("default")
    return budget


@pytest.mark.oracle
def test_our_engine_matches_llama_cpp_on_fuzz(require_vocab):
    differential("llama-spm", require_vocab, n=_budget())


@pytest.mark.oracle
def test_nightly_differential_passes_over_known_crashes(require_vocab, tmp_path):
    """F4 90 80 80 aborts llama.cpp on BPE vocabularies (known crash invalid-codepoint): the nightly
    differential lists it as known and passes, as `run` exits 0 on it (it used to fail the nightly)."""
    corpus = tmp_path / "above-max.jsonl"
    corpus.write_text(json.dumps({"id": "above-max", "bytes": "f4908080"}) + "\n", encoding="utf-8")
    result = differential("gpt-2", require_vocab, n=0, corpora=(corpus,))
    assert [e["known_crash"] for e in result.known_oracle_crashes] == ["invalid-codepoint"]


@pytest.mark.oracle
@pytest.mark.nightly
@pytest.mark.parametrize("model", [pytest.param(m, id=m) for m in SHIPPED])
def test_nightly_fuzz_every_shipped_vocabulary(model, require_vocab):
    fuzz.load_profile(os.environ.get(fuzz.PROFILE_ENV) or "nightly")
    budget = settings.default.max_examples
    settings.load_profile("default")
    differential(model, require_vocab, n=budget)


# --- the hunt: search, shrink, database (no llama.cpp: a planted judge) -------------------------

TOY = st.text(alphabet="ab \t19", max_size=12)


def _two_bugs(case: dict) -> list:
    """Two planted differences, as tests/broken_engine.py:load_two_bugs plants them: a tab, else a digit."""
    value = str(strategies.case_input(case))
    if "\t" in value:
        return [("mismatches", {"case_id": case["id"], "signature": "d-tab"})]
    if any(c.isdigit() for c in value):
        return [("mismatches", {"case_id": case["id"], "signature": "d-digit"})]
    return []


def _hunt(judge=_two_bugs, **kwargs):
    """A hunt with every generated input logged: (the Hunt, [(case id, its signatures)] in order)."""
    seen: list = []
    kwargs = {"n": 200, "seed": 3, "key": "toy", **kwargs}
    found = fuzz.hunt(kwargs.pop("strategy", TOY), judge,
                      on_example=lambda case, findings: seen.append((case["id"], sorted(e["signature"]
                                                                                       for _, e in findings))),
                      **kwargs)
    return found, seen


def test_hunt_spends_its_whole_budget_and_shrinks_each_difference_once():
    found, seen = _hunt()
    assert found.generated == len(seen) == 200 and len({case_id for case_id, _ in seen}) == 200
    assert sorted((f.new, strategies.case_input(f.case), f.shrunk) for f in found.found) == [
        (("d-digit",), "1", True), (("d-tab",), "\t", True)]
    counted = sum(1 for _, sigs in seen if sigs)
    assert found.failing == counted > 20  # the rest of the failing inputs are counted, not shrunk


def test_hunt_counts_a_repeated_difference_without_shrinking_it_again():
    judged: list = []
    found, _ = _hunt(judge=lambda case: judged.append(case["id"]) or _two_bugs(case))
    assert len(judged) - found.generated < 2 * fuzz.SHRINK_BUDGET  # two shrinks' steps, not one per failure
    assert len(judged) == len(set(judged))  # every input judged once


def test_hunt_with_a_seed_is_reproducible():
    first, second = _hunt(seed=5), _hunt(seed=5)
    assert first == second and first[0].generated == 200
    assert _hunt(seed=6)[1] != first[1]
    passing = fuzz.hunt(TOY, lambda case: [], n=30, seed=5, key="toy")
    assert passing == fuzz.Hunt(30, 0, (), ())


def test_hunt_shrink_budget_bounds_its_cost():
    """Every input its own difference: the first `shrink_total` shrink steps are spent, the rest kept as found."""
    judged: list = []

    def each_its_own(case: dict) -> list:
        judged.append(case["id"])
        return [("mismatches", {"signature": case["id"]})] if strategies.case_input(case) else []

    found = fuzz.hunt(TOY, each_its_own, n=60, seed=1, key="toy", shrink_budget=10, shrink_total=30)
    assert found.generated == 60 and len(judged) <= 60 + 30 + 10
    assert any(f.shrunk for f in found.found) and any(not f.shrunk for f in found.found)


def test_a_drawn_seed_with_an_empty_database_generates_what_the_seed_does(tmp_path, monkeypatch):
    """An unseeded run draws a seed and uses the example database: with nothing saved yet, `--seed N` runs
    the same inputs."""
    monkeypatch.setenv(fuzz.DB_ENV, str(tmp_path))
    assert _hunt(seed=9, database=True) == _hunt(seed=9, database=False)


def test_hunt_without_a_seed_saves_each_difference_and_replays_them_first(tmp_path, monkeypatch):
    monkeypatch.setenv(fuzz.DB_ENV, str(tmp_path))
    found, _ = _hunt(seed=None)
    assert sorted(f.new for f in found.found) == [("d-digit",), ("d-tab",)]
    assert len(list(tmp_path.iterdir())) >= 2  # one folder per round key: each difference saved
    again, seen = _hunt(seed=None, n=2)  # round 0 replays the first difference, round 1 the second
    assert again.generated == 2 and {f.new for f in again.found} == {("d-digit",), ("d-tab",)}
    assert {case_id for case_id, _ in seen} == {f.case["id"] for f in found.found}


def test_hunt_saves_in_the_database_folder_it_is_given(tmp_path, monkeypatch):
    """`database_dir` (a user engine's `<report>/found/.hypothesis`) wins over the project's database, and
    nothing is written to `os.environ` to say so (harness.runs.live passes it down)."""
    monkeypatch.setenv(fuzz.DB_ENV, str(tmp_path / "project"))
    before = dict(os.environ)
    found, _ = _hunt(seed=None, database_dir=tmp_path / "own")
    assert sorted(f.new for f in found.found) == [("d-digit",), ("d-tab",)]
    assert len(list((tmp_path / "own").iterdir())) >= 2 and not (tmp_path / "project").exists()
    assert dict(os.environ) == before
