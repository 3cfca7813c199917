"""`SetupError` and the exit statuses of `python -m harness`, for every stage.

`SetupError`: something the harness needs is missing (a vocabulary, a build, a venv).

`python -m harness` reports it as one line and exit status 2 (`harness.cli`), like the input
errors, which stay beside the format they guard (`CorpusError`, `GoldenError`, `JSONLError`,
`KnownCrashesError`, `InputTooLarge`). Kept apart from `harness.models`, so that a stage can
raise it without importing the model cache. May import: the standard library only.
"""

from __future__ import annotations


class SetupError(RuntimeError):
    """Something the harness needs is missing; the message says how to get it."""


# The exit statuses of every command, defined here only: `python -m harness COMMAND --help` prints
# EXIT_CODES, and the README's "Exit codes" table says the same (tests/commands/test_exit_codes.py).
EXIT_OK = 0       # everything asked was checked, and it all agreed
EXIT_FOUND = 1    # a difference (or another finding) was found
EXIT_USAGE = 2    # a usage, set-up or input error, or a model not checked
EXIT_BUG = 3      # a bug in gguf-parity itself (a traceback)
EXIT_CODES = {
    EXIT_OK: "every model was checked, and everything checked agreed",
    EXIT_FOUND: "a difference was found (a mismatch, an engine error, a new llama.cpp crash; "
                "with --reference any class of finding)",
    EXIT_USAGE: "a usage, set-up or input error (one line naming what and where), or a model that was not checked",
    EXIT_BUG: "a bug in gguf-parity itself (its traceback is printed: please report it)",
    130: "stopped by SIGINT (a partial report marked interrupted is written)",
    143: "stopped by SIGTERM (likewise)",
}
