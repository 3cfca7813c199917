"""Every `GGUF_PARITY_*` environment variable: declared here, read here, and listed in docs/environment.md.

Each `Variable` has its name, its type as the doc shows it, its default, a one-line meaning and who
reads it. `Variable.get()` is the one read of the environment for it: unset or blank gives the default,
a value that does not parse is a `SetupError` naming the variable and the value (`python -m harness`
says it in one line and exits 2). No other module of `harness/` spells a `GGUF_PARITY_` name
(tests/project/test_environment_doc.py): they use `X.name` or `X.get()`.

A variable `read_by` nox or the test suite is declared here too, so the doc lists every one; those
readers (noxfile.py, conftest.py, tests/) still read it themselves. `harness/models/convert_driver.py`
reads the two its parent sets (`CHILD_MEMORY`, `FOLDER_CODE`) itself: it runs in the converter's venv
and imports nothing from gguf-parity.
Kept at the bottom floor, beside `harness.errors` and `harness.environment`: every stage reads one.
May import: `harness.errors`, the standard library.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from .errors import SetupError

T = TypeVar("T")
HARNESS, NOX, TESTS = "harness", "nox", "tests"


@dataclass(frozen=True)
class Variable(Generic[T]):
    """One `GGUF_PARITY_*` variable: `get()` its value, typed and checked."""

    name: str
    kind: str                    # the doc's type column
    default: T
    meaning: str
    convert: Callable[[str], T]  # raises ValueError, whose message says what is expected
    shown: str = ""              # the default as the doc says it, when it is computed where it is used
    read_by: str = HARNESS

    def get(self) -> T:
        """The value set, converted; the default when unset or blank; `SetupError` when it does not parse."""
        text = os.environ.get(self.name, "")
        if not text.strip():
            return self.default
        try:
            return self.convert(text)
        except ValueError as exc:
            raise SetupError(f"${self.name}={text!r}: {exc}") from None

    @property
    def shown_default(self) -> str:
        return self.shown or ("unset" if self.default is None else str(self.default))


def one_of(*choices: str) -> Callable[[str], str]:
    def choose(text: str) -> str:
        if text.strip() not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text.strip()
    return choose


def number(low: int, high: int | None = None) -> Callable[[str], int]:
    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError("expected a whole number") from None
        if value < low or (high is not None and value > high):
            raise ValueError(f"expected a whole number from {low}" + ("" if high is None else f" to {high}"))
        return value
    return count


def byte_size(text: str, low: int, high: int) -> int:
    """`64M`, `2MiB`, `1G` or a byte count, as bytes, from `low` to `high` (ValueError otherwise)."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmg]?)(i?b)?\s*", text, flags=re.I)
    if not match:
        raise ValueError("give bytes, or a size such as 64M or 1G")
    value = int(match[1]) << {"": 0, "k": 10, "m": 20, "g": 30}[match[2].lower()]
    if value < low:
        raise ValueError(f"at least {_size(low)}")
    if value > high:
        raise ValueError(f"at most {_size(high)}")
    return value


