"""pyproject.toml's extras as pip sees them: each extra's requirement lines, read from the files its
`[tool.setuptools.dynamic.optional-dependencies]` table names (harness/data/pin.txt first for `harness`)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def extras(root: Path = ROOT) -> dict[str, list[str]]:
    """extra -> its requirement strings, comments and blank lines left out, in file order."""
    table = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["dynamic"]
    out: dict[str, list[str]] = {}
    for extra, directive in table["optional-dependencies"].items():
        lines = [line.strip() for name in directive["file"]
                 for line in (root / name).read_text(encoding="utf-8").splitlines()]
        out[extra] = [line for line in lines if line and not line.startswith("#")]
    return out
