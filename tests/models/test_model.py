"""`harness.models.model`: a model resolved once, its GGUF metadata read once for every input drawn from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.compare.subject import gguf_texts
from harness.errors import SetupError
from harness.inputs import corpus
from harness.models.model import Model, as_model, open_model
from harness.runs.config import RunConfig
from harness.runs.live import gather_cases
from tokenizer import GGUFError
from tokenizer.gguf import reader


@pytest.fixture
def reads(monkeypatch) -> list[Path]:
    """Every path our GGUF reader is asked to read while the test runs."""
    seen: list[Path] = []
    real = reader.read

    def counted(path, *args, **kwargs):
        seen.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(reader, "read", counted)
    return seen


@pytest.mark.vocab
@pytest.mark.parametrize("name", ["llama-spm", "bert-bge", "nomic-bert-moe"])
def test_a_run_reads_a_model_s_metadata_once(name, require_vocab, reads, tmp_path):
    """The corpus's vocabulary cases, the boundary probes, the documents and the token table share one read."""
    require_vocab(name)
    model = open_model(name)
    cases = gather_cases(model, RunConfig(models=(name,), report_dir=tmp_path, found_dir=None))
    texts = gguf_texts(model)
    assert reads == [model.path]
    assert any(c["id"].startswith("vocab-") for c in cases) or name == "bert-bge"
    assert any(c["id"].startswith("bnd-voc-") for c in cases) and any("document" in c for c in cases)
    assert len(texts) == len(model.require_metadata()["tokenizer.ggml.tokens"])


@pytest.mark.vocab
def test_default_corpora_of_a_path_read_it_once(require_vocab, reads):
    path = require_vocab("llama-spm")
    corpus.default_corpora(path)
    assert reads == [Path(path)]


def test_a_file_our_reader_refuses_gives_no_metadata_and_its_error_on_demand(tmp_path, reads):
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 5)  # a header cut short
    model = as_model(bad)
    assert model.metadata is None and model.name == "cut"
    with pytest.raises(GGUFError):
        model.require_metadata()
    assert corpus.vocab_cases(model) == []
    assert reads == [bad]  # refused once, remembered


def test_open_model_names_a_bad_argument(tmp_path):
    with pytest.raises(SetupError, match="no such GGUF file"):
        open_model(tmp_path / "absent.gguf")
    with pytest.raises(SetupError, match="unknown vocabulary"):
        open_model("no-such-vocabulary")


@pytest.mark.vocab
def test_open_model_keeps_the_argument_and_the_short_name(require_vocab):
    path = require_vocab("llama-spm")
    model = open_model("llama-spm")
    assert (model.arg, model.name, model.path) == ("llama-spm", "llama-spm", Path(path).resolve())
    assert as_model(model) is model and model.source is None
    assert Model("x", model.path, "x").name == "x"


@pytest.mark.vocab
def test_forgotten_metadata_is_read_again_when_asked(require_vocab, reads):
    require_vocab("llama-spm")
    model = open_model("llama-spm")
    first = model.metadata
    assert model.metadata is first and reads == [model.path]
    model.forget_metadata()
    again = model.metadata
    assert again is not first and again.keys() == first.keys() and reads == [model.path, model.path]


@pytest.mark.vocab
def test_a_planned_run_keeps_no_model_s_metadata(require_vocab, tmp_path):
    """`plan` gathers every model's cases before the first check: it lets each model's metadata go."""
    from harness.runs import live
    from harness.runs.shard import Shard

    for name in ("llama-spm", "bert-bge"):
        require_vocab(name)
    config = RunConfig(models=("llama-spm", "bert-bge"), report_dir=tmp_path, found_dir=None, shard=Shard.parse("1/2"))
    _, gathered = live.plan(config)
    assert [model.name for model, _ in gathered.values()] == ["llama-spm", "bert-bge"]
    assert all("_read" not in vars(model) and cases for model, cases in gathered.values())
