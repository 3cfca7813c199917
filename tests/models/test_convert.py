"""`harness convert` and `inspect --reference`: what is supplied to the converter, and a refusal as a result.

The converter itself runs in a venv of several GB that the tests session does not
build; these tests replace the driver's run (`harness.models.convert.run_driver`) with the
result JSON it writes, so they check our side: the work folder, the sidecar, the
command's output and exit status. The run of the real converter on a real
tokenizer is a nightly test (the nightly session fetches and converts the real
set first, `parity-real`).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from harness import cli
from harness.models import convert, real_set
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN
from harness.models.shipped import SetupError
from harness.references import pre_check
from tests.converter_fakes import fake_sources

SMAUG = "c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d"


def bpe_folder(root: Path, *, wordpiece: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    model = {"type": "WordPiece" if wordpiece else "BPE", "vocab": {"a": 0, "b": 1}}
    (root / "tokenizer.json").write_text(json.dumps({"model": model}), encoding="utf-8")
    return root


@pytest.fixture
def fake_converter(tmp_path, monkeypatch):
    """No venv: the converter's sources are two files, and each driver run answers `answer`."""
    fake_sources(tmp_path, monkeypatch)
    seen: dict = {"answer": None, "runs": []}

    def run_driver(mode, args, *, timeout=900, folder_code=None):
        work = Path(args[0])
        seen["runs"].append((mode, args, {p.name: p.read_text() for p in work.iterdir()}))
        return {**seen["answer"], "output_tail": ["the converter's last lines"]}

    monkeypatch.setattr(convert, "run_driver", run_driver)
    return seen


