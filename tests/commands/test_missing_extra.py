"""A missing optional dependency is one line naming the extra to install (exit 2), never an internal error.

`pip install gguf-parity` is the tokenizer alone; the harness needs the `[harness]` extra. Before, `run`
without it printed a traceback and "internal error (a bug in gguf-parity ...): No module named 'hypothesis'"
(exit 3), and even `python -m harness --help` did (jinja2). Each probe here runs the command line in a
child where the module cannot be found (`sys.modules[name] = None`: import and find_spec both fail, as
when it is not installed); no probe reaches llama.cpp.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from tests.extras import extras as pyproject_extras

ROOT = Path(__file__).resolve().parents[2]
# distributions whose import name is not their name with "-" made "_"
IMPORT_NAMES = {"llama-cpp-python": "llama_cpp", "pyyaml": "yaml"}


def harness_without(modules: list[str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`python -m harness ARGS` where `modules` cannot be imported."""
    code = (f"import sys; sys.modules.update(dict.fromkeys({modules!r}));"
            "from harness.cli import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120, check=False)


def assert_names_the_extra(done: subprocess.CompletedProcess, module: str, extra: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line == (f'error: {module} is not installed; it comes with the [{extra}] extra: '
                    f'pip install "gguf-parity[{extra}]"'), line


@pytest.mark.parametrize(("missing", "args"), [
    pytest.param(["hypothesis"], ["run", "--model", "MODEL", "--report", "REPORT"], id="run-hypothesis"),
    pytest.param(["pandas"], ["compare", "--golden", "GOLDEN", "--report", "REPORT"], id="compare-pandas"),
    pytest.param(["jinja2"], ["--help"], id="help-jinja2"),
])
def test_a_missing_harness_dependency_names_the_extra(tmp_path, missing, args):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    golden = tmp_path / "golden"
    golden.mkdir()
    spelled = [{"MODEL": str(model), "REPORT": str(tmp_path / "r"), "GOLDEN": str(golden)}.get(a, a) for a in args]
    done = harness_without(missing, *spelled, cwd=tmp_path)
    assert_names_the_extra(done, missing[0], "harness")


def test_an_optional_module_that_is_installed_but_breaks_stays_a_bug(capsys, monkeypatch):
    """Only a module that cannot be found is a missing extra: pandas failing inside itself is exit 3."""
    def broken(args):
        raise ModuleNotFoundError("No module named 'pandas._libs.x'", name="pandas._libs.x")
    monkeypatch.setattr(cli, "build_parser", lambda only=None: _parser_running(broken))
    assert cli.main(["fetch"]) == 3
    assert "internal error" in capsys.readouterr().err


def test_a_missing_module_of_no_extra_stays_a_bug(capsys, monkeypatch):
    """A module no extra installs (one of ours gone missing, a typo) is our bug: exit 3 with its traceback."""
    def broken(args):
        raise ModuleNotFoundError("No module named 'nowhere_to_be_found'", name="nowhere_to_be_found")
    monkeypatch.setattr(cli, "build_parser", lambda only=None: _parser_running(broken))
    assert cli.main(["fetch"]) == 3
    assert "internal error" in capsys.readouterr().err


def _parser_running(function):
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("command")
    parser.set_defaults(_run=function)
    return parser


def test_every_optional_module_belongs_to_the_extra_named_for_it():
    extras = pyproject_extras()

    def modules_of(extra: str) -> set[str]:
        names = set()
        for requirement in extras[extra]:
            name = requirement.split(";")[0].split("[")[0]
            for stop in "<>=!~ ":
                name = name.split(stop)[0]
            name = name.strip().lower()
            names.add(IMPORT_NAMES.get(name, name.replace("-", "_")))
        return names

    wrong = {module: extra for module, extra in cli.OPTIONAL_MODULES.items()
             if extra not in extras or module not in modules_of(extra)}
    assert wrong == {}
    assert {"llama_cpp", "pandas", "hypothesis", "jinja2", "pytest"} <= modules_of("harness")
