"""Every module path written as a string resolves: the import checks cannot see these.

A module moved or renamed breaks its imports loudly, but not a string that names it: an
`--engine MODULE:CALLABLE` spec, a `python -m harness.x` argv, an `importlib.import_module`
table, a dotted name in the docs, a template folder, a package-data glob, a data file found
next to a module. Each kind is collected here and resolved.
"""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "tokenizer")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `tokenizer.` also begins GGUF metadata keys and Hugging Face file names: not module paths.
NOT_MODULES = re.compile(r"^tokenizer\.(ggml\b|chat_template|json\b|model\b|huggingface\b|rwkv\b)")
# Tests whose strings are made-up modules for their own self-checks.
FIXTURE_STRINGS = {"test_import_graph.py", "test_module_strings.py", "test_layout.py"}
DOTTED = re.compile(r"(?<![\w./-])((?:harness|tokenizer)(?:\.[A-Za-z_]\w*)+)(?::([A-Za-z_][\w.]*))?")


def resolves(dotted: str, attr: str | None = None) -> bool:
    """`a.b.c` is a module, or a name inside the longest module prefix; `attr` a name inside it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in [*parts[cut:], *(attr.split(".") if attr else [])]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def python_files() -> list[Path]:
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    tests = [p for p in sorted((ROOT / "tests").rglob("*.py")) if p.name not in FIXTURE_STRINGS]
    return files + tests + [ROOT / "noxfile.py", ROOT / "conftest.py"]


def string_paths(path: Path) -> set[tuple[str, str | None]]:
    """String constants that are a whole module path (`"harness.oracle.workers"`) or spec (`M:C`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = DOTTED.fullmatch(node.value.strip())
            if m and not NOT_MODULES.match(m.group(1)):
                found.add((m.group(1), m.group(2)))
    return found


def doc_paths(path: Path) -> set[tuple[str, str | None]]:
    """Dotted names in backticks (`harness.golden.records.vocab_record`) and `-m` module names."""
    text = path.read_text(encoding="utf-8")
    found = set()
    for span in re.findall(r"`([^`\n]+)`", text) + re.findall(r"-m ((?:harness|tokenizer)\.[\w.]+)", text):
        for m in DOTTED.finditer(span):
            if not NOT_MODULES.match(m.group(1)):
                found.add((m.group(1).rstrip("."), m.group(2)))
    return found


@pytest.mark.parametrize("path", [pytest.param(p, id=p.relative_to(ROOT).as_posix()) for p in python_files()])
def test_module_paths_in_code_strings_resolve(path):
    assert sorted(s for s in string_paths(path) if not resolves(*s)) == []


@pytest.mark.parametrize("path", [pytest.param(p, id=p.relative_to(ROOT).as_posix()) for p in DOCS])
def test_module_paths_in_docs_resolve(path):
    assert sorted(s for s in doc_paths(path) if not resolves(*s)) == []


def test_the_cli_command_table_resolves():
    from harness import cli
    for module_name in cli.COMMANDS.values():
        importlib.import_module(f"harness.commands.{module_name}")


def test_every_template_a_page_names_is_in_the_template_folder():
    from harness.report.templating import TEMPLATES
    named = set()
    for path in (ROOT / "harness").rglob("*.py"):
        named |= set(re.findall(r"get_template\(\"([^\"]+)\"\)", path.read_text(encoding="utf-8")))
    for path in TEMPLATES.glob("*.j2"):
        named |= set(re.findall(r"{%-?\s*(?:include|extends|import|from)\s+\"([^\"]+)\"", path.read_text()))
    assert named and sorted(n for n in named if not (TEMPLATES / n).is_file()) == []


def test_every_package_data_glob_matches_files():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    empty = [f"{pkg}/{glob}" for pkg, globs in data.items() for glob in globs
             if not any(p.is_file() for p in (ROOT / pkg).glob(glob))]
    assert empty == []


def test_data_files_found_next_to_modules_exist():
    from harness import environment
    from harness.chat import cases, helper_build
    from harness.golden import files
    from harness.inputs import corpus
    from harness.models import fetch
    for path in (files.SCHEMA_PATH, cases.TARGETS_FILE, helper_build.MAIN, helper_build.MANIFEST,
                 fetch.MANIFEST):
        assert path.is_file(), path
    for folder in (files.GOLDEN_DIR, corpus.CORPORA_DIR):
        assert folder.is_dir(), folder
    assert (environment.project_root() / "pyproject.toml").is_file()


def test_the_check_sees_a_stale_string(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('SPEC = "harness.live_run:run"\nARGV = ["-m", "harness.oracle.workers"]\n'
                   'KEY = "tokenizer.ggml.pre"\n')
    found = string_paths(bad)
    assert found == {("harness.live_run", "run"), ("harness.oracle.workers", None)}
    assert [s for s in sorted(found) if not resolves(*s)] == [("harness.live_run", "run")]
    doc = tmp_path / "x.md"
    doc.write_text("run `python -m harness.selftest_vectors NAME`, see `harness.report.build.NoSuchName`\n")
    assert sorted(s for s in doc_paths(doc) if not resolves(*s)) == [
        ("harness.report.build.NoSuchName", None), ("harness.selftest_vectors", None)]
