"""Synthetic vocabularies: deterministic builds, full pre-tokenizer coverage, and parity on the pre-sweep.

- Builders: the same shipped file gives byte-identical output; each recipe
  writes the keys llama.cpp reads for its model; `resolve()` finds the files
  and names the build command when one is missing.
- Coverage: `pre-<name>` exists for exactly the `tokenizer.ggml.pre` values
  the pinned llama.cpp source accepts (read from the sdist when present).
- Parity: every `pre-<name>` golden (recorded from llama.cpp with
  `python -m harness record --model pre-<name> --corpus harness/data/corpora/pre_sweep.jsonl`)
  and every `sens-<name>` one (the `sensitivity` family, on the default
  corpora: `python -m harness record --model sens-<name>`) replayed against
  our engine. Goldens are never edited by hand: they are
  re-recorded from the oracle and the diff is reviewed. A missing golden skips,
  naming that command.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from harness.errors import SetupError
from harness.golden.files import GOLDEN_DIR, load_golden
from harness.golden.identity import mismatch
from harness.golden.records import diff_vocab, evaluate_case, vocab_record
from harness.models import gguf_writer, synth, synth_base
from harness.models.paths import resolve
from harness.models.shipped import FETCH_COMMAND
from tests.llama_sources import llama_source
from tokenizer import Tokenizer, UnsupportedVocab
from tokenizer.engines.rwkv import unescape
from tokenizer.gguf import reader as gguf
from tokenizer.gguf.constants import Keys
from tokenizer.pretokenize.names import PRE_NAMES

RECORD = "python -m harness record --corpus harness/data/corpora/pre_sweep.jsonl --model"
RECORD_DEFAULT = "python -m harness record --model"   # the default corpora (the sensitivity family)


def _needs_source(name: str) -> None:
    try:
        resolve(synth.recipe_for(name).source)
    except SetupError as exc:
        pytest.skip(f"{exc} (fetch with: {FETCH_COMMAND})")


SAMPLE = ["rwkv-world", "plamo2", "pre-qwen2", "model-hybriddna"]


@pytest.mark.parametrize("name", SAMPLE)
def test_build_is_byte_identical(name):
    _needs_source(name)
    assert synth.build(name) == synth.build(name)


@pytest.mark.nightly
@pytest.mark.parametrize("name", ["pre-gemma4", "pre-llama3", "model-gemma4"])
def test_big_source_build_is_byte_identical(name):
    _needs_source(name)
    assert synth.build(name) == synth.build(name)


@pytest.mark.nightly
@pytest.mark.parametrize("name", synth.names())
def test_every_recipe_builds_and_reads(name):
    _needs_source(name)
    data = synth.build(name)
    parsed = gguf.parse(data, name=name)
    assert parsed.metadata[Keys.NAME] == name


def test_pre_sweep_covers_every_name():
    assert set(synth.pre_sweep_names()) == {f"pre-{n}" for n in PRE_NAMES}


def test_pre_names_match_llama_cpp_source():
    source = llama_source("llama-vocab.cpp")
    accepted = set(re.findall(r'tokenizer_pre == "([^"]+)"', source))
    assert accepted == set(PRE_NAMES)


def test_pre_recipe_sets_name_and_model():
    _needs_source("pre-kimi-k2")
    meta = gguf.parse(synth.build("pre-kimi-k2")).metadata
    assert (meta[Keys.MODEL], meta[Keys.PRE]) == ("gpt2", "kimi-k2")
    assert len(meta[Keys.TOKENS]) <= synth_base.PRE_SWEEP_TOKENS + synth_base.PRE_SWEEP_CHARS + 1000


def test_cut_keeps_special_ids_on_their_tokens():
    _needs_source("pre-qwen2")
    src = gguf.read(resolve("qwen2")).metadata
    cut = gguf.parse(synth.build("pre-qwen2")).metadata
    for key in (Keys.BOS_ID, Keys.EOS_ID, Keys.PAD_ID):
        assert cut[Keys.TOKENS][cut[key]] == src[Keys.TOKENS][src[key]]
    tokens = set(cut[Keys.TOKENS])
    for merge in cut[Keys.MERGES]:
        left, right = merge.split(" ")
        assert {left, right, left + right} <= tokens, merge


def test_rwkv_texts_unescape_to_gpt2_bytes():
    _needs_source("rwkv-world")
    src = gguf.read(resolve("gpt-2")).metadata
    world = gguf.parse(synth.build("rwkv-world")).metadata
    kinds = np.asarray(src[Keys.TOKEN_TYPE])
    raw = [synth.gpt2_bytes(t) for t, k in zip(src[Keys.TOKENS], kinds) if k == 1]
    assert [unescape(gguf.as_bytes(t)) for t in world[Keys.TOKENS][1:len(raw) + 1]] == raw
    assert world[Keys.TOKENS][world[Keys.EOT_ID]] == "\\n\\n"


def test_plamo2_layout():
    _needs_source("plamo2")
    meta = gguf.parse(synth.build("plamo2")).metadata
    tokens, kinds = meta[Keys.TOKENS], np.asarray(meta[Keys.TOKEN_TYPE])
    assert [tokens[i] for i in np.nonzero(kinds == 6)[0]] == [f"<0x{b:02X}>" for b in range(256)]
    assert not any("\u2581" in t for t in tokens)
    pads = np.nonzero(kinds == 5)[0]
    assert len(pads) and np.all(np.asarray(meta[Keys.SCORES])[pads] == -1000.0)


def test_resolve_names_the_build_command(tmp_path, monkeypatch):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path))
    with pytest.raises(SetupError, match=r"python -m harness synth pre-qwen2"):
        resolve("pre-qwen2")
    with pytest.raises(SetupError, match="unknown vocabulary"):
        resolve("pre-no-such-name")


def test_synth_command_lists_and_builds(tmp_path, monkeypatch, capsys):
    from harness.cli import main
    assert main(["synth", "--list", "pre-qwen*"]) == 0
    assert "pre-qwen35" in capsys.readouterr().out
    assert main(["synth", "no-such-*"]) == 2
    _needs_source("rwkv-world")
    shipped = resolve("gpt-2")
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / shipped.name).symlink_to(shipped)
    assert main(["synth", "rwkv-world"]) == 0
    assert (tmp_path / "synthetic" / "rwkv-world.gguf").read_bytes() == synth.build("rwkv-world")


# --- parity on the pre-tokenizer sweep, against golden recorded from llama.cpp ---------------

def _golden(name: str, record: str = RECORD) -> dict:
    path = GOLDEN_DIR / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"no golden for {name}; record with: {record} {name}")
    return load_golden(path)


def _synthetic_matching(name: str, golden: dict, record: str = RECORD) -> Path:
    _needs_source(name)
    path = synth.ensure(name)
    differs = mismatch(golden["gguf"], path)  # the golden's file identity (docs/golden.md)
    assert differs is None, (
        f"{path.name} no longer matches its golden ({differs}): rebuild ({synth.SYNTH_COMMAND} {name}) and "
        f"re-record ({record} {name}), then review the diff")
    return path


@pytest.mark.parametrize("name", synth.pre_sweep_names())
def test_pre_sweep_golden(name):
    _replay_golden(name, RECORD)


@pytest.mark.parametrize("name", synth.names("sens-"))
def test_sensitivity_golden(name):
    _replay_golden(name, RECORD_DEFAULT)


def _replay_golden(name: str, record: str) -> None:
    golden = _golden(name, record)
    path = _synthetic_matching(name, golden, record)
    ours = Tokenizer.from_gguf(path)
    got = vocab_record(ours)
    assert got == golden["vocab"], f"vocabulary fields differ: {diff_vocab(golden['vocab'], got)[:5]}"
    wrong = []
    for case in golden["cases"]:
        if "crash" in case or "document" in case:
            continue  # a long document is a digest: the golden replay (harness.golden.digest) checks it
        got = evaluate_case(ours, case)
        if got["encode"] != case["encode"]:
            wrong.append(case["id"])
    assert not wrong, f"{len(wrong)} of {len(golden['cases'])} cases differ: {wrong[:8]}"


@pytest.mark.oracle
def test_unknown_pre_refused_by_both(tmp_path):
    """A pre name llama.cpp does not know: it refuses the file, we raise naming the nearest names."""
    _needs_source("pre-qwen2")
    live = pytest.importorskip("harness.oracle.session")
    meta = gguf.parse(synth.build("pre-qwen2"))
    path = tmp_path / "pre-qwen3.gguf"
    gguf_writer.write(path, meta.metadata | {Keys.PRE: "qwen3"}, types=meta.types)
    with pytest.raises(UnsupportedVocab, match=r"qwen3.*qwen2"):
        Tokenizer.from_gguf(path)
    with live.OracleSession(path, timeout=60) as oracle, pytest.raises(live.OracleRefusal):
        oracle.call("ping")


def _seeded_inputs(seed: int, count: int) -> list[dict]:
    """Cases mixing words, digits, scripts, whitespace runs, emoji and invalid bytes."""
    import random
    rng = random.Random(seed)
    atoms = ["Hello", " world", "I'm", "'ll", "123", "4567", " ", "  ", "\n", "\n\n", "\t", "日本語",
             "한국어", "Ωμέγα", "naïve", "!!", "...", "🦙", "👨‍👩‍👧", "\u3000", "\u00a0", "x86_64", "<|",
             "|>", "\u2581", "CamelCase", "ß", "İ", "٣", "½"]
    cases = []
    for k in range(count):
        parts = [rng.choice(atoms) if rng.random() < 0.7 else chr(rng.randint(0x20, 0x2FFFF))
                 for _ in range(rng.randint(1, 10))]
        data = "".join(parts).encode("utf-8", "surrogatepass")
        if rng.random() < 0.1:
            data += bytes([rng.randint(0x80, 0xFF)])
        cases.append({"id": f"seed{seed}-{k}", "bytes": data.hex()})
    return cases


@pytest.mark.oracle
@pytest.mark.nightly
@pytest.mark.parametrize("name", synth.pre_sweep_names())
def test_pre_sweep_live_differential(name):
    """25 seeded inputs per name (2,275 over the family) against the crash-isolated oracle."""
    _needs_source(name)
    live = pytest.importorskip("harness.oracle.session")
    path = synth.ensure(name)
    ours = Tokenizer.from_gguf(path)
    wrong = []
    with live.OracleSession(path, timeout=60) as oracle:
        for case in _seeded_inputs(seed=5, count=25):
            try:
                expected = oracle.evaluate(case)
            except live.OracleCrash:
                continue  # llama.cpp's own crash: a finding for the golden, not a parity failure
            if evaluate_case(ours, case)["encode"] != expected["encode"]:
                wrong.append(case["bytes"])
    assert not wrong, f"{len(wrong)} inputs differ, e.g. {bytes.fromhex(wrong[0])!r}"
