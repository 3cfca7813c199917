"""The oracle: llama.cpp through llama-cpp-python's C API, in-process and crash-isolated.

Every expected id here comes from llama.cpp: the `.out` vectors it ships, or
llama.cpp itself (one call checked against another).  The crash-isolation
tests build a GGUF on which llama.cpp aborts (a BPE vocabulary with
`tokenizer.ggml.pre = "whitespace"` asserts in its merge code on a double
space) and check that the run completes and reports the crash.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import ClassVar

import pytest

from harness.cli import main
from harness.inputs import corpus
from harness.models.shipped import SHIPPED

pytestmark = pytest.mark.oracle

INP_MODELS = [n for n in SHIPPED if n not in ("aquila", "baichuan", "gpt-neox", "nomic-bert-moe")]
# Cases in the shipped .inp files, split as llama.cpp's test-tokenizer-0 splits them.
# (A naive str.split also counts 14 empty strings after trailing separators: 708.)
INP_VECTORS = 694


@pytest.fixture(scope="module")
def oracle_for():
    from harness.oracle.llama import LlamaOracle

    opened = {}

    def get(path):
        if path not in opened:
            opened[path] = LlamaOracle(path)
        return opened[path]

    yield get
    for oracle in opened.values():
        oracle.close()


def _inp_results(oracle, path: Path) -> tuple[int, list[str]]:
    pairs = corpus.inp_expected(Path(f"{path}.inp"))
    failures = [case["id"] for case, expected in pairs
                if oracle.tokenize(corpus.case_input(case), add_special=False, parse_special=False) != expected]
    return len(pairs), failures


@pytest.mark.vocab
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in INP_MODELS])
def test_oracle_reproduces_inp_out_vectors(require_vocab, oracle_for, name):
    path = require_vocab(name)
    count, failures = _inp_results(oracle_for(path), path)
    assert failures == [], f"{len(failures)} of {count} vectors differ"


@pytest.mark.vocab
def test_all_inp_vectors_are_counted(require_vocab, oracle_for):
    total = 0
    for name in INP_MODELS:
        count, failures = _inp_results(oracle_for(require_vocab(name)), require_vocab(name))
        total += count - len(failures)
    assert total == INP_VECTORS


@pytest.mark.vocab
def test_specials_and_flags_as_llama_cpp_reports(require_vocab, oracle_for):
    oracle = oracle_for(require_vocab("llama-spm"))
    assert (oracle.vocab_type, oracle.n_tokens, oracle.pre) == ("spm", 32000, "default")
    assert (oracle.bos, oracle.eos, oracle.eot, oracle.eom, oracle.sep) == (1, 2, None, None, None)
    assert oracle.unk == 0  # no C getter: read through llama_vocab::token_unk
    assert (oracle.add_bos, oracle.add_eos, oracle.add_sep) == (True, False, False)
    assert oracle.is_control(1) and oracle.is_eog(2) and not oracle.is_eog(100)
    assert oracle.token_text(1) == b"<s>"
    assert oracle.meta("tokenizer.ggml.model") == "llama"
    assert oracle.meta("no.such.key") is None


@pytest.mark.vocab
def test_special_flags_change_the_result(require_vocab, oracle_for):
    oracle = oracle_for(require_vocab("llama-spm"))
    plain = oracle.tokenize(b"Hello</s>", add_special=False, parse_special=False)
    parsed = oracle.tokenize(b"Hello</s>", add_special=False, parse_special=True)
    assert parsed[-1] == 2 and 2 not in plain
    ids = oracle.tokenize(b"Hello", add_special=True, parse_special=False)
    assert ids[0] == 1
    assert oracle.detokenize(ids, remove_special=False, unparse_special=True).startswith(b"<s>")
    # llama.cpp quirk: dropping BOS also turns off the removal of SPM's prefix space.
    assert oracle.detokenize(ids, remove_special=True, unparse_special=True) == b" Hello"
    assert oracle.detokenize(ids[1:], remove_special=True, unparse_special=True) == b"Hello"


@pytest.mark.vocab
def test_empty_and_invalid_utf8_inputs_pass_as_bytes(require_vocab, oracle_for):
    oracle = oracle_for(require_vocab("llama-spm"))
    assert oracle.tokenize(b"", add_special=False, parse_special=False) == []
    assert oracle.tokenize(b"", add_special=True, parse_special=False) == [1]
    ids = oracle.tokenize(b"\xff", add_special=False, parse_special=False)
    assert oracle.detokenize(ids, remove_special=False, unparse_special=False) == b"\xff"


@pytest.mark.vocab
def test_buffer_too_small_is_retried_with_the_size_llama_cpp_asks_for(require_vocab, oracle_for):
    oracle = oracle_for(require_vocab("qwen2"))
    long_id = max(range(oracle.n_tokens), key=lambda t: len(oracle.token_text(t)))
    piece = oracle.token_to_piece(long_id, special=True)
    assert len(piece) > 32  # larger than the first buffer token_to_piece tries
    # The same bytes through llama_detokenize, whose first buffer (64 + 8 per id) is too small too.
    ids = [long_id] * 4
    assert oracle.detokenize(ids, remove_special=False, unparse_special=True) == piece * 4
    assert oracle.token_to_piece(long_id, lstrip=1, special=True) == piece.removeprefix(b" ")


@pytest.mark.vocab
def test_a_long_document_through_buffers_too_small_gives_the_same_ids_and_bytes(require_vocab, oracle_for):
    """llama_tokenize and llama_detokenize answer a short buffer with minus the size they need;
    the oracle retries once with it. With first buffers of one id and one byte, a 96 KiB
    document takes that path on every call and gives llama.cpp's answer from full buffers."""
    from harness.inputs import documents
    from harness.oracle.llama import LlamaOracle

    path = require_vocab("llama-bpe")
    data = next(c for c in documents.documents(path) if c["id"] == "doc-mixed")["text"].encode()
    full = oracle_for(path)
    ids = full.tokenize(data, add_special=True, parse_special=True)
    text = full.detokenize(ids, remove_special=False, unparse_special=True)

    class Tight(LlamaOracle):
        asked: ClassVar[list[int]] = []

        @staticmethod
        def first_token_buffer(n_bytes: int) -> int:
            return 1

        @staticmethod
        def first_text_buffer(n_ids: int) -> int:
            return 1

        @staticmethod
        def _grow(size: int, wanted: int, what: str) -> int:
            Tight.asked.append(wanted)
            return LlamaOracle._grow(size, wanted, what)

    with Tight(path) as tight:
        assert tight.tokenize(data, add_special=True, parse_special=True) == ids
        assert tight.detokenize(ids, remove_special=False, unparse_special=True) == text
    assert Tight.asked == [len(ids), len(text)] and len(ids) > 20_000


