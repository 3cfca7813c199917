"""Lines that are true (issue 42, section 4): `convert` and `inspect --reference` name the converter's path.

Only the converter's BPE and WordPiece paths (`_set_vocab_gpt2`, `BertModel.set_vocab`, both through
`get_vocab_base`) compute a fingerprint; `_set_vocab_sentencepiece`, `_set_vocab_llama_hf` and
`_set_vocab_mistral` compute none. `inspect` once said the converter "would refuse to convert" a folder it
had just converted through `_set_vocab_llama_hf`, and a refusal on the BPE path was printed as "this path
computes no fingerprint: SentencePiece or --mistral-format". The fast tests replace the driver's run with
the result it writes (its `paths` record, as harness/models/convert_driver.py records them); the nightly
one runs the pinned converter on one tiny folder per path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import cli
from harness.models import convert
from tests import reference_files as rf
from tests.converter_fakes import fake_sources

CHKHSH = "ab" * 32
NOT_RECOGNIZED = "BPE pre-tokenizer was not recognized - update get_vocab_base_pre()"
NO_MODEL = {"path": "_set_vocab_sentencepiece", "model": "LlamaModel", "depth": 0,
            "raised": "FileNotFoundError: File not found: tokenizer.model"}
NOT_LLAMA_HF = {"path": "_set_vocab_llama_hf", "model": "LlamaModel", "depth": 0,
                "raised": "TypeError: Llama 3 must be converted with BpeVocab"}


def gpt2_refused(raised: str, chkhsh: str | None) -> dict:
    """The driver's result for a BPE folder the converter refuses on its `_set_vocab_gpt2` path."""
    return {"decisions": [{"chkhsh": chkhsh, "pre": None, "raised": raised}] if chkhsh else [],
            "paths": [NO_MODEL, NOT_LLAMA_HF, {"path": "_set_vocab_gpt2", "model": "LlamaModel", "depth": 0,
                                               "raised": raised},
                      {"path": "get_vocab_base", "model": "LlamaModel", "depth": 1, "raised": raised}],
            "error": {"type": raised.split(":")[0], "message": raised.split(": ", 1)[1]}}


def llama_hf_converted() -> dict:
    return {"decisions": [], "paths": [NO_MODEL, {"path": "_set_vocab_llama_hf", "model": "LlamaModel", "depth": 0,
                                                  "raised": None}],
            "error": None, "write": {"tokenizer.ggml.pre": "default"}}


@pytest.fixture
def driver(tmp_path, monkeypatch):
    """No venv: each driver run answers `answer`; its `write` keys, if any, become the GGUF at --outfile."""
    from harness.models.gguf_writer import write
    fake_sources(tmp_path, monkeypatch)
    seen: dict = {"answer": None, "modes": []}

    def run_driver(mode, args, *, timeout=900, folder_code=None):
        seen["modes"].append(mode)
        answer = dict(seen["answer"])
        if "write" in answer and "--outfile" in args:
            write(Path(args[args.index("--outfile") + 1]), {
                "general.architecture": "llama", "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ["a"],
                **answer.pop("write")})
        answer.pop("write", None)
        return {**answer, "output_tail": ["the converter's last lines"]}

    monkeypatch.setattr(convert, "run_driver", run_driver)
    return seen


def gguf(path: Path, pre: str) -> Path:
    from harness.models.gguf_writer import write
    write(path, {"general.architecture": "llama", "tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": pre,
                 "tokenizer.ggml.tokens": ["a", "b"]})
    return path


def folder(root: Path) -> Path:
    return rf.bpe_json(root / "tokenizer.json").parent


def convert_line(capsys, source: Path) -> str:
    """What `convert` printed about the folder: the line after `FOLDER: `."""
    out = capsys.readouterr().out
    return next(line for line in out.splitlines() if line.startswith(f"{source}: ")).split(": ", 1)[1]


def test_a_bpe_refusal_before_the_fingerprint_names_its_path_not_sentencepiece(tmp_path, driver, capsys):
    driver["answer"] = gpt2_refused("AssertionError: ", None)
    source = folder(tmp_path / "o")
    assert cli.main(["convert", str(source), "--out", str(tmp_path / "x.gguf")]) == 1
    line = convert_line(capsys, source)
    assert line.startswith("refused by LlamaModel._set_vocab_gpt2 (tried first: _set_vocab_sentencepiece: ")
    assert "no fingerprint: LlamaModel._set_vocab_gpt2 stopped before computing one" in line
    assert "SentencePiece or --mistral-format" not in line


def test_a_refusal_names_the_path_that_refused_and_its_fingerprint(tmp_path, driver, capsys):
    driver["answer"] = gpt2_refused(f"NotImplementedError: {NOT_RECOGNIZED}", CHKHSH)
    source = folder(tmp_path / "o")
    assert cli.main(["convert", str(source), "--out", str(tmp_path / "x.gguf")]) == 1
    line = convert_line(capsys, source)
    assert line.startswith("refused by LlamaModel._set_vocab_gpt2")
    assert line.endswith(f"NotImplementedError: {NOT_RECOGNIZED} (chkhsh {CHKHSH})")


