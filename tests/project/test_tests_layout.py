"""The tests mirror the code (docs/layout.md, "Tests"): a module's test is found by its name, without grep.

- no `test_*.py` directly under `tests/`: every test file sits in a folder;
- a folder is `tokenizer/` (the product), a folder of `harness/` of the same name, `commands/` (the
  command line) or `project/` (the repository as a whole);
- a test file named after exactly one module of the project (`test_check.py` for
  `harness/runs/check.py`) sits in that module's folder;
- no two test files share a name: the folders are no packages, so pytest imports a test file by its
  name, and the second of two is an "import file mismatch" error that stops the run.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXTRA = {"tokenizer", "commands", "project"}


def harness_folders(root: Path) -> set[str]:
    return {p.parent.name for p in (root / "harness").glob("*/__init__.py")}


def module_homes(root: Path) -> dict[str, set[str]]:
    """Module name -> the test folders its modules belong to (`tokenizer` for all of `tokenizer/`)."""
    homes: dict[str, set[str]] = defaultdict(set)
    for path in (root / "harness").glob("*/*.py"):
        homes[path.stem].add(path.parent.name)
    for path in (root / "tokenizer").rglob("*.py"):
        homes[path.stem].add("tokenizer")
    homes.pop("__init__", None)
    return homes


def misplaced(root: Path) -> list[str]:
    """Each test file outside the folder its name points to, with the folder it should be in."""
    tests = root / "tests"
    allowed = harness_folders(root) | EXTRA
    homes = module_homes(root)
    problems = [f"{p.relative_to(root)}: directly under tests/ (put it in a folder)" for p in tests.glob("test_*.py")]
    for path in sorted(tests.glob("*/test_*.py")):
        folder, name = path.parent.name, path.stem.removeprefix("test_")
        if folder not in allowed:
            problems.append(f"{path.relative_to(root)}: tests/{folder}/ names no folder of the code")
        elif name not in harness_folders(root) and len(homes.get(name, ())) == 1 and folder not in homes[name]:
            problems.append(f"{path.relative_to(root)}: named after a module of {next(iter(homes[name]))}/")
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in sorted(tests.glob("*/test_*.py")):
        by_name[path.name].append(str(path.relative_to(root)))
    problems += [f"{' and '.join(paths)}: one name in two folders (rename one)" for paths in by_name.values()
                 if len(paths) > 1]
    return problems


def test_every_test_file_sits_where_its_name_points():
    assert misplaced(ROOT) == []


def test_the_check_sees_a_misplaced_test(tmp_path):
    for folder in ("harness/runs", "harness/report", "tokenizer/engines"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "harness/runs/check.py").write_text("")
    (tmp_path / "tokenizer/engines/bpe.py").write_text("")
    for test in ("report/test_check.py", "runs/test_check.py", "misc/test_x.py", "test_loose.py",
                 "runs/test_bpe.py", "tokenizer/test_bpe.py"):
        (tmp_path / "tests" / test).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / test).write_text("")
    assert misplaced(tmp_path) == [
        "tests/test_loose.py: directly under tests/ (put it in a folder)",
        "tests/misc/test_x.py: tests/misc/ names no folder of the code",
        "tests/report/test_check.py: named after a module of runs/",
        "tests/runs/test_bpe.py: named after a module of tokenizer/",
        "tests/report/test_check.py and tests/runs/test_check.py: one name in two folders (rename one)",
        "tests/runs/test_bpe.py and tests/tokenizer/test_bpe.py: one name in two folders (rename one)",
    ]
