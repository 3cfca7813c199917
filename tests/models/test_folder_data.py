"""Tokenizer files the harness reads itself: a malformed one is one line naming the file and the field (exit 2).

`convert` reads tokenizer.json for the architecture and the vocabulary size it supplies,
and `inspect --reference spm:`/`tekken:` opens the reference file it judges: a file that is
not what it claims is refused, never a traceback and never "consistent".
"""

from __future__ import annotations

import json

import pytest

from harness import cli
from harness.models import convert

MALFORMED = [
    pytest.param([1, 2, 3], "expected a JSON object, found a list", id="a-list"),
    pytest.param({"model": "BPE"}, "field 'model' is 'BPE', expected an object", id="model-a-string"),
    pytest.param({"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [7]},
                 "field 'added_tokens[0]' is 7", id="added-token-a-number"),
    pytest.param({"model": {"type": "BPE", "vocab": {"a": "0"}}}, "field 'model.vocab['a']' is '0'",
                 id="string-id-in-vocab"),
    pytest.param({"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"id": "1", "content": "x"}]},
                 "field 'added_tokens[0]'", id="string-id-in-added-tokens"),
]


@pytest.fixture
def no_converter(monkeypatch):
    """The converter must not be reached: the folder is refused before it."""
    def unreachable(*args, **kwargs):
        raise AssertionError("the converter ran on a malformed folder")
    monkeypatch.setattr(convert, "ensure_venv", unreachable)
    monkeypatch.setattr(convert, "run_driver", unreachable)


@pytest.mark.parametrize("content, message", MALFORMED)
def test_convert_names_the_file_and_the_field_of_a_malformed_tokenizer_json(tmp_path, no_converter, capsys,
                                                                             content, message):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(json.dumps(content))
    code = cli.main(["convert", str(folder), "--out", str(tmp_path / "x.gguf")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert str(folder / "tokenizer.json") in err and message in err


def test_convert_refuses_a_tekken_file_without_its_vocabulary_size(tmp_path, no_converter, capsys):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "tekken.json").write_text(json.dumps({"config": {"default_vocab_size": "many"}, "vocab": []}))
    assert cli.main(["convert", str(folder), "--out", str(tmp_path / "x.gguf")]) == 2
    assert "field 'config.default_vocab_size' is 'many'" in capsys.readouterr().err


@pytest.fixture
def spm_gguf(tmp_path):
    from harness.models.gguf_writer import write

    path = tmp_path / "v.gguf"
    write(path, {"general.architecture": "llama", "tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default",
                 "tokenizer.ggml.tokens": ["<unk>", "a"]})
    return path


def sentencepiece_model() -> bytes:
    def piece(text: bytes) -> bytes:  # ModelProto field 1, each a message with its piece (1) and score (2)
        body = b"\x0a" + bytes([len(text)]) + text + b"\x15\x00\x00\x00\x00"
        return b"\x0a" + bytes([len(body)]) + body
    return piece(b"<unk>") + piece(b"a")


GARBAGE = [
    pytest.param("spm", "tokenizer.model", b"\xff" * 64, "not a SentencePiece model", id="spm-ff-bytes"),
    pytest.param("spm", "tokenizer.model", b"this is no model at all\n", "not a SentencePiece model", id="spm-text"),
    pytest.param("spm", "tokenizer.model", b"", "no pieces", id="spm-empty"),
    pytest.param("tekken", "tekken.json", b"garbage", "not JSON", id="tekken-garbage"),
    pytest.param("tekken", "tekken.json", b'{"config": {}}', "config.default_vocab_size", id="tekken-no-config"),
]


@pytest.mark.parametrize("kind, name, data, message", GARBAGE)
@pytest.mark.parametrize("as_folder", [False, True], ids=["file", "folder"])
def test_inspect_opens_an_spm_or_tekken_reference_and_refuses_garbage(tmp_path, spm_gguf, capsys, kind, name, data,
                                                                      message, as_folder):
    folder = tmp_path / "ref"
    folder.mkdir()
    (folder / name).write_bytes(data)
    target = folder if as_folder else folder / name
    code = cli.main(["inspect", str(spm_gguf), "--reference", f"{kind}:{target}"])
    printed = capsys.readouterr()
    assert code == 2, printed.out
    assert "consistent" not in printed.out.lower()
    assert message in printed.err and printed.err.count("\n") == 1
    if kind == "spm":  # a real SentencePiece model in the same place is judged
        (folder / name).write_bytes(sentencepiece_model())
        assert cli.main(["inspect", str(spm_gguf), "--reference", f"{kind}:{target}"]) == 0
        assert "consistent" in capsys.readouterr().out
