"""Every command's --help agrees with the README's exit-code table.

Before, `peers --help` said "Exit status: 0 when the matrix was written (differences between peers are
its content)" and then printed the table of every command, whose 1 is "a difference was found"; other
commands had their own "Exit status" prose beside the table. Now each command's --help ends with the
README's table, and what the command means by a code is printed under that code (its module's
`EXIT_STATUS`), or in its place for a command that uses a code otherwise (`EXIT_INSTEAD`), which the
README's "Exit codes" section must then name. This test reads every command's --help and the README.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import cli

ROOT = Path(__file__).resolve().parents[2]
CODE_LINE = re.compile(r"^  (\d+)\s+(\S.*)$")


def readme_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Exit codes\n"):]
    return section[:section.find("\n## ", 1)]


def readme_table() -> dict[int, str]:
    """code -> meaning; a row "130 / 143 | stopped by SIGINT / SIGTERM: ..." gives each code its own word."""
    table = {}
    for cell, meaning in re.findall(r"^\| ([\d /]+) \| (.+) \|$", readme_section(), flags=re.M):
        codes = [int(c) for c in cell.split(" / ")]
        for i, code in enumerate(codes):
            table[code] = re.sub(r"(\w+) / (\w+)", lambda m, i=i: m.group(i + 1), meaning) if len(codes) > 1 \
                else meaning
    return table


def headline(meaning: str) -> str:
    """What a code means, without its details: up to the first '(' or ':', markdown and case dropped."""
    plain = meaning.replace("*", "").replace("`", "")
    return re.split(r"[(:]", plain, maxsplit=1)[0].strip(" ,;.").lower()


def command_help(name: str) -> str:
    parser = cli.build_parser(name)
    [sub] = [a for a in parser._actions if a.dest == "command"]
    return sub.choices[name].format_help()


def exit_table(help_text: str) -> tuple[str, dict[int, tuple[str, list[str]]]]:
    """(the text before the table, {code: (its first line, the lines under it)})."""
    before, _, table = help_text.partition("\nexit status:\n")
    assert table, "no exit status table"
    codes: dict[int, tuple[str, list[str]]] = {}
    code = None
    for line in table.splitlines():
        match = CODE_LINE.match(line)
        if match:
            code = int(match.group(1))
            codes[code] = (match.group(2), [])
        elif line.startswith(" " * 9) and code is not None:
            codes[code][1].append(line.strip())
        elif line.startswith(" " * 7) and code is not None and not codes[code][1]:
            codes[code] = (f"{codes[code][0]} {line.strip()}", [])
        elif line.strip():
            pytest.fail(f"a line outside the table's form: {line!r}")
    return before, codes


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_help_gives_the_readme_table_and_its_own_meaning_under_it(name):
    module = __import__(f"harness.commands.{cli.COMMANDS[name]}", fromlist=["x"])
    instead = getattr(module, "EXIT_INSTEAD", {})
    table = readme_table()
    description, codes = exit_table(command_help(name))
    assert sorted(codes) == sorted(table)
    for code, (first, under) in codes.items():
        if code in instead:  # used otherwise: said so in its place, and the README names the command
            assert first.startswith(f"{name}: "), first
            assert f"`{name}`" in readme_section(), f"the README's Exit codes section does not name {name}"
        else:
            assert headline(first) == headline(table[code]), (code, first, table[code])
        assert all(line.startswith(f"{name}: ") for line in under[:1]), under
    # what the command means by a code is in the table only: no second account of it in the description
    description = description.split("\noptions:\n", 1)[0]
    assert not re.search(r"exit status", description, flags=re.I), description


def test_the_readme_names_exactly_the_commands_that_use_a_code_otherwise():
    named = set(re.findall(r"`([a-z-]+)` (?:exits|once)", readme_section()))
    instead = {name for name, module in cli.COMMANDS.items()
               if getattr(__import__(f"harness.commands.{module}", fromlist=["x"]), "EXIT_INSTEAD", {})}
    assert instead == {"peers", "ledger"}
    assert instead <= named


def test_the_check_sees_a_help_that_contradicts_the_table():
    help_text = ("usage: x\n\nExit status: 0 when written.\n\nexit status:\n"
                 "  0    the matrix was written\n  1    a difference was found\n")
    description, codes = exit_table(help_text)
    assert re.search(r"exit status", description, flags=re.I)
    assert headline(codes[0][0]) != headline(readme_table()[0])
