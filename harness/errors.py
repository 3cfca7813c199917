"""`SetupError`: something the harness needs is missing (a vocabulary, a build, a venv), for every stage.

`python -m harness` reports it as one line and exit status 2 (`harness.cli`), like the input
errors, which stay beside the format they guard (`CorpusError`, `GoldenError`, `JSONLError`,
`KnownCrashesError`, `InputTooLarge`). Kept apart from `harness.models`, so that a stage can
raise it without importing the model cache. May import: the standard library only.
"""

from __future__ import annotations


class SetupError(RuntimeError):
    """Something the harness needs is missing; the message says how to get it."""
