"""Move modules of `harness/` and `tokenizer/` and rewrite every reference to them.

    python tools/move_modules.py tools/moves.txt          # git mv + rewrite
    python tools/move_modules.py tools/moves.txt --rewrite-only FILE...

A move file has one `OLD NEW` pair of paths a line (a `.py` module or a folder). References
rewritten, in every text file of the scope below:
- dotted module names (`harness.live_run` -> `harness.runs.live`), in code, strings and docs;
- paths (`harness/live_run.py` -> `harness/runs/live.py`, `harness/templates` -> ...);
- `from . import x` / `from .x import y` / `from harness import x` (parsed, not matched), so a
  relative import is recomputed from the module's new place.
`--rewrite-only` rewrites the given files without moving anything: for a file that another
branch added in the old layout.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "tokenizer")
SCOPE = ("harness", "tokenizer", "tests", "bench", "tools", "examples", "docs", "corpora", ".ci",
         ".github")
TOP_FILES = ("noxfile.py", "conftest.py", "pyproject.toml", "README.md", "quickstart.sh")
TEXT = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".j2", ".mjs", ".sh", ".cpp", ""}


def read_moves(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            old, new = line.split()
            pairs.append((old, new))
    return pairs


def dotted(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def module_map(moves: list[tuple[str, str]]) -> dict[str, str]:
    return {dotted(old): dotted(new) for old, new in moves if old.endswith(".py")}


def text_rewriter(moves: list[tuple[str, str]]):
    mods = module_map(moves)
    paths = dict(moves)
    names = sorted(mods, key=len, reverse=True)
    dot_re = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")(?!\w)")
    path_re = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, sorted(paths, key=len, reverse=True)))
                         + r")(?![\w])")

    def rewrite(text: str) -> str:
        text = dot_re.sub(lambda m: mods[m.group(1)], text)
        return path_re.sub(lambda m: paths[m.group(1)], text)
    return rewrite


def package_of(module: str, is_init: bool) -> str:
    return module if is_init else module.rpartition(".")[0]


def relative(target: str, package: str) -> str:
    """`from X import`'s X for `target`, written relative to `package`."""
    t, p = target.split("."), package.split(".")
    common = 0
    while common < min(len(t), len(p)) and t[common] == p[common]:
        common += 1
    return "." * (len(p) - common + 1) + ".".join(t[common:])


def fix_imports(text: str, old_module: str, new_module: str, is_init: bool,
                mods: dict[str, str], old_modules: set[str]) -> str:
    """Recompute every `from ... import` of a project module for the file's new place."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    old_pkg, new_pkg = package_of(old_module, is_init), package_of(new_module, is_init)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = old_pkg
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            base_old = f"{base}.{node.module}" if node.module else base
        elif node.module and node.module.split(".")[0] in PACKAGES:
            base_old = node.module
        else:
            continue
        is_rel = bool(node.level)

        def spell(target_new: str, is_rel: bool = is_rel) -> str:
            return relative(target_new, new_pkg) if is_rel else target_new

        start = offsets[node.lineno - 1] + node.col_offset
        end = offsets[node.end_lineno - 1] + node.end_col_offset
        stmt = text[start:end]
        rest = stmt.partition(" import ")[2]
        submodules = [a for a in node.names if f"{base_old}.{a.name}" in old_modules]
        if not submodules:
            # names from a module (or from a package's __init__): only the module moves
            base_new = mods.get(base_old, base_old)
            new_stmt = f"from {spell(base_new)} import {rest}"
        else:
            groups: dict[str, list[str]] = {}
            for a in node.names:
                full = f"{base_old}.{a.name}"
                if full in old_modules:
                    target = mods.get(full, full)
                    parent, _, leaf = target.rpartition(".")
                    alias = a.asname or (a.name if leaf != a.name else None)
                    groups.setdefault(parent, []).append(leaf + (f" as {alias}" if alias else ""))
                else:
                    base_new = mods.get(base_old, base_old)
                    groups.setdefault(base_new, []).append(a.name + (f" as {a.asname}" if a.asname else ""))
            indent = "\n" + " " * node.col_offset
            new_stmt = indent.join(f"from {spell(parent)} import {', '.join(items)}"
                                   for parent, items in groups.items())
        if new_stmt != stmt:
            edits.append((start, end, new_stmt))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def scope_files() -> list[Path]:
    files = [ROOT / f for f in TOP_FILES if (ROOT / f).exists()]
    for folder in SCOPE:
        for p in sorted((ROOT / folder).rglob("*")):
            if p.is_file() and p.suffix in TEXT and ".nox" not in p.parts and "__pycache__" not in p.parts:
                files.append(p)
    return files


def all_modules() -> set[str]:
    found = set()
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            found.add(dotted(p.relative_to(ROOT).as_posix()))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("moves", type=Path)
    parser.add_argument("--rewrite-only", nargs="*", type=Path)
    args = parser.parse_args(argv)
    moves = read_moves(args.moves)
    mods = module_map(moves)
    rewrite = text_rewriter(moves)
    old_modules = all_modules() | set(mods)
    new_of = {ROOT / old: ROOT / new for old, new in moves}
    skip = {args.moves.resolve(), Path(__file__).resolve()}
    files = args.rewrite_only if args.rewrite_only is not None else [p for p in scope_files() if p not in skip]
    contents = {}
    for path in files:
        path = path.resolve()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new_text = rewrite(text)
        if path.suffix == ".py":
            rel = path.relative_to(ROOT).as_posix()
            old_module = dotted(rel)
            new_path = new_of.get(path, path)
            new_module = dotted(new_path.relative_to(ROOT).as_posix())
            new_text = fix_imports(new_text, old_module, new_module, path.name == "__init__.py",
                                   mods, old_modules)
        contents[path] = new_text
    if args.rewrite_only is None:
        for old, new in moves:
            (ROOT / new).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", old, new], cwd=ROOT, check=True)
    for path, text in contents.items():
        target = path
        if args.rewrite_only is None:
            for old, new in moves:
                o = ROOT / old
                if path == o or o in path.parents:
                    target = ROOT / new / path.relative_to(o) if o in path.parents else ROOT / new
        if target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