def seconds(text: str, high: float) -> float:
    """Seconds, more than 0 and at most `high` (ValueError otherwise)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > high:
        raise ValueError(f"give seconds, more than 0 and at most {high:g}")
    return value


def _size(n: int) -> str:
    return f"{n >> 30}G" if n >= 1 << 30 else f"{n >> 20}M"


def github_artifact(text: str) -> str:
    """`OWNER/REPO` or `OWNER/REPO/ARTIFACT`, stripped (ValueError otherwise)."""
    parts = text.strip().split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError("expected OWNER/REPO or OWNER/REPO/ARTIFACT")
    return text.strip()


def _path(text: str) -> Path | None:
    return Path(text)


def _text(text: str) -> str | None:
    return text


MIN_HEADER_CAP = 1 << 20       # the first window is 2 MiB; a cap below 1 MiB makes no sense
MAX_HEADER_CAP = 1 << 30       # no tokenizer's metadata comes near it
MAX_FETCH_SECONDS = 3600.0
DOCUMENT_LEVELS = ("off", "mixed", "default", "full")
BOUNDARY_LEVELS = ("off", "slice", "full")
PROFILES = ("ci", "dev", "nightly", "default")  # harness.inputs.fuzz registers three; Hypothesis has `default`

# --- read by the harness ----------------------------------------------------------------------------------

CACHE = Variable("GGUF_PARITY_CACHE", "path", None, "the cache `fetch` fills: shipped vocabularies, templates, "
                 "real models", _path, shown="~/.cache/gguf-parity/VERSION")
VENVS = Variable("GGUF_PARITY_VENVS", "path", None, "the harness's own venvs (`llama.cpp@VERSION`, the converter, "
                 "node-llama-cpp)", _path, shown="~/.cache/gguf-parity/venvs")
WHEELS = Variable("GGUF_PARITY_WHEELS", "path", None, "the llama-cpp-python wheel cache", _path,
                  shown="~/.cache/gguf-parity/wheels", read_by=f"{HARNESS}, {NOX}")
LLAMA_LIB = Variable("GGUF_PARITY_LLAMA_LIB", "path", None, "a folder holding libllama for the chat helper",
                     _path, shown="the installed llama_cpp's lib/")
REAL_GGUF = Variable("GGUF_PARITY_REAL_GGUF", "path", None, "the folder of the real set's converted GGUFs",
                     _path, shown="CACHE/real-gguf")
HEADER_CAP = Variable("GGUF_PARITY_HEADER_CAP", "size (1M to 1G)", 64 << 20, "bytes of a remote GGUF's header "
                      "fetched at most (`--header-cap`)", lambda t: byte_size(t, MIN_HEADER_CAP, MAX_HEADER_CAP),
                      shown="64M")
FETCH_TIMEOUT = Variable("GGUF_PARITY_FETCH_TIMEOUT", f"seconds (at most {MAX_FETCH_SECONDS:g})", 300.0,
                         "the deadline of a whole remote header fetch (`--fetch-timeout`)",
                         lambda t: seconds(t, MAX_FETCH_SECONDS), shown="300")
DOCUMENTS = Variable("GGUF_PARITY_DOCUMENTS", "one of " + ", ".join(DOCUMENT_LEVELS), "default",
                     "which long documents the default corpora hold", one_of(*DOCUMENT_LEVELS))
BOUNDARIES = Variable("GGUF_PARITY_BOUNDARIES", "one of " + ", ".join(BOUNDARY_LEVELS), "slice",
                      "how many boundary cases the default corpora hold", one_of(*BOUNDARY_LEVELS))
HYPOTHESIS_PROFILE: Variable[str | None] = Variable(
    "GGUF_PARITY_HYPOTHESIS_PROFILE", "one of " + ", ".join(PROFILES), None,
    "the Hypothesis profile; set, `run` fuzzes its max_examples per model", one_of(*PROFILES),
    shown="unset (ci; `run` fuzzes 0)", read_by=f"{HARNESS}, {TESTS}")
HYPOTHESIS_DB = Variable("GGUF_PARITY_HYPOTHESIS_DB", "path", None, "the fuzzer's example database", _path,
                         shown="CHECKOUT/.hypothesis/examples")
HYPOTHESIS_GITHUB: Variable[str | None] = Variable(
    "GGUF_PARITY_HYPOTHESIS_GITHUB", "OWNER/REPO[/ARTIFACT]", None,
    "the nightly's shared example database, read-only", github_artifact)
SWEEPS = Variable("GGUF_PARITY_SWEEPS", "a --sweeps value", None, "what a three-way run sweeps when not given "
                  "--sweeps (checked as --sweeps is)", _text, shown="default (the test suite: none)",
                  read_by=f"{HARNESS}, {TESTS}")
CHILD_MEMORY = Variable("GGUF_PARITY_CHILD_MEMORY", "bytes", None, "the converter child's address-space cap, "
                        "set by harness.models.convert", number(0), shown="no cap", read_by="convert_driver.py")
FOLDER_CODE = Variable("GGUF_PARITY_FOLDER_CODE", "text", None, "the custom tokenizer a folder's auto_map names, "
                       "set by harness.models.convert", _text, read_by="convert_driver.py")

# --- read by nox and the test suite only -------------------------------------------------------------------

SHARD = Variable("GGUF_PARITY_SHARD", "K/N", None, "run only shard K of N (passed on as --shard)", _text,
                 read_by=NOX)
FUZZ = Variable("GGUF_PARITY_FUZZ", "int", 20, "fuzzed inputs per vocabulary in `parity`", number(0), read_by=NOX)
SEED = Variable("GGUF_PARITY_SEED", "int or none", "0", "the fuzz seed of the parity sessions (none: drawn)",
                str, read_by=NOX)
LONG_DOCS = Variable("GGUF_PARITY_LONG_DOCS", "int", 0, "long documents per vocabulary in `parity`", number(0),
                     read_by=NOX)
CALLS = Variable("GGUF_PARITY_CALLS", "int", 1200, "calls in a row per vocabulary in `parity`", number(0),
                 read_by=NOX)
NIGHTLY_FUZZ = Variable("GGUF_PARITY_NIGHTLY_FUZZ", "int", 1000, "fuzzed inputs per shipped vocabulary in "
                        "`nightly`", number(0), read_by=NOX)
NIGHTLY_SYNTH_FUZZ = Variable("GGUF_PARITY_NIGHTLY_SYNTH_FUZZ", "int", 100, "fuzzed inputs per synthetic "
                              "vocabulary in `nightly`", number(0), read_by=NOX)
REAL_FUZZ = Variable("GGUF_PARITY_REAL_FUZZ", "int", 20, "fuzzed inputs per real GGUF in `parity-real`",
                     number(0), read_by=NOX)
NIGHTLY_REAL_FUZZ = Variable("GGUF_PARITY_NIGHTLY_REAL_FUZZ", "int", 200, "fuzzed inputs per real GGUF in "
                             "`nightly`", number(0), read_by=NOX)
REAL_SWEEP_SECONDS = Variable("GGUF_PARITY_REAL_SWEEP_SECONDS", "seconds", "60", "the sweeps' budget per real "
                              "GGUF in `parity-real`", str, read_by=NOX)
NIGHTLY_REAL_SWEEP_SECONDS = Variable("GGUF_PARITY_NIGHTLY_REAL_SWEEP_SECONDS", "seconds", "120", "the sweeps' "
                                      "budget per real GGUF in `nightly`", str, read_by=NOX)
CHAT_FUZZ = Variable("GGUF_PARITY_CHAT_FUZZ", "int", 20, "fuzzed conversations per chat template in `parity-chat`",
                     number(0), read_by=NOX)
LEDGER = Variable("GGUF_PARITY_LEDGER", "path", None, "the nightly's ledger of differences", _path,
                  shown="reports/nightly/ledger.jsonl", read_by=NOX)
NIGHT = Variable("GGUF_PARITY_NIGHT", "YYYY-MM-DD", None, "the night the ledger folds", _text,
                 shown="today in UTC", read_by=NOX)
PEER_RELEASE = Variable("GGUF_PARITY_PEER_RELEASE", "version", "0.3.16", "the older llama-cpp-python release "
                        "`peers` compares", str, read_by=f"{NOX}, {TESTS}")
STRICT_SKIPS = Variable("GGUF_PARITY_STRICT_SKIPS", "1 or unset", None, "a skip for something `nox -s tests` "
                        "builds fails the run (nox sets it)", _text, read_by=TESTS)
SELFTEST_REPORT = Variable("GGUF_PARITY_SELFTEST_REPORT", "path", None, "where tests/selftest writes its kill "
                           "table", _path, shown="a temporary folder", read_by=TESTS)

VARIABLES: tuple[Variable, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Variable))
