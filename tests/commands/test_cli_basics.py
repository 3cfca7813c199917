"""The set-up commands: fetch's member filter and manifest, name resolution, inspect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import SetupError
from harness.models import fetch
from harness.models.paths import resolve
from harness.models.shipped import SHIPPED, short_name


@pytest.mark.parametrize("member, dest", [
    pytest.param("llama_cpp_python-X.Y.Z/vendor/llama.cpp/models/ggml-vocab-gpt-2.gguf",
                 "models/ggml-vocab-gpt-2.gguf", id="gguf"),
    pytest.param("llama_cpp_python-X.Y.Z/vendor/llama.cpp/models/ggml-vocab-gpt-2.gguf.inp",
                 "models/ggml-vocab-gpt-2.gguf.inp", id="inp"),
    pytest.param("llama_cpp_python-X.Y.Z/vendor/llama.cpp/models/templates/x.jinja",
                 "templates/x.jinja", id="template"),
    pytest.param("llama_cpp_python-X.Y.Z/vendor/llama.cpp/models/templates/README.md", None, id="readme"),
    pytest.param("llama_cpp_python-X.Y.Z/vendor/llama.cpp/models/ggml-vocab-x.gguf.bak", None, id="other"),
    pytest.param("llama_cpp_python-X.Y.Z/vendor/llama.cpp/src/llama-vocab.cpp",
                 "src/llama-vocab.cpp", id="tokenizer-source"),
    pytest.param("llama_cpp_python-X.Y.Z/vendor/llama.cpp/src/llama-model.cpp", None, id="other-source"),
])
def test_fetch_keeps_only_vocabularies_and_templates(member, dest):
    assert fetch.wanted(member) == dest


def test_manifest_lists_vocabularies_vectors_templates_and_sources():
    manifest = fetch.read_manifest()
    ggufs = {n for n in manifest if n.endswith(".gguf")}
    assert ggufs == {f"models/ggml-vocab-{name}.gguf" for name in SHIPPED}
    assert sum(n.endswith(".inp") for n in manifest) == sum(n.endswith(".out") for n in manifest) == 15
    assert sum(n.endswith(".jinja") for n in manifest) == 70
    assert {n for n in manifest if n.startswith("src/")} == {f"src/{n}" for n in fetch.SOURCES}
    assert all(len(d) == 64 for d in manifest.values())


def test_verify_reports_missing_and_altered_files(tmp_path: Path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.gguf").write_bytes(b"x")
    problems = fetch.verify(tmp_path, {"models/a.gguf": "0" * 64, "models/b.gguf": "0" * 64})
    assert problems == ["sha256 mismatch: models/a.gguf", "missing: models/b.gguf"]


def test_resolve_unknown_name_lists_known_names():
    with pytest.raises(SetupError, match="llama-spm"):
        resolve("no-such-vocab")


def test_resolve_missing_path_names_it(tmp_path: Path):
    with pytest.raises(SetupError, match="no such GGUF file"):
        resolve(tmp_path / "absent.gguf")


def test_resolve_missing_cache_names_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path))
    with pytest.raises(SetupError, match="python -m harness fetch"):
        resolve("llama-spm")


def test_short_name():
    assert short_name("/x/ggml-vocab-llama-spm.gguf") == "llama-spm"
    assert short_name("other.gguf") == "other"


def test_inspect_json_reports_tokenizer_metadata(require_vocab, capsys):
    require_vocab("nomic-bert-moe")
    assert main(["inspect", "nomic-bert-moe", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    tok = out["tokenizer"]
    assert (tok["model"], tok["pre"], tok["vocab_size"]) == ("t5", "default", 250048)
    assert tok["precompiled_charsmap_bytes"] == 237539
    assert tok["special_ids"]["eos"] == 2
    assert out["tensors"] == {"count": 0, "total_bytes": 0}


def test_inspect_bad_file_exits_2_with_offset(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "offset 0x" in err and "bad.gguf" in err


def test_unknown_vocab_name_exits_2(capsys):
    assert main(["inspect", "no-such-vocab"]) == 2
    assert "unknown vocabulary" in capsys.readouterr().err
