"""docs/layout.md names every module, one line each.

A module missing from it is a module a newcomer cannot place; this test lists
the missing ones (and lines naming modules that no longer exist).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tokenizer", "harness")


def folders() -> list[str]:
    """Every package folder: `tokenizer`, `harness` and each folder under them with an `__init__.py`."""
    return sorted(p.parent.relative_to(ROOT).as_posix() for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py"))


def layout_section() -> str:
    return (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")


def modules() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for folder in folders() for p in (ROOT / folder).glob("*.py")}


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
