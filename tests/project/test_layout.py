"""The layout is the architecture: `tokenizer/` stands alone.

`tokenizer/` is the product under test and must never reach for the
instrument (`harness`) or for another tokenizer implementation; otherwise a
parity run could end up comparing llama.cpp with itself. It reads GGUF and
writes nothing: the GGUF writer is the harness's (`harness/models/gguf_writer.py`).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TOKENIZER = Path(__file__).resolve().parents[2] / "tokenizer"
FORBIDDEN = {"harness", "llama_cpp", "ggml", "gguf", "tokenizers", "sentencepiece", "tiktoken",
             "transformers"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("path", [pytest.param(p, id=p.relative_to(TOKENIZER).as_posix())
                                  for p in sorted(TOKENIZER.rglob("*.py"))])
def test_tokenizer_module_imports_nothing_forbidden(path):
    assert not imported_roots(path) & FORBIDDEN


def test_importing_tokenizer_loads_no_forbidden_module():
    code = ("import sys, tokenizer; from tokenizer import Tokenizer; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=TOKENIZER.parent, check=True).stdout
    assert out.strip() == "[]"


def test_the_check_sees_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from harness.oracle.llama import LlamaOracle\nimport llama_cpp.llama_cpp as c\n")
    assert imported_roots(bad) & FORBIDDEN == {"harness", "llama_cpp"}


# What writes bytes or files: struct packing, a file's write methods, temporary files.
WRITING_CALLS = {"pack", "pack_into", "write_bytes", "write_text", "tofile", "mkstemp", "NamedTemporaryFile"}


def writes(path: Path) -> list[str]:
    """`line: what` for each place a module packs binary data or writes a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in WRITING_CALLS:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{node.lineno}: import {n}" for n in names if n.split(".")[0] == "tempfile"]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            modes = node.args[1:2] + [k.value for k in node.keywords if k.arg == "mode"]
            if called in ("open", "fdopen") and any(isinstance(m, ast.Constant) and isinstance(m.value, str)
                                                    and set(m.value) & set("wax+") for m in modes):
                found.append(f"{node.lineno}: {called} for writing")
    return sorted(found, key=lambda s: int(s.split(":")[0]))


def test_tokenizer_writes_no_gguf():
    """No GGUF writer in the product: no module of `tokenizer/` packs bytes or writes a file."""
    found = {p.relative_to(TOKENIZER).as_posix(): w for p in sorted(TOKENIZER.rglob("*.py")) if (w := writes(p))}
    assert found == {}


def test_the_check_sees_a_writer(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import struct, tempfile\nout = struct.pack('<I', 3)\nwith open(p, 'wb') as f: pass\n"
                   "os.fdopen(fd, mode='ab')\nPath(p).write_bytes(out)\n")
    fine = tmp_path / "fine.py"
    fine.write_text("from .ids import pack\npack(b'')\nwith open(p, 'rb') as f: self.write(f.read())\n")
    assert writes(bad) == ["1: import tempfile", "2: .pack", "3: open for writing", "4: fdopen for writing",
                           "5: .write_bytes"]
    assert writes(fine) == []
