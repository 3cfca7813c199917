"""Every command the README prints runs as written there.

The README's code blocks and inline commands are read as a user copies them: each `python -m harness
...` line must parse with that command's own parser (its command exists, its options too), each
`./quickstart.sh WORD` must be a nox session or one of quickstart.sh's own words (`shell`, `exec`), each
`pytest --parity-...` option must be the plugin's, and the ones that need nothing but a shipped
vocabulary (`tokenize`, `inspect` on a shipped name) run, to exit 0. The Quickstart section says where
its environment is and how to enter it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.models.shipped import SHIPPED

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
QUICKSTART_WORDS = ("shell", "exec")   # quickstart.sh's own; every other word is a nox session
RUN_AS_WRITTEN = ("tokenize", "inspect")  # fast, and need only a shipped vocabulary


def readme_commands(text: str | None = None) -> list[list[str]]:
    """The README's commands as argv lists: the lines of its `sh` blocks and its inline `commands`."""
    text = README.read_text(encoding="utf-8") if text is None else text
    lines = [line for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S)
             for line in block.replace("\\\n", " ").splitlines()]
    lines += re.findall(r"`((?:\./quickstart\.sh|python -m harness|pytest) [^`]*)`", text)
    commands = []
    for line in lines:
        words = shlex.split(line, comments=True)
        if words and words[0] == "./quickstart.sh" and words[1:2] == ["exec"]:
            commands.append(words)
            words = words[2:]  # the command it runs, as written
        if words:
            commands.append(words)
    return commands


def harness_argv(words: list[str]) -> list[str] | None:
    return words[3:] if words[:3] == ["python", "-m", "harness"] else None


def nox_sessions() -> set[str]:
    from tests.project.test_noxfile import _noxfile
    _noxfile()
    import nox.registry
    return set(nox.registry.get())


def test_the_readme_has_commands_of_each_kind():
    kinds = {words[0] for words in readme_commands()}
    assert {"python", "./quickstart.sh", "pytest"} <= kinds


@pytest.mark.parametrize("words", [pytest.param(w, id=" ".join(w)[:80]) for w in readme_commands()
                                   if harness_argv(w) is not None])
def test_every_harness_command_parses_as_written(words):
    argv = harness_argv(words)
    parser = cli.build_parser(cli._command_in(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{' '.join(words)}: exit {exc.code} from argparse")
    assert getattr(args, "_run", None) is not None or argv in (["--help"], ["-h"]), words


def test_every_quickstart_word_is_a_session_or_its_own():
    words = {w[1] for w in readme_commands() if w[0] == "./quickstart.sh" and len(w) > 1}
    assert words and sorted(words - nox_sessions() - set(QUICKSTART_WORDS)) == []


def test_every_pytest_option_is_the_plugin_s():
    from harness import pytest_plugin

    class Group:
        def __init__(self) -> None:
            self.names: set[str] = set()

        def addoption(self, *names: str, **kwargs) -> None:
            self.names.update(names)

    group = Group()
    pytest_plugin.pytest_addoption(type("Parser", (), {"getgroup": lambda self, *a, **k: group})())
    used = {word.split("=")[0] for words in readme_commands() if words[0] == "pytest"
            for word in words if word.startswith("--parity-")}
    assert used and sorted(used - group.names) == []


def test_the_quickstart_says_where_its_environment_is_and_how_to_enter_it():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Quickstart\n"):text.index("\n## ", text.index("\n## Quickstart\n") + 1)]
    for words in ("./quickstart.sh shell", "./quickstart.sh exec", "source .nox/env/bin/activate", ".nox/env"):
        assert words in section, words
    block = section[section.index("```sh\n") + 6:section.index("\n```", section.index("```sh\n"))]
    assert [line.split("#")[0].split() for line in block.splitlines()] == [
        ["./quickstart.sh", "parity"], ["./quickstart.sh", "tests"]]  # exactly two commands: the main job, the tests
    assert 'env_dir="$PWD/.nox/env"' in (ROOT / "quickstart.sh").read_text(encoding="utf-8")


def concrete(words: list[str]) -> bool:
    """A harness command of RUN_AS_WRITTEN whose every model (or file) is a shipped vocabulary."""
    argv = harness_argv(words)
    if not argv or argv[0] not in RUN_AS_WRITTEN:
        return False
    models = [argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "--model"]
    models += [w for w in argv[1:2] if not w.startswith("-")] if argv[0] == "inspect" else []
    return bool(models) and all(m in SHIPPED for m in models)


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize("words", [pytest.param(w, id=" ".join(w)[:80]) for w in readme_commands() if concrete(w)])
def test_the_concrete_commands_run_as_written(words, tmp_path, require_vocab):
    argv = harness_argv(words)
    for name in {argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "--model"}:
        require_vocab(name)
    done = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_reader_sees_a_command_that_does_not_parse():
    bad = readme_commands("```sh\npython -m harness tokenize --no-such-option\n./quickstart.sh nope\n```\n")
    assert bad == [["python", "-m", "harness", "tokenize", "--no-such-option"], ["./quickstart.sh", "nope"]]
    with pytest.raises(SystemExit):
        cli.build_parser("tokenize").parse_args(harness_argv(bad[0]))
    assert "nope" not in nox_sessions() | set(QUICKSTART_WORDS)
