"""Reference children, the tekken lister and the converter are bounded like the llama.cpp workers.

A child capped at `child_memory()` bytes of address space (`--memory-limit`, or
the workers' default) that asks for more fails with one error naming the limit,
in seconds, instead of taking the machine's memory. The reference's own files
are refused above their size limits before any child starts.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import pytest

from harness import environment
from harness.errors import SetupError
from harness.files import input_limits
from harness.references import added, specs
from harness.subjects.client import RemoteEngine
from harness.subjects.guard import EngineLoadError
from tests import reference_files as rf

LIMIT = 1 << 30  # 1 GiB for these tests: the hostile loads ask for many times that


@pytest.fixture
def small_limit():
    environment.set_child_memory(LIMIT)
    yield LIMIT
    environment.set_child_memory(None)


def children_peak() -> int:
    """The largest peak RSS, in bytes, of any child this process has waited for."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def test_a_child_asking_for_64_gib_fails_naming_its_memory_limit(small_limit, tmp_path):
    argv = [sys.executable, "-m", "harness.children.python_child", "--engine", "tests.memory_hog:load",
            "--memory-limit", str(small_limit)]
    began = time.monotonic()
    with pytest.raises(EngineLoadError, match=f"over the memory limit of {small_limit:,} bytes"):
        RemoteEngine(argv, tmp_path / "x.gguf", args={}, timeout=10)
    assert time.monotonic() - began < 30


def test_the_reference_and_release_children_carry_the_memory_limit(small_limit):
    from harness.subjects import llama_release

    assert specs.child_argv("hf")[-2:] == ["--memory-limit", str(small_limit)]
    assert llama_release.child_argv("0.3.1")[-2:] == ["--memory-limit", str(small_limit)]
    environment.set_child_memory(None)
    assert specs.child_argv("spm")[-1] == str(environment.default_memory())


def hostile_tekken(path: Path) -> Path:
    """A tekken.json whose config asks mistral-common for 2^31 special tokens (fillers it builds one by one)."""
    rf.tekken_json(path, special_tokens=False)
    data = json.loads(path.read_text())
    data["config"]["default_num_special_tokens"] = 2 ** 31
    data["config"]["default_vocab_size"] = 2 ** 31 + len(data["vocab"])
    path.write_text(json.dumps(data))
    return path


def test_a_tekken_file_asking_for_2_31_special_tokens_is_refused_at_once(tmp_path):
    tekken = hostile_tekken(tmp_path / "t" / "tekken.json")
    with pytest.raises(SetupError, match="default_num_special_tokens is 2147483648; at most 65,536"):
        specs.parse(f"tekken:{tekken}")


def test_the_tekken_children_stop_at_the_memory_limit_past_the_check(small_limit, tmp_path):
    """Past the spec check (called directly): the lister and the reference child hit their cap."""
    pytest.importorskip("mistral_common")
    tekken = hostile_tekken(tmp_path / "t" / "tekken.json")
    began = time.monotonic()
    with pytest.raises(ValueError, match="memory limit"):
        added.tekken_texts(tekken)
    took = time.monotonic() - began
    argv = specs.child_argv("tekken")
    with pytest.raises(EngineLoadError, match="memory limit"):
        RemoteEngine(argv, tmp_path / "x.gguf", args={"reference": str(tekken)}, timeout=10)
    print(f"tekken 2^31 specials: refused in {took:.1f} s; largest child peak RSS {children_peak() >> 20} MiB")
    assert took < 60


@pytest.mark.parametrize("name, limit", [
    ("tokenizer.json", input_limits.MAX_TOKENIZER_JSON_BYTES),
    ("tekken.json", input_limits.MAX_TOKENIZER_JSON_BYTES),
    ("tokenizer.model", input_limits.MAX_SPM_MODEL_BYTES),
])
def test_a_reference_file_over_its_size_limit_is_refused_before_any_child(tmp_path, name, limit):
    path = tmp_path / name
    with path.open("wb") as fh:
        fh.truncate(limit + 1)  # sparse: no disk taken
    kind = {"tokenizer.json": "hf", "tekken.json": "tekken", "tokenizer.model": "spm"}[name]
    with pytest.raises(SetupError, match=f"over the limit of {limit:,}"):
        specs.parse(f"{kind}:{path}")


def test_a_tokenizer_config_over_its_limit_is_a_one_line_error(tmp_path):
    tj = rf.bpe_json(tmp_path / "tokenizer.json")
    with (tmp_path / "tokenizer_config.json").open("wb") as fh:
        fh.truncate(input_limits.MAX_CONFIG_BYTES + 1)
    with pytest.raises(SetupError, match="over the limit"):
        added.texts(f"hf:{tj}")
