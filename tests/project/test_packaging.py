"""The dependency split: `pip install gguf-parity` is the tokenizer alone.

`tokenizer/` needs numpy and regex; the harness (llama-cpp-python, a
5-minute compile, plus pandas, jinja2 and hypothesis) is the `[harness]`
extra. These tests read the metadata pip installs from, and tokenize in an
interpreter where none of the harness's dependencies can be imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.golden.files import load_golden
from harness.golden.records import FLAGS
from harness.inputs.corpus import case_input
from tests.extras import extras

ROOT = Path(__file__).resolve().parents[2]
CORE = {"numpy", "regex"}
HARNESS_ONLY = ("llama_cpp", "pandas", "jinja2", "hypothesis", "harness")


def _name(requirement: str) -> str:
    """The distribution name of a requirement string ("numpy>=1.26; ..." -> "numpy")."""
    for i, ch in enumerate(requirement):
        if not (ch.isalnum() or ch in "-_."):
            return requirement[:i].lower()
    return requirement.lower()


def test_pyproject_core_dependencies_are_numpy_and_regex():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert {_name(r) for r in project["dependencies"]} == CORE
    harness = {_name(r) for r in extras()["harness"]}
    assert {"llama-cpp-python", "pandas", "jinja2", "hypothesis"} <= harness


def test_built_metadata_requires_llama_cpp_python_only_with_the_harness_extra(tmp_path):
    """What pip installs from: the requirements setuptools builds from pyproject.toml.

    `egg_info` writes them as `requires.txt`: the unconditional ones first,
    then one `[extra]` section per extra. (It needs no `wheel` package and no
    network, unlike building a wheel.)
    """
    pytest.importorskip("setuptools")
    subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "egg_info",
                    "--egg-base", str(tmp_path)], cwd=ROOT, capture_output=True, check=True)
    (requires_txt,) = tmp_path.glob("*.egg-info/requires.txt")
    sections: dict[str, set[str]] = {"": set()}
    current = ""
    for line in requires_txt.read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            current = line.strip("[]")
            sections[current] = set()
        elif line.strip():
            sections[current].add(_name(line))
    assert sections[""] == CORE
    assert [extra for extra, names in sections.items() if "llama-cpp-python" in names] == ["harness"]


def test_the_tokenizer_works_without_the_harness_dependencies(require_vocab):
    """Token ids as llama.cpp recorded them (golden), computed where no harness module imports."""
    path = require_vocab("llama-spm")
    cases = load_golden(ROOT / "golden" / "ggml-vocab-llama-spm.json", check=False)["cases"][:25]
    inputs = [case_input(case).hex() for case in cases]
    code = (f"import json, sys; sys.modules.update(dict.fromkeys({HARNESS_ONLY!r}));"
            "from tokenizer import Tokenizer; tok = Tokenizer.from_gguf(sys.argv[1]);"
            f"print(json.dumps([[tok.tokenize(bytes.fromhex(h), add_special=a, parse_special=p)"
            f" for a, p in {FLAGS!r}] for h in json.load(sys.stdin)]))")
    done = subprocess.run([sys.executable, "-c", code, str(path)], input=json.dumps(inputs), cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    expected = [[e["ids"] for e in case["encode"]] for case in cases]
    assert json.loads(done.stdout) == expected
