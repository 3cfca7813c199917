"""The list of known llama.cpp crashes: upstream bugs that must not fail a run, but stay visible.

`harness/data/corpora/known_crashes.json` (package data) holds a JSON list of entries:

    [{"id": "invalid-codepoint",
      "models": ["*"],                       # fnmatch globs over model short names
      "signature": "invalid codepoint",      # must occur in the crash's stderr or reason
      "description": "...", "upstream": "..."}]

An oracle crash whose model matches one of an entry's globs and whose
stderr/reason contains the entry's signature is a *known* crash: the report
lists it under `known_oracle_crashes` with the entry id, and it does not make
the exit status 1. Runs of whitespace are collapsed on both sides before the
substring test, since llama.cpp's stderr and the golden records indent
`what():` lines differently. An entry only ever matches crashes: a mismatch
or an engine error is never hidden by it. Policy: docs/known-crashes.md.

    known = load(DEFAULT_FILE)
    entry = known.match("gpt-2", {"reason": "killed by SIGABRT", "stderr": "... invalid codepoint"})
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import SetupError
from ..files import input_limits

DEFAULT_FILE = Path(__file__).resolve().parents[1] / "data" / "corpora" / "known_crashes.json"  # package data
DISABLED = "none"
FIELDS = ("id", "models", "signature", "description", "upstream")
MIN_SIGNATURE = 8  # shorter substrings ("abort", "GGML") would match crashes nobody has looked at
ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*\Z")


class KnownCrashesError(ValueError):
    """The known-crashes file is missing, not JSON, or has a malformed entry (named in the message)."""


def _squeezed(text: str) -> str:
    return " ".join(str(text).split())


@dataclass(frozen=True)
class KnownCrash:
    """One known llama.cpp crash: which models, which stderr text, and what upstream knows."""

    id: str
    models: tuple[str, ...]
    signature: str
    description: str
    upstream: str

    def covers(self, model: str) -> bool:
        return any(fnmatch.fnmatchcase(model, glob) for glob in self.models)

    def matches(self, model: str, crash: dict) -> bool:
        """True when `model` is covered and the signature occurs in the crash's stderr or reason."""
        if not self.covers(model):
            return False
        said = _squeezed(f"{crash.get('reason', '')}\n{crash.get('stderr', '')}")
        return _squeezed(self.signature) in said

    def as_dict(self) -> dict:
        return {"id": self.id, "models": list(self.models), "signature": self.signature,
                "description": self.description, "upstream": self.upstream}


@dataclass(frozen=True)
class KnownCrashes:
    """The loaded list (possibly empty) and where it came from (None when disabled)."""

    entries: tuple[KnownCrash, ...] = ()
    source: str | None = None

    def match(self, model: str, crash: dict | None) -> KnownCrash | None:
        """The first entry that matches this crash of `model`, or None (a new crash)."""
        if not crash:
            return None
        return next((e for e in self.entries if e.matches(model, crash)), None)

    def describe(self) -> dict[str, dict]:
        """Entry id -> its definition, as written into report.json."""
        return {e.id: e.as_dict() for e in self.entries}


NONE = KnownCrashes()


