"""The layout is the architecture: `tokenizer/` stands alone.

`tokenizer/` is the product under test and must never reach for the
instrument (`harness`) or for another tokenizer implementation; otherwise a
parity run could end up comparing llama.cpp with itself.
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
