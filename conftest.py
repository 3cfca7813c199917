"""Shared pytest set-up.

- `nightly` tests (long fuzzing, full sweeps) run only with `--nightly` or `-m nightly`.
- `require_vocab(name)` gives a shipped vocabulary's path, or skips naming the
  command that fetches it.
- `oracle` tests skip when llama-cpp-python is not importable.
- Hypothesis profiles `ci`, `dev` and `nightly` (registered by `harness.fuzz`)
  apply suite-wide with `--hypothesis-profile=NAME` or
  `GGUF_PARITY_HYPOTHESIS_PROFILE=NAME`; tests with their own `@settings` keep them.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from harness import fuzz
from harness.model_paths import resolve
from harness.models import FETCH_COMMAND, SetupError

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

