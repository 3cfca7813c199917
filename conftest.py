"""Shared pytest set-up.

- `nightly` tests (long fuzzing, full sweeps) run only with `--nightly` or `-m nightly`.
- `--shard K/N` runs only part K of N of the selected tests (tests/shard_split.py).
- `require_vocab(name)` gives a shipped vocabulary's path, or skips naming the
  command that fetches it.
- `pair_for(name_or_path)` gives (our `Tokenizer`, llama.cpp's `LlamaOracle`) on
  one vocabulary: the one way tests hold both. The two most recent pairs are
  kept, so a module that runs its checks vocabulary by vocabulary loads each
  once and never holds all 19; an evicted oracle is closed, and so is every
  one left at the end of the session.
- `oracle` tests skip when llama-cpp-python is not importable.
- Hypothesis profiles `ci`, `dev` and `nightly` (registered by `harness.inputs.fuzz`)
  apply suite-wide with `--hypothesis-profile=NAME` or
  `GGUF_PARITY_HYPOTHESIS_PROFILE=NAME`; tests with their own `@settings` keep them.
- The end of the run counts the skips by group (tests/skip_policy.py); under
  `nox -s tests` (`GGUF_PARITY_STRICT_SKIPS=1`) a skip for something the session
  builds itself (vocabularies, synthetic vocabularies, the chat helper) fails the run.
- The suite's three-way runs sweep nothing unless they ask (`GGUF_PARITY_SWEEPS=none` unless set):
  the sweeps (harness/runs/sweeps.py) take about 100 s on a tiny model and add cases to what a
  test counts; tests/runs/test_sweeps_run.py asks for them with `--sweeps`.
"""

from __future__ import annotations

import importlib.util
import os
from collections import OrderedDict
from pathlib import Path

import pytest

from harness import environment_vars
from harness.errors import SetupError
from harness.inputs import fuzz
from harness.models.paths import resolve
from harness.models.shipped import FETCH_COMMAND
from tokenizer import Tokenizer, UnsupportedVocab

pytest_plugins = ["tests.skip_policy", "tests.shard_split"]

os.environ.setdefault("GGUF_PARITY_SWEEPS", "none")  # harness.runs.config.SWEEPS_ENV (the docstring says why)

if os.environ.get(fuzz.PROFILE_ENV):
    fuzz.load_profile()


def pytest_addoption(parser):
    parser.addoption("--nightly", action="store_true", help="also run tests marked nightly")


def pytest_collection_modifyitems(config, items):
    wants_nightly = config.getoption("--nightly") or "nightly" in (config.getoption("-m") or "")
    has_llama = importlib.util.find_spec("llama_cpp") is not None
    skip_nightly = pytest.mark.skip(reason="nightly test: run with --nightly (or nox -s nightly)")
    skip_oracle = pytest.mark.skip(
        reason="llama-cpp-python is not installed: run the tests through `nox -s tests`")
    for item in items:
        if "nightly" in item.keywords and not wants_nightly:
            item.add_marker(skip_nightly)
        if "oracle" in item.keywords and not has_llama:
            item.add_marker(skip_oracle)


def _require_vocab(name: str):
    try:
        return resolve(name)
    except SetupError as exc:
        pytest.skip(f"{exc} (fetch with: {FETCH_COMMAND})")


@pytest.fixture(scope="session")
def require_vocab():
    """`require_vocab("llama-spm")` -> Path, or skip with the fetch command."""
    return _require_vocab



class PairCache:
    """(ours, oracle) per GGUF file, the `size` most recently used kept open."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._pairs: OrderedDict[Path, tuple] = OrderedDict()

    def __call__(self, vocab) -> tuple:
        """`vocab` is a shipped name (skips when not fetched) or a path; skips when we have no engine."""
        path = Path(vocab) if isinstance(vocab, Path) or str(vocab).endswith(".gguf") else _require_vocab(vocab)
        if path in self._pairs:
            self._pairs.move_to_end(path)
            return self._pairs[path]
        oracle_mod = pytest.importorskip("harness.oracle.llama")
        try:
            ours = Tokenizer.from_gguf(path)
        except UnsupportedVocab as e:
            pytest.skip(f"engine not available: {e}")
        self._pairs[path] = (ours, oracle_mod.LlamaOracle(path))
        while len(self._pairs) > self.size:
            _, (_, evicted) = self._pairs.popitem(last=False)
            evicted.close()
        return self._pairs[path]

    def close(self) -> None:
        while self._pairs:
            _, (_, oracle) = self._pairs.popitem()
            oracle.close()


@pytest.fixture(scope="session")
def pair_for():
    """`pair_for("llama-spm")` or `pair_for(path)` -> (ours, llama.cpp), cached; see the module docstring."""
    cache = PairCache()
    yield cache
    cache.close()


# What the nightly session sets for its own runs (noxfile.py `nightly`): a test that checks what a *default*
# run does asks for `default_environment`, so that it measures the same thing in the nightly as anywhere.
NIGHTLY_SETTINGS = tuple(v.name for v in (environment_vars.HYPOTHESIS_PROFILE, environment_vars.BOUNDARIES,
                                          environment_vars.DOCUMENTS))


@pytest.fixture
def default_environment(monkeypatch):
    """The children this test starts see the defaults, not the nightly session's settings."""
    for name in NIGHTLY_SETTINGS:
        monkeypatch.delenv(name, raising=False)
