"""The README's layout section names every module, one line each.

A module missing from it is a module a newcomer cannot place; this test lists
the missing ones (and lines naming modules that no longer exist).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("tokenizer", "tokenizer/engines", "harness", "harness/commands", "harness/children", "harness/references")


def layout_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Layout\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def modules() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for folder in FOLDERS for p in (ROOT / folder).glob("*.py")}


def listed(section: str) -> list[str]:
    """The module paths the section gives a line to (`- `path.py` — ...`)."""
    return re.findall(r"^- `([\w/]+\.py)` — \S", section, flags=re.M)


def test_every_module_has_a_line():
    assert sorted(modules() - set(listed(layout_section()))) == []


def test_every_line_names_an_existing_module_once():
    lines = listed(layout_section())
    assert sorted(set(lines) - modules()) == []
    assert len(lines) == len(set(lines))


def test_the_check_sees_a_missing_module():
    assert listed("- `tokenizer/api.py` — the API.\n- tokenizer/x.py — no backticks\n") == ["tokenizer/api.py"]
