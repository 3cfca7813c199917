"""The skip policy (tests/skip_policy.py): under `nox -s tests` only the optional extras may skip.

Each test runs a small suite of its own through pytester with the real plugin
and checks the exit status and the end-of-run lines.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.skip_policy import STRICT_ENV, group_of

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]

SUITE = """
import pytest

@pytest.mark.skip(reason="nightly test: run with --nightly (or nox -s nightly)")
def test_long():
    pass

@pytest.mark.skip(reason="nightly test: run with --nightly (or nox -s nightly)")
def test_longer():
    pass

def test_peer():
    pytest.skip("llama-cpp-python 0.3.16 venv not built")

def test_peer_named():
    pytest.skip("could not import 'transformers': No module named 'transformers'")

def test_ok():
    pass
"""

UNPLANNED = """
import pytest

def test_rwkv():
    pytest.skip("rwkv-world.gguf missing (build with: python -m harness synth)")
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    """A pytester folder whose conftest loads the policy as the suite's conftest.py does."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makeconftest('pytest_plugins = ["tests.skip_policy"]\n')
    return pytester


def test_an_unplanned_skip_fails_the_strict_run_and_is_named(suite, monkeypatch):
    monkeypatch.setenv(STRICT_ENV, "1")
    suite.makepyfile(test_allowed=SUITE,
                     test_unplanned=UNPLANNED)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "unplanned skip: 1 x synthetic vocabulary not built (python -m harness synth) "
        "[test_unplanned.py::test_rwkv]",
        "skipped: 2 nightly, 2 optional peer, 1 UNPLANNED",
        "1 unplanned skip(s): `nox -s tests` sets up what they need, so the run fails*",
    ])


def test_allowed_skips_pass_the_strict_run(suite, monkeypatch):
    monkeypatch.setenv(STRICT_ENV, "1")
    suite.makepyfile(test_allowed=SUITE)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["skipped: 2 nightly, 2 optional peer"])
    result.stdout.no_fnmatch_line("*unplanned*")


def test_a_plain_run_passes_and_says_what_to_build(suite, monkeypatch):
    monkeypatch.delenv(STRICT_ENV, raising=False)
    suite.makepyfile(test_unplanned=UNPLANNED)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "unplanned skip: 1 x synthetic vocabulary not built (python -m harness synth)*",
        "skipped: 1 UNPLANNED",
        "1 unplanned skip(s): build what they name, or run `./quickstart.sh tests`, which does",
    ])


def test_an_unknown_skip_is_unplanned_under_its_own_reason(suite, monkeypatch):
    monkeypatch.setenv(STRICT_ENV, "1")
    suite.makepyfile(test_module_skip="import pytest\npytest.importorskip('no_such_module_here')\n"
                                      "def test_x():\n    pass\n")
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["unplanned skip: 1 x could not import 'no_such_module_here'*"])


HELPER = """
import pytest

def need_rwkv():
    pytest.skip("rwkv-world.gguf missing (build with: python -m harness synth)", allow_module_level=True)
"""

NEEDS_RWKV = "from rwkv_helper import need_rwkv\nneed_rwkv()\n\ndef test_x():\n    pass\n"


@pytest.mark.parametrize("workers", [None, "2"], ids=["serial", "xdist"])
def test_module_skips_count_once_each_with_or_without_xdist(suite, monkeypatch, workers):
    """Two modules skipped by one helper line are two skips, also when xdist workers collect them all."""
    if workers:
        pytest.importorskip("xdist")
    monkeypatch.setenv(STRICT_ENV, "1")
    suite.makepyfile(rwkv_helper=HELPER, test_one=NEEDS_RWKV, test_two=NEEDS_RWKV, test_allowed=SUITE)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", *(("-n", workers) if workers else ()))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "unplanned skip: 2 x synthetic vocabulary not built (python -m harness synth) "
        "[test_one.py, test_two.py]",
        "skipped: *, 2 UNPLANNED",
    ])


def test_allowed_skips_pass_the_strict_run_under_xdist(suite, monkeypatch):
    pytest.importorskip("xdist")
    monkeypatch.setenv(STRICT_ENV, "1")
    suite.makepyfile(test_allowed=SUITE)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["skipped: 2 nightly, 2 optional peer"])
    result.stdout.no_fnmatch_line("*unplanned*")


def test_the_suite_loads_the_policy(request):
    assert request.config.pluginmanager.get_plugin("gguf-parity-skips") is not None


@pytest.mark.parametrize(("reason", "group"), [
    ("nightly test: run with --nightly (or nox -s nightly)", "nightly"),
    ("could not import 'torch': No module named 'torch'", "optional peer"),
    ("llama-cpp-python 0.3.16 venv not built", "optional peer"),
    ("node is not installed (apt-get install nodejs)", "optional peer"),
    ("chromium is not installed: apt-get install chromium", "no chromium"),
])
def test_the_optional_extras_are_allowed(reason, group):
    assert group_of(reason) == (group, True)


@pytest.mark.parametrize("reason", [
    "plamo2.gguf missing (build with: python -m harness synth)",
    "chat helper not built: python -m harness chat --build-helper",
    "no vocabulary llama-spm (fetch with: python -m harness fetch)",
    "llama-cpp-python is not installed: run the tests through `nox -s tests`",
    "could not import 'harness.oracle.llama': No module named 'llama_cpp'",
    "no golden for pre-gpt2; record with: python -m harness record pre-gpt2",
    "could not import 'gguf': No module named 'gguf'",
    "no g++ to build the libstdc++ probe",
])
def test_what_the_session_builds_is_not_allowed(reason):
    assert group_of(reason)[1] is False
