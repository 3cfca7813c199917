"""llama.cpp's tokenizer sources, as `python -m harness fetch` extracts them.

Some tests check our tables and name lists against the pinned llama.cpp's own
source text (the reference for behaviour); they skip, naming the fetch
command, when the cache lacks it.
"""

from __future__ import annotations

import pytest

from harness.models.shipped import FETCH_COMMAND, source_path


def llama_source(name: str) -> str:
    """The text of `src/<name>` of the pinned llama.cpp, or skip."""
    path = source_path(name)
    if not path.is_file():
        pytest.skip(f"llama.cpp's {name} is not in the cache ({path}); run: {FETCH_COMMAND}")
    return path.read_text(encoding="utf-8")