def test_inputs_and_buffers_over_int32_are_refused_not_wrapped(monkeypatch):
    """llama.cpp's lengths and buffer sizes are int32: a 2 GiB input is refused with a message,
    and a size llama.cpp asks for past int32 is never passed on (it would wrap negative)."""
    from harness.oracle import llama

    class Huge(bytes):
        def __len__(self) -> int:
            return 2**31

    oracle = object.__new__(llama.LlamaOracle)
    monkeypatch.setattr(llama, "as_bytes", lambda text: Huge(b"x"))
    with pytest.raises(llama.OracleError, match=r"2,147,483,648 bytes exceeds llama\.cpp's int32 length"):
        oracle.tokenize(b"x", add_special=False, parse_special=False)
    with pytest.raises(llama.OracleError, match=r"over llama\.cpp's int32 size"):
        llama.LlamaOracle._grow(1 << 20, 2**31, "llama_detokenize")
    assert llama.LlamaOracle.first_token_buffer(2**31 - 1) == 2**31 - 1
    assert llama.LlamaOracle.first_text_buffer(2**28) == 2**31 - 1


def test_unloadable_file_raises_oracle_error(tmp_path: Path):
    from harness.oracle.llama import LlamaOracle, OracleError

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 12)
    with pytest.raises(OracleError, match=r"bad\.gguf"):
        LlamaOracle(bad)