def load(path: str | Path) -> KnownCrashes:
    """Read and validate a known-crashes file; `KnownCrashesError` naming the entry and field.

    Read as a side file (`harness.files.input_limits.read_side_json`): a regular file of bounded
    size, so `--known-crashes /dev/zero` or a FIFO is one line, not memory until the kernel steps in.
    """
    path = Path(path)
    try:
        raw = input_limits.read_side_text(path, "known-crashes file")
    except OSError as exc:
        raise KnownCrashesError(f"cannot read the known-crashes file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise KnownCrashesError(f"cannot read the known-crashes file: {exc}") from None
    try:
        data = input_limits.loads(raw, str(path))
    except ValueError as exc:
        raise KnownCrashesError(f"{path} is not valid JSON: {exc}") from None
    return KnownCrashes(parse(data, where=str(path)), source=str(path))


def parse(data, *, where: str = "known crashes") -> tuple[KnownCrash, ...]:
    """Validated entries from the decoded JSON list."""
    if not isinstance(data, list):
        raise KnownCrashesError(f"{where}: the top level must be a JSON list of entries, "
                                f"not {type(data).__name__}")
    entries, seen = [], set()
    for index, raw in enumerate(data):
        entry = _entry(raw, where=f"{where}: entry {index}")
        if entry.id in seen:
            raise KnownCrashesError(f"{where}: entry {index}: id {entry.id!r} is used twice")
        seen.add(entry.id)
        entries.append(entry)
    return tuple(entries)


def _entry(raw, *, where: str) -> KnownCrash:
    if not isinstance(raw, dict):
        raise KnownCrashesError(f"{where}: must be an object with {', '.join(FIELDS)}")
    if isinstance(raw.get("id"), str):
        where = f"{where} (id {raw['id']!r})"
    missing = [f for f in FIELDS if f not in raw]
    unknown = sorted(set(raw) - set(FIELDS))
    if missing:
        raise KnownCrashesError(f"{where}: missing field {', '.join(repr(f) for f in missing)}")
    if unknown:
        raise KnownCrashesError(f"{where}: unknown field {', '.join(repr(f) for f in unknown)} "
                                f"(known: {', '.join(FIELDS)})")
    for name in ("id", "signature", "description", "upstream"):
        if not isinstance(raw[name], str) or not raw[name].strip():
            raise KnownCrashesError(f"{where}: field {name!r} must be a non-empty string")
    _check_id(raw["id"], where)
    _check_models(raw["models"], where)
    if len(raw["signature"].strip()) < MIN_SIGNATURE:
        raise KnownCrashesError(f"{where}: field 'signature' {raw['signature']!r} is too short to be specific "
                                f"(at least {MIN_SIGNATURE} characters of the crash's stderr)")
    return KnownCrash(id=raw["id"], models=tuple(raw["models"]), signature=raw["signature"],
                      description=raw["description"], upstream=raw["upstream"])


def _check_id(value: str, where: str) -> None:
    if not ID_PATTERN.match(value):
        raise KnownCrashesError(f"{where}: field 'id' {value!r} must be lowercase letters, digits and '-'")


def _check_models(value, where: str) -> None:
    if not isinstance(value, list) or not value:
        raise KnownCrashesError(f"{where}: field 'models' must be a non-empty list of model-name globs")
    for glob in value:
        if not isinstance(glob, str) or not glob.strip():
            raise KnownCrashesError(f"{where}: field 'models' holds {glob!r}; each must be a non-empty string "
                                    "(an fnmatch glob over model short names, e.g. \"*\" or \"pre-whitespace\")")


def from_option(value: str | None) -> KnownCrashes:
    """What `--known-crashes` names: a file, `none` (no list), or None for the shipped default.

    The default list ships as package data, so it is always read (a copy without it is a broken
    install: one line, exit 2, never a run that quietly fails on every known crash).
    """
    if value is not None and value.strip().lower() == DISABLED:
        return NONE
    if value is None:
        return load(DEFAULT_FILE)
    return load(value)


# --- the command-line option (run, compare, merge-reports) -----------------------------------

def add_option(parser) -> None:
    """`--known-crashes FILE|none` on an argparse parser."""
    parser.add_argument("--known-crashes", default=None, metavar="FILE",
                        help="known llama.cpp crashes, shown but not failing the run "
                             "(default harness/data/corpora/known_crashes.json; 'none': every crash fails)")


def from_args(args) -> KnownCrashes:
    """The list `--known-crashes` names; a `SetupError` (exit 2) when it is unreadable or malformed."""
    try:
        return from_option(args.known_crashes)
    except KnownCrashesError as exc:
        raise SetupError(str(exc)) from None
