"""No import cycles in `tokenizer/` or `harness/`, and every folder keeps to its import rule.

A cycle means neither module can be read (or tested, or moved) without the
other, and its usual cure, an import inside a function, hides the dependency
from whoever reads the top of the file. So both kinds count here: the graph
has an edge for every import of a project module, at module level, inside
a function or under `if TYPE_CHECKING:`. A type-only import never runs, but a
circle it closes is a real one for the reader: the type sits on the wrong side
(move it where both sides can import it, as `ModelResult` went to
`harness.compare.result`).

A package's `__init__` is a module like any other; `from . import x` is an
edge to the submodule `x` when there is one, else to the package. An import
by a computed name (`importlib.import_module(f"...{name}")`) is an edge the
graph cannot see, so those are refused too, except where listed in DYNAMIC.

The import rules are data in the code itself: each folder's `__init__` docstring has a
`May import:` sentence naming, in backticks, the modules or packages outside the folder
its modules may import (a name covers what is under it; names inside parentheses are
comments). `test_folders_keep_their_import_rules` holds every import to that sentence, so
the rule a reader sees is the rule that holds.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tokenizer", "harness")

# Modules allowed to import by a computed name: the user's `--engine MODULE:CALLABLE` (resolved
# in the Python child), and the CLI's command table (each command is imported only when it runs).
DYNAMIC = {"harness.subjects.spec", "harness.cli", "harness.children.python_child"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


@cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, `if TYPE_CHECKING:` ones included."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _base(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def targets(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (module level and in functions)."""
    tree = parse(path)
    found = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            base = _base(name, path, node)
            candidates = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for candidate in candidates:
            while candidate and candidate not in known:  # `import a.b.c` of a name inside a.b
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                found.add(candidate)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: targets(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package):
    edges = {a: {b for b in bs if b.split(".")[0] == package} for a, bs in graph().items()
             if a.split(".")[0] == package}
    assert cycles(edges) == []


def dynamic_imports(path: Path) -> list[int]:
    """Lines that import a module by a computed name (`import_module(x)`, `__import__(x)`)."""
    tree = parse(path)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called not in ("import_module", "__import__"):
            continue
        arg = node.args[0] if node.args else None
        fixed = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
        if not fixed or arg.value.split(".")[0] in PACKAGES:  # a fixed project name belongs in an import
            lines.append(node.lineno)
    return lines


def test_no_import_by_computed_name():
    found = {name: lines for name, path in modules().items() if name not in DYNAMIC
             for lines in [dynamic_imports(path)] if lines}
    assert found == {}


def test_the_check_sees_a_cycle_through_a_function_level_import(tmp_path, monkeypatch):
    pkg = tmp_path / "tokenizer"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    (pkg / "e.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .f import z\n")
    (pkg / "f.py").write_text("from .e import w\n")
    (pkg / "d.py").write_text("import importlib\nimportlib.import_module(f'{__name__}.c')\n__import__('os')\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "PACKAGES", ("tokenizer",))
    assert cycles(graph()) == [["tokenizer.a", "tokenizer.b"], ["tokenizer.e", "tokenizer.f"]]
    assert dynamic_imports(pkg / "d.py") == [2]


# --- import rules: each folder's `May import:` sentence -------------------------------------------


def folders() -> dict[str, Path]:
    """Every folder (package) of the project below the top ones, by module name."""
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("__init__.py"))
            if p.parent != ROOT / pkg}


def allowed_imports(docstring: str) -> list[str] | None:
    """The backticked names of a docstring's `May import:` sentence, or None when it has none.

    The sentence ends at the first full stop outside backticks and parentheses; names inside
    parentheses are explanations, not rules.
    """
    start = docstring.find("May import")
    if start < 0:
        return None
    text = docstring[docstring.index(":", start) + 1:]
    names, depth, quoted, name = [], 0, False, ""
    for i, char in enumerate(text):
        if char == "`":
            if quoted and depth == 0:
                names.append(name)
            quoted, name = not quoted, ""
        elif quoted:
            name += char
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "." and depth == 0 and (i + 1 == len(text) or text[i + 1].isspace()):
            break
    return names


def rule_breaks() -> list[str]:
    """Each import from a folder to a project module outside it that its rule does not name."""
    edges, found = graph(), []
    for folder, init in folders().items():
        rule = allowed_imports(ast.get_docstring(parse(init)) or "")
        if rule is None:
            found.append(f"{folder}: its __init__ docstring has no 'May import:' sentence")
            continue
        for module in sorted(m for m in edges if m == folder or m.startswith(folder + ".")):
            for target in sorted(edges[module]):
                inside = target == folder or target.startswith(folder + ".")
                if not inside and not any(target == name or target.startswith(name + ".") for name in rule):
                    found.append(f"{module} imports {target}, which {folder}'s rule does not name")
    return found


def test_folders_keep_their_import_rules():
    assert rule_breaks() == []


def test_the_rule_check_sees_a_planted_break(tmp_path, monkeypatch):
    for folder, doc in (("low", "May import: `tokenizer.errors` (its root, `tokenizer.high`)."),
                        ("high", "May import: `tokenizer.low`."), ("bare", "Owns nothing.")):
        (tmp_path / "tokenizer" / folder).mkdir(parents=True)
        (tmp_path / "tokenizer" / folder / "__init__.py").write_text(f'"""{doc}"""\n')
    (tmp_path / "tokenizer" / "__init__.py").write_text("")
    (tmp_path / "tokenizer" / "errors.py").write_text("")
    (tmp_path / "tokenizer" / "low" / "a.py").write_text("from .. import errors\nfrom ..high import b\n")
    (tmp_path / "tokenizer" / "high" / "b.py").write_text("from ..low import a\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "PACKAGES", ("tokenizer",))
    assert rule_breaks() == [
        "tokenizer.bare: its __init__ docstring has no 'May import:' sentence",
        "tokenizer.low.a imports tokenizer.high.b, which tokenizer.low's rule does not name",
    ]


def test_the_rule_sentence_is_read_to_its_full_stop():
    doc = "Owns x.\nMay import: `a.b` (not `c`), `d`.\n`e` is not a rule. May import twice: `f`."
    assert allowed_imports(doc) == ["a.b", "d"]
    assert allowed_imports("Owns x.") is None