def test_a_conversion_through_a_path_without_fingerprint_says_so(tmp_path, driver, capsys):
    driver["answer"] = llama_hf_converted()
    source = folder(tmp_path / "o")
    assert cli.main(["convert", str(source), "--out", str(tmp_path / "x.gguf")]) == 0
    line = convert_line(capsys, source)
    assert line.startswith("converted through LlamaModel._set_vocab_llama_hf")
    assert line.endswith("LlamaModel._set_vocab_llama_hf computes no fingerprint")


def test_inspect_claims_no_fingerprint_mismatch_for_a_path_that_computes_none(tmp_path, driver, capsys):
    """The folder converts through `_set_vocab_llama_hf` (pre `default`, no fingerprint): a GGUF with another
    pre is inconsistent with what the converter writes, and the line says which path, never "would refuse"."""
    source = folder(tmp_path / "o")
    driver["answer"] = llama_hf_converted()
    assert cli.main(["inspect", str(gguf(tmp_path / "ok.gguf", "default")), "--reference", f"hf:{source}"]) == 0
    out = capsys.readouterr().out
    assert "consistent: the converter's LlamaModel._set_vocab_llama_hf computes no fingerprint and writes " \
           "tokenizer.ggml.pre='default'" in out
    assert cli.main(["inspect", str(gguf(tmp_path / "bad.gguf", "llama-bpe")), "--reference", f"hf:{source}"]) == 1
    out = capsys.readouterr().out
    assert "INCONSISTENT: the converter's LlamaModel._set_vocab_llama_hf computes no fingerprint" in out
    assert "refuse" not in out and "chkhsh" not in out
    assert driver["modes"] == ["convert", "convert"]  # the converter's own decision, not a fingerprint alone


def test_inspect_names_the_path_that_refuses(tmp_path, driver, capsys):
    driver["answer"] = gpt2_refused(f"NotImplementedError: {NOT_RECOGNIZED}", CHKHSH)
    code = cli.main(["inspect", str(gguf(tmp_path / "x.gguf", "llama-bpe")), "--reference",
                     f"hf:{folder(tmp_path / 'o')}"])
    out = capsys.readouterr().out
    assert code == 1
    assert (f"INCONSISTENT: the converter refuses this folder (refused by LlamaModel._set_vocab_gpt2: "
            f"NotImplementedError: {NOT_RECOGNIZED}; chkhsh {CHKHSH}), yet the GGUF has "
            "tokenizer.ggml.pre='llama-bpe'") in out


@pytest.mark.nightly
def test_the_pinned_converter_on_one_folder_per_path(tmp_path):
    """The real converter (its venv; about 25 s a folder): each line names the path that converted or refused."""
    if not convert.is_ready():
        pytest.skip("the converter's venv is not built: run `python -m harness convert` once")
    from tests.references.test_conversion_causes import wpm_pair
    folders = {"sentencepiece": rf.spm_model(tmp_path / "spm" / "tokenizer.model").parent,
               "llama_hf": llama_hf_folder(tmp_path / "llama_hf"),
               "gpt2": folder(tmp_path / "gpt2"),
               "bert": wpm_pair(tmp_path / "bert")[1].parent,
               "mistral": rf.tekken_json(tmp_path / "tekken" / "tekken.json").parent}
    lines = {name: convert.describe(convert.convert(path, tmp_path / "out" / f"{name}.gguf", log=lambda m: None))
             for name, path in folders.items()}
    assert lines["sentencepiece"].startswith("converted through LlamaModel._set_vocab_sentencepiece:")
    assert lines["llama_hf"].startswith("converted through LlamaModel._set_vocab_llama_hf (tried first: "
                                        "_set_vocab_sentencepiece: FileNotFoundError")
    assert lines["gpt2"].startswith("refused by LlamaModel._set_vocab_gpt2") and NOT_RECOGNIZED in lines["gpt2"]
    assert lines["bert"].startswith("refused by BertModel.get_vocab_base") and "(chkhsh " in lines["bert"]
    assert lines["mistral"].startswith("converted through MistralModel._set_vocab_mistral:")
    for name in ("sentencepiece", "llama_hf", "mistral"):
        assert lines[name].endswith("computes no fingerprint"), lines[name]
    assert str(tmp_path / "llama_hf") in lines["llama_hf"]  # the folder, not the converter's private copy
    converted = tmp_path / "out" / "llama_hf.gguf"
    inspected = inspect_line(converted, f"hf:{folders['llama_hf']}")
    assert "consistent: the converter's LlamaModel._set_vocab_llama_hf computes no fingerprint" in inspected
    refused = inspect_line(converted, f"hf:{folders['gpt2']}")
    assert "INCONSISTENT: the converter refuses this folder (refused by LlamaModel._set_vocab_gpt2" in refused


def inspect_line(path: Path, spec: str) -> str:
    from harness.models.summary import summarize
    from harness.references import pre_check
    return pre_check.describe(pre_check.check_pre(summarize(path), pre_check.original_fingerprint(spec)))


def llama_hf_folder(root: Path) -> Path:
    """A Llama-2-style tokenizer.json (BPE with byte fallback, a Sequence decoder): `_set_vocab_llama_hf`."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tok.train_from_iterator(rf.TEXT, trainers.BpeTrainer(vocab_size=400, special_tokens=specials))
    root.mkdir(parents=True, exist_ok=True)
    tok.save(str(root / "tokenizer.json"))
    (root / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                                  "vocab_size": tok.get_vocab_size()}))
    return root
