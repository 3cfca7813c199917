"""The pinned llama-cpp-python version is written once, in harness/data/pin.txt, and everything reads it.

Before, it was written in noxfile.py, pyproject.toml, harness/models/shipped.py, harness/chat/golden.py and
a dozen tests, and a bump meant finding them all. Now pyproject.toml's `[harness]` extra reads the file
(`[tool.setuptools.dynamic]`), noxfile.py and tools/matrix_local.py (the workflows' cache keys) read it as
text, the harness through `harness.models.pin`; a second copy of the version anywhere else fails here.
Records of what a build did are not copies of the pin: the goldens (`golden/`), the Unicode tables'
`source` line (`tokenizer/data/`), the known crashes, and prose (`*.md`, each figure with its build).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.models import pin

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ("golden/", "tokenizer/data/", "harness/data/corpora/")  # what a build did, recorded
SKIPPED_SUFFIXES = (".md", ".gguf", ".png", ".whl", ".gz")


def tracked_files() -> list[str]:
    done = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"not a git checkout ({done.stderr.decode(errors='replace').strip()[:80]})")
    return sorted({name for name in done.stdout.decode().split("\0") if name})


def copies_of(version: str, names: list[str]) -> list[str]:
    """`file:line` of every copy of `version` outside the pin file, the records and the prose."""
    literal = re.compile(rf"(?<![\d.]){re.escape(version)}(?![\d])")
    found = []
    for name in names:
        if name == "harness/data/pin.txt" or name.startswith(RECORDS) or name.endswith(SKIPPED_SUFFIXES):
            continue
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 4 << 20:
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        found += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if literal.search(line)]
    return found


def test_the_pinned_version_is_written_once():
    assert copies_of(pin.LLAMA_CPP_PYTHON_VERSION, tracked_files()) == []


def test_a_second_copy_is_found(tmp_path, monkeypatch):
    """The scan itself: a copy in code is found, one in a record or a longer version is not."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "x.json").write_text('{"llama_cpp_python": "9.8.7"}')
    (tmp_path / "a.py").write_text('X = "9.8.7"\nY = "19.8.7"\nZ = "9.8.71"\n')
    assert copies_of("9.8.7", ["a.py", "golden/x.json"]) == ["a.py:1"]


def test_every_reader_reads_the_one_pin():
    version = pin.read_pin(pin.PIN_FILE)
    assert version == pin.LLAMA_CPP_PYTHON_VERSION
    from harness.chat import golden
    from harness.models import fetch, shipped
    assert shipped.LLAMA_CPP_PYTHON_VERSION == golden.LLAMA_CPP_PYTHON_VERSION == version
    assert f"llama_cpp_python-{version}.tar.gz" == fetch.SDIST_NAME
    spec = importlib.util.spec_from_file_location("matrix_local", ROOT / "tools" / "matrix_local.py")
    assert spec and spec.loader
    matrix = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(matrix)
    assert matrix.pinned_version() == version  # the workflows' cache key
    pytest.importorskip("nox")
    sys.path.insert(0, str(ROOT))
    try:
        import noxfile
    finally:
        sys.path.remove(str(ROOT))
    assert version == noxfile.LLAMA_CPP_PYTHON


def test_pyproject_reads_the_harness_extra_from_the_pin():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "optional-dependencies" in project["project"]["dynamic"]
    extras = project["tool"]["setuptools"]["dynamic"]["optional-dependencies"]
    assert extras["harness"]["file"][0] == "harness/data/pin.txt"
    for extra in extras.values():
        for name in extra["file"]:
            assert (ROOT / name).is_file(), name


def test_a_malformed_pin_is_one_line_naming_the_file(tmp_path):
    bad = tmp_path / "pin.txt"
    for text in ("", "# only a comment\n", "llama-cpp-python>=0.3\n", "llama-cpp-python==9.8.7\nnumpy\n",
                 "llama-cpp-python==9.8.7\nllama-cpp-python==9.8.6\n"):
        bad.write_text(text)
        with pytest.raises(SetupError, match=re.escape(str(bad))):
            pin.read_pin(bad)
    with pytest.raises(SetupError, match="cannot read the pin"):
        pin.read_pin(tmp_path / "missing.txt")


def test_bumping_rewrites_the_version_line_only(tmp_path):
    where = tmp_path / "pin.txt"
    where.write_text("# the llama-cpp-python release\nllama-cpp-python==9.8.7\n")
    assert pin.pin_text("9.8.9", where) == "# the llama-cpp-python release\nllama-cpp-python==9.8.9\n"