def test_a_folder_without_config_gets_a_minimal_one_and_the_command_says_so(tmp_path, fake_converter, capsys):
    source = bpe_folder(tmp_path / "llama3")
    fake_converter["answer"] = {"decisions": [{"chkhsh": SMAUG, "pre": "smaug-bpe", "raised": None}],
                                "error": None}
    out = tmp_path / "out" / "llama3.gguf"
    code = cli.main(["convert", str(source), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "supplied config.json" in printed and "LlamaForCausalLM" in printed
    assert "supplied tokenizer_config.json" in printed
    _, _, files = fake_converter["runs"][0]
    assert json.loads(files["config.json"]) == {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                                "vocab_size": 2}
    assert json.loads(files["tokenizer_config.json"]) == {"tokenizer_class": "PreTrainedTokenizerFast"}
    assert not (source / "config.json").exists()  # the input folder is never written to
    # the fake driver wrote no GGUF: that is recorded as a refusal (no output), exit 1
    record = json.loads(convert.sidecar_path(out).read_text())
    assert code == 1 and record["refusal"]["type"] == "NoOutput"
    assert record["chkhsh"] == SMAUG and record["pre_chosen"] == "smaug-bpe"
    assert [s["file"] for s in record["supplied"]] == ["config.json", "tokenizer_config.json"]


def test_a_wordpiece_folder_is_given_a_bert_config(tmp_path):
    assert convert.guess_architecture(bpe_folder(tmp_path / "w", wordpiece=True)) == "BertModel"
    assert convert.guess_architecture(bpe_folder(tmp_path / "b")) == "LlamaForCausalLM"


def test_the_vocabulary_size_of_a_sentencepiece_model_is_counted_from_its_pieces(tmp_path):
    def piece(text: bytes) -> bytes:  # ModelProto field 1 (pieces), each a message with its own field 1
        body = b"\x0a" + bytes([len(text)]) + text + b"\x15\x00\x00\x00\x00"  # piece, score (float)
        return b"\x0a" + bytes([len(body)]) + body
    model = piece(b"<unk>") + piece(b"a") + piece(b"b") + b"\x12\x02\x08\x01"  # + trainer_spec (field 2)
    (tmp_path / "tokenizer.model").write_bytes(model)
    assert convert.vocab_size(tmp_path) == 3
    (tmp_path / "tokenizer.model").write_bytes(model[:-1])
    with pytest.raises(SetupError, match="not a SentencePiece model"):
        convert.vocab_size(tmp_path)


def test_a_tekken_folder_gets_params_and_the_mistral_format(tmp_path, fake_converter, capsys):
    source = tmp_path / "tekken"
    source.mkdir()
    (source / "tekken.json").write_text(json.dumps({"config": {"default_vocab_size": 131072}, "vocab": []}))
    fake_converter["answer"] = {"decisions": [], "error": None}
    cli.main(["convert", str(source), "--out", str(tmp_path / "t.gguf")])
    assert "supplied params.json" in capsys.readouterr().out
    _, args, files = fake_converter["runs"][0]
    assert "--mistral-format" in args
    assert json.loads(files["params.json"])["vocab_size"] == 131072
    assert "config.json" not in files and "tokenizer_config.json" not in files


def test_a_folder_with_its_own_config_gets_nothing(tmp_path):
    source = bpe_folder(tmp_path / "src")
    (source / "config.json").write_text("{}")
    (source / "tokenizer_config.json").write_text("{}")
    work = tmp_path / "work"
    work.mkdir()
    assert convert.work_folder(source, work) == []
    assert sorted(p.name for p in work.iterdir()) == ["config.json", "tokenizer.json", "tokenizer_config.json"]


def test_the_converters_refusal_is_a_result_printed_and_recorded(tmp_path, fake_converter, capsys):
    source = bpe_folder(tmp_path / "unknown")
    fake_converter["answer"] = {
        "decisions": [{"chkhsh": "ab" * 32, "pre": None, "raised": "NotImplementedError: ..."}],
        "error": {"type": "NotImplementedError",
                  "message": "BPE pre-tokenizer was not recognized - update get_vocab_base_pre()"}}
    out = tmp_path / "unknown.gguf"
    out.write_text("a stale file from an earlier run")
    code = cli.main(["convert", str(source), "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 1 and printed.err == ""  # not a harness error: no "error:" line
    assert "refused: NotImplementedError: BPE pre-tokenizer was not recognized" in printed.out
    assert f"chkhsh {'ab' * 32}" in printed.out
    record = json.loads((tmp_path / "unknown.convert.json").read_text())
    assert record["refusal"]["message"].startswith("BPE pre-tokenizer was not recognized")
    assert record["gguf"] is None and not out.exists()
    assert record["converter"]["llama_cpp_python"] == PIN


@pytest.mark.parametrize("argv, message", [
    (["convert"], "needs HF_DIR and --out"),
    (["convert", "{tmp}", "--out", "x.gguf"], "holds neither tokenizer.json nor tokenizer.model"),
    (["convert", "{tmp}/none", "--out", "x.gguf"], "not a folder"),
    (["convert", "--real", "{tmp}"], "takes no HF_DIR"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, fake_converter, capsys, argv, message):
    code = cli.main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_convert_real_names_the_fetch_command_when_nothing_is_fetched(tmp_path, monkeypatch, fake_converter,
                                                                      capsys):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path))
    assert cli.main(["convert", "--real"]) == 2
    assert real_set.FETCH_REAL_COMMAND in capsys.readouterr().err


@pytest.mark.parametrize("actual, expected, consistent", [
    ("smaug-bpe", "smaug-bpe", True),
    ("llama-bpe", "smaug-bpe", False),
    ("llama-bpe", None, False),  # the converter would refuse the original
])
def test_pre_check_compares_the_key_with_the_converters_choice(actual, expected, consistent):
    original = {"spec": "hf:x", "kind": "hf", "chkhsh": SMAUG, "expected_pre": expected}
    verdict = pre_check.check_pre({"file": "f.gguf", "tokenizer": {"pre": actual}}, original)
    assert verdict["consistent"] is consistent
    assert ("INCONSISTENT" in pre_check.describe(verdict)) is not consistent


@pytest.mark.parametrize("actual, consistent", [(None, True), ("default", True), ("llama-bpe", False)])
def test_a_sentencepiece_reference_wants_no_pre(actual, consistent):
    original = {"spec": "spm:x", "kind": "spm", "chkhsh": None, "expected_pre": None}
    assert pre_check.check_pre({"file": "f", "tokenizer": {"pre": actual}}, original)["consistent"] is consistent


def test_inspect_reference_exit_status_follows_the_verdict(tmp_path, fake_converter, capsys):
    from harness.models.gguf_writer import write

    gguf = tmp_path / "v.gguf"
    write(gguf, {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe",
                 "tokenizer.ggml.tokens": ["a", "b"]})
    source = bpe_folder(tmp_path / "orig")
    fake_converter["answer"] = {"decisions": [{"chkhsh": SMAUG, "pre": "smaug-bpe", "raised": None}], "error": None}
    assert cli.main(["inspect", str(gguf), "--reference", f"hf:{source}"]) == 1
    out = capsys.readouterr().out
    # the fake converter writes no GGUF: a refusal (tests/models/test_converter_paths.py has the converted lines)
    assert "INCONSISTENT: the converter refuses this folder" in out and SMAUG in out
    assert fake_converter["runs"][0][0] == "convert"  # the converter's own decision, run in a private folder
    assert cli.main(["inspect", str(gguf), "--reference", "sp:x"]) == 2
    assert "expected hf:PATH, spm:PATH or tekken:PATH" in capsys.readouterr().err
    (source / "tekken.json").write_text(json.dumps({"config": {"default_vocab_size": 2}, "vocab": []}))
    assert cli.main(["inspect", str(gguf), "--reference", f"tekken:{source}"]) == 1  # wants pre = tekken
    assert "INCONSISTENT: the converter's --mistral-format path writes 'tekken'" in capsys.readouterr().out


def test_a_fingerprint_the_converter_could_not_compute_is_a_setup_error(tmp_path, fake_converter):
    fake_converter["answer"] = {"decisions": [], "error": {"type": "OSError", "message": "no tokenizer"}}
    with pytest.raises(SetupError, match="computed no fingerprint: OSError: no tokenizer"):
        convert.fingerprint(bpe_folder(tmp_path / "o"))


@pytest.mark.nightly
def test_the_real_converter_names_the_early_llama3_tokenizer_smaug_bpe(tmp_path):
    """The pinned converter's fingerprint of the early Llama-3 tokenizer.json: the record `convert --real`
    left (the nightly converts the real set in another step), or a conversion of its own (78 s)."""
    entry = real_set.find("llama3-early")
    if not real_set.is_fetched(entry):
        pytest.skip(f"the real set is not fetched: run {real_set.FETCH_REAL_COMMAND}")
    done = convert.sidecar_path(real_set.real_gguf_dir() / "llama3-early.gguf")
    record = json.loads(done.read_text(encoding="utf-8")) if done.is_file() else \
        convert.convert(entry.folder(), tmp_path / "llama3.gguf", architecture=entry.architecture)
    assert record["refusal"] is None, record["refusal"]
    assert record["converter"]["llama_cpp_python"] == convert.LLAMA_CPP_PYTHON_VERSION
    assert record["chkhsh"] == SMAUG and record["pre_chosen"] == "smaug-bpe"
    assert record["written"]["pre"] == "smaug-bpe" and record["written"]["model"] == "gpt2"


def test_the_converter_sources_are_pinned_and_a_changed_file_is_refused(tmp_path, monkeypatch):
    pinned = convert.MANIFEST.read_text().splitlines()
    names = {line.split(maxsplit=1)[1] for line in pinned}
    assert {"convert_hf_to_gguf.py", "conversion/base.py", "gguf-py/gguf/vocab.py"} <= names
    assert not any("/tests/" in name for name in names)
    # an sdist whose converter differs from the pinned one: extraction is refused, nothing marked complete
    import tarfile

    sdist = tmp_path / "llama_cpp_python-X.Y.Z.tar.gz"
    script = tmp_path / "convert_hf_to_gguf.py"
    script.write_text("# not the pinned converter\n")
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(script, arcname="llama_cpp_python-X.Y.Z/vendor/llama.cpp/convert_hf_to_gguf.py")
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    with pytest.raises(SetupError, match=r"converter file\(s\) failed converter_sources\.sha256"):
        convert.ensure_sources(sdist=sdist, log=lambda s: None)
    assert not (convert.sources_dir() / ".complete").exists()


def _out_plant(tmp_path: Path, plant: str) -> Path:
    out = tmp_path / "x.gguf"
    if plant == "fifo":
        os.mkfifo(out)
    elif plant == "link-to-dev-null":
        out.symlink_to("/dev/null")
    elif plant == "char-device":
        try:
            os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a character device needs root")
    elif plant == "folder":
        out.mkdir()
    return out


@pytest.mark.parametrize("plant", ["char-device", "fifo", "link-to-dev-null", "folder"])
def test_an_out_that_is_no_file_is_refused_before_the_converter_runs(tmp_path, fake_converter, capsys, plant):
    """issue 47: `convert --out` onto a copy of /dev/null exited 0 and left a regular file in the device's place."""
    source = bpe_folder(tmp_path / "llama3")
    out = _out_plant(tmp_path, plant)
    mode = out.lstat().st_mode
    code = cli.main(["convert", str(source), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: --out {out}: is ") and err.count("\n") == 1
    assert fake_converter["runs"] == [] and out.lstat().st_mode == mode
    assert not convert.sidecar_path(out).exists()


def test_the_converter_writes_in_a_private_folder_and_its_file_is_renamed_into_place(tmp_path, monkeypatch,
                                                                                      fake_converter):
    """No write follows a link planted beside the output: the converter's --outfile is in a fresh folder."""
    source, victim = bpe_folder(tmp_path / "llama3"), tmp_path / "victim"
    victim.write_bytes(b"precious")
    out = tmp_path / "x.gguf"
    for name in (".x.gguf.tmp", "x.gguf.part"):
        (tmp_path / name).symlink_to(victim)
    fake_converter["answer"] = {"decisions": [{"chkhsh": SMAUG, "pre": "smaug-bpe", "raised": None}], "error": None}
    given = []

    def writes(mode, args, *, timeout=900, folder_code=None):
        outfile = Path(args[args.index("--outfile") + 1])
        given.append(outfile)
        outfile.write_bytes(b"GGUF")
        return {**fake_converter["answer"], "output_tail": []}

    monkeypatch.setattr(convert, "run_driver", writes)
    monkeypatch.setattr(convert, "gguf_facts", lambda path: {"bytes": path.stat().st_size})
    record = convert.convert(source, out, log=lambda line: None)
    assert given[0].parent != out.parent and given[0].parent.parent == out.parent
    assert out.read_bytes() == b"GGUF" and record["gguf"] == str(out) and victim.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".x.gguf.tmp", "converter", "llama3", "victim",
                                                          "x.convert.json", "x.gguf", "x.gguf.part"]
