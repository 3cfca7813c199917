"""The pinned builds: the llama-cpp-python release (read from `harness/data/pin.txt`) and node-llama-cpp's.

`harness/data/pin.txt` is the one place the llama-cpp-python version is written (a requirements
line, which pyproject.toml's `[harness]` extra reads as it is); everything in the harness that names
the pinned release takes `LLAMA_CPP_PYTHON_VERSION` from here. `NODE_LLAMA_CPP_VERSION` is the
node-llama-cpp release whose prebuilt llama.cpp the nightly compares the pinned one with
(`python -m harness builds`, docs/golden.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import SetupError

PIN_FILE = Path(__file__).resolve().parents[1] / "data" / "pin.txt"
PACKAGE = "llama-cpp-python"
_LINE = re.compile(r"llama-cpp-python==(\d+\.\d+\.\d+)")
NODE_LLAMA_CPP_VERSION = "3.21.1"


def read_pin(path: Path = PIN_FILE) -> str:
    """The version of the one `llama-cpp-python==X.Y.Z` line of `path` (comments and blank lines aside);
    `SetupError` naming the file for anything else."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SetupError(f"cannot read the pin {path}: {exc}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    found = [_LINE.fullmatch(line) for line in lines]
    if len(lines) != 1 or found[0] is None:
        raise SetupError(f"{path}: expected exactly one line `{PACKAGE}==X.Y.Z` besides comments, "
                         f"found {lines[:3]}")
    return found[0].group(1)


def pin_text(version: str, path: Path = PIN_FILE) -> str:
    """`path`'s text with its pinned version replaced by `version` (its comments kept): what bump-pin writes."""
    read_pin(path)  # a malformed pin is refused, never rewritten
    return _LINE.sub(f"{PACKAGE}=={version}", path.read_text(encoding="utf-8"), count=1)


LLAMA_CPP_PYTHON_VERSION = read_pin()
