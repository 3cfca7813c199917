"""Every `GGUF_PARITY_*` variable is declared once (harness/environment_vars.py) and listed once (docs/environment.md).

Three checks: the doc's table says what the declarations say, row for row; no other module of `harness/`
spells a variable's name (a read or a write elsewhere would bypass the checked accessor); and every
`GGUF_PARITY_` name the project spells anywhere (code, nox, tests, tools, docs) is a declared one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness import environment_vars
from harness.environment_vars import VARIABLES
from harness.errors import SetupError

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "environment.md"
MODULE = ROOT / "harness" / "environment_vars.py"
# Runs in the converter's venv and imports nothing of gguf-parity: it reads the two its parent sets itself.
NOT_IMPORTING = {ROOT / "harness" / "models" / "convert_driver.py": {"GGUF_PARITY_CHILD_MEMORY",
                                                                     "GGUF_PARITY_FOLDER_CODE"}}
PREFIX = "GGUF_PARITY_"
NAME = re.compile(PREFIX + r"[A-Z][A-Z_]*[A-Z]")
SPELLED_IN = ("harness", "tokenizer", "tests", "tools", "bench", "docs", "noxfile.py", "conftest.py", "README.md",
              "quickstart.sh", ".github", ".ci")


def module_rows() -> dict[str, tuple[str, ...]]:
    return {v.name: (f"`{v.name}`", v.kind, v.shown_default, v.meaning, v.read_by) for v in VARIABLES}


def doc_rows(text: str) -> dict[str, tuple[str, ...]]:
    """The table's rows by variable: `| `NAME` | type | default | meaning | read by |`."""
    rows = {}
    for line in text.splitlines():
        if line.startswith(f"| `{PREFIX}"):
            cells = tuple(cell.strip() for cell in line.strip().strip("|").split(" | "))
            rows[cells[0].strip("`")] = cells
    return rows


def differences(doc: dict[str, tuple[str, ...]], code: dict[str, tuple[str, ...]]) -> list[str]:
    found = [f"{name}: declared, not in docs/environment.md" for name in code if name not in doc]
    found += [f"{name}: in docs/environment.md, not declared" for name in doc if name not in code]
    found += [f"{name}: the doc has {doc[name]}, the module says {code[name]}" for name in code
              if name in doc and doc[name] != code[name]]
    return found


def spelled_names(path: Path) -> list[tuple[int, str]]:
    """(line, name) of each string literal that is a `GGUF_PARITY_*` name, and each keyword argument named one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value.strip()):
            found.append((node.lineno, node.value.strip()))
        elif isinstance(node, ast.keyword) and node.arg and NAME.fullmatch(node.arg):
            found.append((node.value.lineno, node.arg))
    return found


def stray_names(root: Path) -> list[str]:
    """Each `GGUF_PARITY_*` name spelled in a module of `root/harness` other than the declarations."""
    found = []
    for path in sorted((root / "harness").rglob("*.py")):
        if path == root / "harness" / "environment_vars.py":
            continue
        allowed = NOT_IMPORTING.get(path, set())
        found += [f"{path.relative_to(root)}:{line}: {name}" for line, name in spelled_names(path)
                  if name not in allowed]
    return found


def test_the_doc_lists_every_variable_as_declared():
    assert differences(doc_rows(DOC.read_text(encoding="utf-8")), module_rows()) == []


def test_each_variable_is_declared_once():
    names = [v.name for v in VARIABLES]
    assert len(names) == len(set(names))
    assert all(NAME.fullmatch(name) and v.meaning and v.kind and v.read_by for name, v in zip(names, VARIABLES))


def test_no_other_harness_module_spells_a_variable():
    assert stray_names(ROOT) == []


def test_every_name_the_project_spells_is_declared():
    this = Path(__file__).resolve()
    spelled: dict[str, str] = {}
    for top in SPELLED_IN:
        start = ROOT / top
        paths = [start] if start.is_file() else sorted(p for p in start.rglob("*") if p.is_file())
        for path in paths:
            if path == this or path.suffix not in (".py", ".md", ".sh", ".yml", ".yaml", ".toml", ""):
                continue
            for name in NAME.findall(path.read_text(encoding="utf-8", errors="replace")):
                spelled.setdefault(name, str(path.relative_to(ROOT)))
    declared = {v.name for v in VARIABLES}
    assert {name: where for name, where in spelled.items() if name not in declared} == {}


def test_the_checks_see_planted_breaks(tmp_path):
    planted = PREFIX + "PLANTED"
    (tmp_path / "harness" / "runs").mkdir(parents=True)
    (tmp_path / "harness" / "runs" / "x.py").write_text(
        f'import os\nA = os.environ.get("{planted}")\nB = dict(os.environ, {planted}="1")\nC = "see ${planted}"\n')
    assert stray_names(tmp_path) == [f"harness/runs/x.py:2: {planted}", f"harness/runs/x.py:3: {planted}"]
    code = module_rows()
    doc = dict(code)
    first = next(iter(doc))
    del doc[first]
    doc[planted] = (f"`{planted}`", "int", "0", "planted", "nox")
    doc["GGUF_PARITY_VENVS"] = (*code["GGUF_PARITY_VENVS"][:2], "elsewhere", *code["GGUF_PARITY_VENVS"][3:])
    found = differences(doc, code)
    assert f"{first}: declared, not in docs/environment.md" in found
    assert f"{planted}: in docs/environment.md, not declared" in found
    assert any(line.startswith("GGUF_PARITY_VENVS: the doc has") for line in found)


def test_a_bad_value_is_a_setup_error_naming_the_variable(monkeypatch):
    for variable, bad in ((environment_vars.DOCUMENTS, "most"), (environment_vars.HEADER_CAP, "12X"),
                          (environment_vars.FETCH_TIMEOUT, "-1"), (environment_vars.HYPOTHESIS_GITHUB, "owner"),
                          (environment_vars.FUZZ, "many")):
        monkeypatch.setenv(variable.name, bad)
        with pytest.raises(SetupError, match=re.escape(f"${variable.name}={bad!r}: ")):
            variable.get()
    monkeypatch.setenv(environment_vars.HEADER_CAP.name, "2M")
    assert environment_vars.HEADER_CAP.get() == 2 << 20
    monkeypatch.setenv(environment_vars.DOCUMENTS.name, " ")
    assert environment_vars.DOCUMENTS.get() == "default"