@pytest.mark.vocab
def test_log_is_silent_unless_verbose(require_vocab, capfd):
    from harness.oracle.llama import LlamaOracle

    with LlamaOracle(require_vocab("gpt-2")):
        pass
    assert capfd.readouterr().err == ""


# -- crash isolation ------------------------------------------------------------------

def with_string(src: Path, dst: Path, key: str, value: str) -> Path:
    """Copy a tensor-less GGUF, replacing one string metadata value (sizes shift; no tensors to realign)."""
    raw = src.read_bytes()
    name = key.encode()
    at = raw.find(struct.pack("<Q", len(name)) + name)
    assert at > 0, key  # our own fixture: the key must be there
    value_at = at + 8 + len(name)
    vtype, length = struct.unpack_from("<IQ", raw, value_at)
    assert vtype == 8  # GGUF string
    new = value.encode()
    end = value_at + 12 + length
    dst.write_bytes(raw[:value_at + 4] + struct.pack("<Q", len(new)) + new + raw[end:])
    return dst


@pytest.fixture()
def aborting_vocab(require_vocab, tmp_path: Path) -> Path:
    return with_string(require_vocab("gpt-2"), tmp_path / "gpt2-pre-whitespace.gguf",
                       "tokenizer.ggml.pre", "whitespace")


CRASH_CASES = [
    {"id": "ok-1", "text": "Hello"},
    {"id": "double-space", "text": "Hello  world"},
    {"id": "ok-2", "text": "a b"},
]


@pytest.mark.vocab
def test_abort_becomes_a_crash_record_and_the_run_goes_on(aborting_vocab):
    from harness.oracle.workers import run_cases

    results = run_cases(aborting_vocab, CRASH_CASES, jobs=2, timeout=60)
    assert [r["id"] for r in results] == ["ok-1", "double-space", "ok-2"]
    assert "encode" in results[0] and "encode" in results[2]
    crash = results[1]["crash"]
    assert (crash["kind"], crash["signal"], crash["exit"]) == ("signal", "SIGABRT", -6)
    assert "GGML_ASSERT" in crash["stderr"] and "llama-vocab.cpp" in crash["stderr"]
    assert crash["call"] == "tokenize(add_special=False, parse_special=False)"
    assert results[1]["text"] == "Hello  world"


@pytest.mark.vocab
def test_hang_past_the_timeout_becomes_a_timeout_record(require_vocab):
    from harness.oracle.workers import run_cases

    # 900 KB of text keep llama.cpp busy for seconds (4.2 MB took it 55 s), far past 50 ms on any machine,
    # in the first worker and in the fresh one that repeats the request (a timeout of 0 raced a short
    # case's reply on an idle machine, where the reply came within the poll that ends the wait).
    slow = {"id": "slow", "text": "Hello world, again and again. " * 30_000}
    results = run_cases(require_vocab("gpt-2"), [slow], timeout=0.05)
    assert results[0]["crash"]["kind"] == "timeout"
    assert results[0]["crash"]["signal"] == "SIGKILL"


@pytest.mark.vocab
def test_record_command_reports_the_crash_and_exits_1(aborting_vocab, tmp_path: Path, capsys):
    cases = tmp_path / "few.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in CRASH_CASES), encoding="utf-8")
    out = tmp_path / "golden"
    code = main(["record", "--model", str(aborting_vocab), "--corpus", str(cases), "--out", str(out)])
    assert code == 1
    output = capsys.readouterr().out
    assert "1 oracle crash" in output
    assert ("oracle crash: gpt2-pre-whitespace.gguf case few-double-space ('Hello  world'): "
            "signal SIGABRT in tokenize(add_special=False, parse_special=False): ") in output
    from harness.golden.files import load_golden

    golden = load_golden(out / "gpt2-pre-whitespace.json")
    crashed = [c["id"] for c in golden["cases"] if "crash" in c]
    assert crashed == ["few-double-space"]


def test_a_file_llama_cpp_refuses_is_a_load_failure(tmp_path: Path):
    from harness.oracle.workers import LoadFailure, run_cases

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 12)
    with pytest.raises(LoadFailure, match=r"bad\.gguf"):
        run_cases(bad, CRASH_CASES[:1])
