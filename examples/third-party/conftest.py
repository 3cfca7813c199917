"""The engine under test: the Node.js reference child that ships with gguf-parity.

A real repository names its own program here (or passes --parity-engine on the command
line, which wins). EXAMPLE_ENGINE=broken starts engine/broken_child.mjs instead: the same
child with one planted wrong id, to see the suite fail as it should.
"""

import os
from pathlib import Path

import harness.children

HERE = Path(__file__).parent
REFERENCE = Path(harness.children.__file__).parent / "node_child.mjs"


def engine_command() -> str:
    if os.environ.get("EXAMPLE_ENGINE") == "broken":
        return f"cmd:node {HERE / 'engine' / 'broken_child.mjs'} {REFERENCE}"
    return f"cmd:node {REFERENCE}"


def pytest_configure(config):
    if config.option.parity_engine is None:
        config.option.parity_engine = engine_command()
