"""`--reference hf:`, `spm:`, `tekken:` read the original inside its folder, and hand the child a private copy.

The hostile round's folders, for each kind: the reference's own file, or the
tokenizer_config.json read beside it, a link to a secret outside the folder (relative,
absolute, through a chain), a FIFO, a dangling link. Each is refused with one line naming
the file before anything reads it. What is read, by the harness and by the reference
child alike, is a private copy of the vetted files (`ReferenceSpec.path`), never the user's
folder: a library that follows links on its own (tokenizers, sentencepiece, mistral-common)
finds nothing there but those copies.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import cli
from harness.errors import SetupError
from harness.references import specs
from tests import reference_files as rf

SECRET = "planted secret: hf_0123456789abcdef"
HOWS = ("relative", "absolute", "chain", "fifo", "dangling")


def original(tmp: Path, kind: str) -> Path:
    """A tiny original of `kind` in `tmp/model`, with a tokenizer_config.json beside it; its file."""
    folder = tmp / "model"
    if kind == "hf":
        path = rf.bpe_json(folder / "tokenizer.json")
    elif kind == "spm":
        path = rf.spm_model(folder / "tokenizer.model")
    else:
        path = rf.tekken_json(folder / "tekken.json")
    (folder / "tokenizer_config.json").write_text('{"add_bos_token": true}')
    return path


def plant(path: Path, secret: Path, how: str) -> None:
    """`path` replaced by what `how` says."""
    path.unlink()
    if how == "relative":
        path.symlink_to(os.path.relpath(secret, path.parent))
    elif how == "absolute":
        path.symlink_to(secret)
    elif how == "chain":
        (path.parent / "hop").symlink_to(secret)
        path.symlink_to("hop")
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "dangling":
        path.symlink_to("nothing-here")


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    return path


CASES = [pytest.param(kind, which, how, id=f"{kind}-{which}-{how}")
         for kind in ("hf", "spm", "tekken") for which in ("file", "config") for how in HOWS
         if not (kind == "tekken" and which == "config")]  # a tekken reference reads no config


@pytest.mark.parametrize("as_folder", [True, False], ids=["DIR", "FILE"])
@pytest.mark.parametrize("kind, which, how", CASES)
def test_a_reference_file_that_leaves_its_folder_or_is_not_regular_is_refused_naming_it(
        tmp_path, secret, kind, which, how, as_folder):
    pytest.importorskip("tokenizers" if kind == "hf" else "sentencepiece" if kind == "spm" else "json")
    path = original(tmp_path, kind)
    target = path if which == "file" else path.with_name("tokenizer_config.json")
    plant(target, secret, how)
    spec = f"{kind}:{path.parent if as_folder else path}"
    with pytest.raises(SetupError) as refused:
        specs.parse(spec)
    message = str(refused.value)
    assert f"{target}: " in message and "\n" not in message and SECRET not in message
    assert ("outside the folder" if how in ("relative", "absolute", "chain") else
            "a FIFO" if how == "fifo" else "leads nowhere") in message


@pytest.mark.parametrize("kind", ["hf", "spm", "tekken"])
def test_the_harness_and_the_child_read_a_private_copy_not_the_folder(tmp_path, secret, kind, monkeypatch):
    pytest.importorskip("tokenizers" if kind == "hf" else "sentencepiece" if kind == "spm" else "json")
    started: list[dict] = []
    monkeypatch.setattr(specs, "ReferenceClient", lambda argv, gguf, *, args, **kw: started.append(args))
    monkeypatch.setattr(specs, "missing", lambda kind: None)
    path = original(tmp_path, kind)
    data = path.read_bytes()
    ref = specs.parse(f"{kind}:{path.parent}")
    assert ref.source == path and ref.spec == f"{kind}:{path}"  # messages name the user's file
    assert not ref.path.is_relative_to(path.parent) and not ref.path.is_symlink()
    assert ref.path.read_bytes() == data and ref.path.name == path.name
    beside = sorted(p.name for p in ref.path.parent.iterdir())
    assert beside == sorted({path.name} | ({"tokenizer_config.json"} if kind != "tekken" else set()))
    specs.reference_factory(f"{kind}:{path}", args={}, timeout=10)(tmp_path / "x.gguf")
    assert [Path(a["reference"]) for a in started] == [ref.path]  # the child is given the copy, not the folder
    plant(path, secret, "absolute")  # the folder changed after the copy: the copy is what is read
    assert ref.path.read_bytes() == data


def test_an_hf_reference_in_the_hugging_face_cache_is_read(tmp_path):
    """snapshots/REV/tokenizer.json -> ../../blobs/HASH is the cache's own layout: inside."""
    pytest.importorskip("tokenizers")
    made = rf.bpe_json(tmp_path / "made" / "tokenizer.json")
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    made.rename(repo / "blobs" / "9f8e")
    snapshot = repo / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "tokenizer.json").symlink_to(Path("..") / ".." / "blobs" / "9f8e")
    ref = specs.parse(f"hf:{snapshot}")
    assert ref.path.read_bytes() == (repo / "blobs" / "9f8e").read_bytes()


@pytest.fixture
def spm_gguf(tmp_path):
    from harness.models.gguf_writer import write

    path = tmp_path / "v.gguf"
    write(path, {"general.architecture": "llama", "tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default",
                 "tokenizer.ggml.tokens": ["<unk>", "a"]})
    return path


@pytest.mark.parametrize("kind, name", [("spm", "tokenizer.model"), ("tekken", "tekken.json"),
                                        ("hf", "tokenizer.json"), ("hf", "tokenizer_config.json")])
def test_inspect_with_a_planted_reference_is_one_line_and_exit_2(tmp_path, secret, spm_gguf, capsys, kind, name):
    folder = tmp_path / "ref"
    folder.mkdir()
    if name == "tokenizer_config.json":
        (folder / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": {}}}')
    (folder / name).symlink_to(secret)
    code = cli.main(["inspect", str(spm_gguf), "--reference", f"{kind}:{folder}"])
    printed = capsys.readouterr()
    assert code == 2 and printed.err.count("\n") == 1, printed
    assert f"{folder / name}: a link to {secret}, outside the folder" in printed.err
    assert SECRET not in printed.out + printed.err
