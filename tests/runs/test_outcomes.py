"""What a run writes beside its report for the reproduce lines (`harness.runs.outcomes.save_failing`)."""

from __future__ import annotations

from harness.compare.result import ModelResult
from harness.files import jsonl
from harness.inputs.corpus import load_corpus
from harness.runs.config import RunConfig
from harness.runs.outcomes import save_failing

CASES = [{"id": f"c{i}", "text": f"text {i}"} for i in range(4)]


def test_a_run_never_rewrites_the_cases_file_it_reads(tmp_path):
    """A reproduce line given its report's own folder (or any run reading `<report>/cases/m.jsonl` and writing
    that report) keeps every record of the file: the next reproduce line still finds its case."""
    cases_file = jsonl.write(tmp_path / "r" / "cases" / "m.jsonl", CASES[:3])
    config = RunConfig(models=("m",), report_dir=tmp_path / "r", corpora=(cases_file,), default_corpora=False)
    save_failing(ModelResult("m", "spm", failing={"c1"}), CASES[:3], config)
    assert load_corpus(cases_file) == CASES[:3]
    save_failing(ModelResult("m", "spm", failing={"c3"}), CASES, config)  # a case the file lacks is added
    assert load_corpus(cases_file) == CASES


def test_known_difference_cases_are_kept_for_their_reproduce_lines(tmp_path):
    result = ModelResult("m", "spm", failing={"c0"}, known_difference_ids={"c2"})
    save_failing(result, CASES, RunConfig(models=("m",), report_dir=tmp_path / "r"))
    assert [c["id"] for c in load_corpus(tmp_path / "r" / "cases" / "m.jsonl")] == ["c0", "c2"]
