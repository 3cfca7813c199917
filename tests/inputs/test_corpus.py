"""Corpora: file formats, llama.cpp's .inp splitting, and what the edge-case corpus covers.

No llama.cpp needed.  The .inp/.out checks need the shipped vocabularies and
skip with the fetch command when they are missing.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from harness.inputs import corpus
from harness.inputs.corpus import CorpusError, case_input, load_corpus, make_case, split_inp
from harness.models.shipped import SHIPPED, models_dir

INP_MODELS = [n for n in SHIPPED if n not in ("aquila", "baichuan", "gpt-neox", "nomic-bert-moe")]
EDGE = corpus.CORPORA_DIR / "edge.jsonl"


def test_make_case_keeps_text_or_hex_bytes():
    assert make_case("a", "héllo") == {"id": "a", "text": "héllo"}
    assert make_case("b", b"\xc3(") == {"id": "b", "bytes": "c328"}
    assert case_input({"id": "b", "bytes": "c328"}) == b"\xc3("
    assert case_input({"id": "a", "text": "é"}) == b"\xc3\xa9"


@pytest.mark.parametrize("raw, parts", [
    pytest.param(b"a\n__ggml_vocab_test__\nb\n__ggml_vocab_test__\n", [b"a", b"b"], id="trailing-separator"),
    pytest.param(b"a\n__ggml_vocab_test__\nb", [b"a", b"b"], id="no-trailing-separator"),
    pytest.param(b"\n__ggml_vocab_test__\n\n__ggml_vocab_test__\n", [b"", b""], id="empty-inputs"),
    pytest.param(b"", [], id="empty-file"),
])
def test_split_inp_matches_test_tokenizer_0(raw, parts):
    assert split_inp(raw) == parts


@pytest.mark.parametrize("line, message", [
    pytest.param("not json", "not JSON", id="not-json"),
    pytest.param('{"text": "x"}', "string \"id\"", id="no-id"),
    pytest.param('{"id": "a"}', "exactly one", id="no-input"),
    pytest.param('{"id": "a", "text": "x", "bytes": "00"}', "exactly one", id="both-inputs"),
    pytest.param('{"id": "a", "bytes": "zz"}', "not hex", id="bad-hex"),
    pytest.param('{"id": "a", "text": "\\ud800"}', "lone surrogate", id="lone-surrogate"),
])
def test_bad_jsonl_lines_name_file_and_line(tmp_path: Path, line, message):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "ok", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=rf"c\.jsonl:2: .*{message}"):
        load_corpus(path)


def test_duplicate_ids_are_refused(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match="duplicate id 'a'"):
        load_corpus(path)


def test_edge_corpus_is_what_build_edge_writes(tmp_path: Path, monkeypatch):
    module = runpy.run_path(str(Path(__file__).resolve().parents[2] / "corpora" / "build_edge.py"))
    lines = [json.dumps(item, ensure_ascii=True, sort_keys=True) for item in module["items"]()]
    assert EDGE.read_text(encoding="ascii") == "\n".join(lines) + "\n"


@pytest.mark.parametrize("group", [
    "ws", "contraction", "digits", "combining", "cjk", "rtl", "emoji", "astral", "bytefallback",
    "empty", "long", "invalid",
])
def test_edge_corpus_covers_every_trap_group(group):
    ids = [c["id"] for c in load_corpus(EDGE)]
    assert any(i.startswith(group + "-") for i in ids)


@pytest.mark.parametrize("needle", [
    pytest.param("\t", id="tab"), pytest.param("\r\n", id="crlf"), pytest.param("\u00a0", id="nbsp"),
    pytest.param("\u3000", id="ideographic-space"), pytest.param("\u2028", id="line-separator"),
    pytest.param("\u200b", id="zero-width"), pytest.param(" " * 32, id="long-space-run"),
    pytest.param("\u200d", id="zwj"), pytest.param("\U0001f3fd", id="skin-tone"),
    pytest.param("\U0001f1fa", id="flag"), pytest.param("\ue000", id="private-use"),
    pytest.param("e\u0301", id="nfd"), pytest.param("\u0661", id="arabic-indic-digit"),
])
def test_edge_corpus_contains(needle):
    assert any(needle in c.get("text", "") for c in load_corpus(EDGE))


def test_edge_corpus_has_empty_long_and_invalid_utf8():
    cases = load_corpus(EDGE)
    assert any(c.get("text") == "" for c in cases)
    assert max(len(case_input(c)) for c in cases) >= 500
    invalid = [c for c in cases if "bytes" in c]
    assert len(invalid) >= 5
    for case in invalid:
        with pytest.raises(UnicodeDecodeError):
            case_input(case).decode("utf-8")


def test_prose_corpus_is_multilingual():
    cases = load_corpus(corpus.CORPORA_DIR / "prose.jsonl")
    assert len(cases) >= 30
    scripts = {"ru": "а", "zh": "我", "ar": "ا", "hi": "क", "ja": "の", "ko": "어"}
    for lang, char in scripts.items():
        assert any(char in c["text"] for c in cases if c["id"].startswith(lang)), lang


@pytest.mark.vocab
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in INP_MODELS])
def test_inp_pairs_with_out(require_vocab, name):
    path = require_vocab(name)
    pairs = corpus.inp_expected(Path(f"{path}.inp"))
    assert len(pairs) == len(Path(f"{path}.out").read_text().splitlines())
    assert len(pairs) in (46, 50)


@pytest.mark.vocab
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in SHIPPED])
def test_default_corpora_stay_moderate(require_vocab, name):
    cases = corpus.default_corpora(require_vocab(name))
    assert 150 <= len(cases) <= 400
    assert len({c["id"] for c in cases}) == len(cases)


@pytest.mark.vocab
def test_vocab_cases_use_the_vocabularys_own_special_tokens(require_vocab):
    cases = corpus.vocab_cases(require_vocab("command-r"))
    texts = [c["text"] for c in cases]
    assert "<|START_OF_TURN_TOKEN|>" in texts  # user-defined, bare
    assert "Hello<PAD>world" in texts          # control, glued to words
    assert " <PAD> " in texts                  # control, between spaces


def test_inp_files_are_read_from_the_cache_in_place():
    assert corpus.inp_path(models_dir() / "ggml-vocab-nope.gguf") is None


SIDE_PROBE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))
from harness.inputs import corpus
try:
    corpus.inp_expected(sys.argv[1]) if sys.argv[1].endswith(".inp") else corpus.load_corpus(sys.argv[1])
except corpus.CorpusError as exc:
    print("CorpusError", exc)
"""


@pytest.mark.parametrize("kind", ["out-is-dev-zero", "jsonl-is-a-fifo", "inp-is-a-fifo"])
def test_a_corpus_file_that_is_no_file_is_one_line_in_bounded_time_and_memory(tmp_path, kind):
    """issue 47: a side file that is a device or a FIFO is refused, never read until memory runs out or a hang."""
    import os
    import subprocess
    import sys
    inp = tmp_path / "m.gguf.inp"
    if kind == "out-is-dev-zero":
        inp.write_bytes(b"a\n__ggml_vocab_test__\n")
        (tmp_path / "m.gguf.out").symlink_to("/dev/zero")
        path, said = inp, f"{tmp_path / 'm.gguf.out'}: .out ids is a character device"
    else:
        path = inp if kind == "inp-is-a-fifo" else tmp_path / "c.jsonl"
        os.mkfifo(path)
        said = f"{path}: {'.inp corpus' if kind == 'inp-is-a-fifo' else 'JSON Lines file'} is a FIFO"
    done = subprocess.run([sys.executable, "-c", SIDE_PROBE, str(path)], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2], check=False)
    assert done.stdout.startswith(f"CorpusError {said}, not a regular file"), done
