"""A `--model` (name, path or URL) resolved to one absolute file, and a check that both sides read the same bytes.

Every command resolves its `--model` arguments here, in the parent process,
before any worker starts. The result is absolute: the oracle's workers run
with the project root as their working directory, and the engine runs in the
caller's, so a relative path handed on as given would name two different
files.

`fingerprint(path)` is the file's size and the sha256 of its first
`FINGERPRINT_BYTES`; `check_same(path, expected, side)` refuses with a
`SetupError` (exit 2) when a side sees other bytes than the parent resolved.

A URL (`http(s)://`, `hf://`) resolves to its header, fetched with Range
requests (`harness.models.remote`), and a file cut after its metadata to a
vocab-only copy of that metadata (`harness.models.header_only`); `source_of(path)`
then says where the checked file came from, for the report and the golden.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SetupError
from .shipped import SHIPPED, shipped_path

FINGERPRINT_BYTES = 4 << 20  # the GGUF header and the tokenizer arrays of every shipped vocabulary


@dataclass(frozen=True)
class Fingerprint:
    """Size and head hash of a file: enough to tell two files apart, cheap on a multi-GB model."""

    size: int
    head_sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {"size": self.size, "head_sha256": self.head_sha256}


def resolve(name_or_path: str | os.PathLike[str]) -> Path:
    """A short name (`llama-spm`), a synthetic name or a path to a GGUF file, as an absolute existing path.

    A path is taken relative to the current directory of this (the parent)
    process. Raises `SetupError` naming the fetch or build command when a
    shipped or synthetic vocabulary is not in the cache, and listing the
    known names when the name is unknown.
    """
    text = os.fspath(name_or_path)
    if text.startswith(("http://", "https://", "hf://")):
        return _remote(text)
    path = Path(text).expanduser()
    if path.suffix == ".gguf" or os.sep in text or path.exists():
        if not path.is_file():
            raise SetupError(f"no such GGUF file: {path.absolute()}")
        return _header_only(path.resolve())
    if text in SHIPPED:
        return shipped_path(text).resolve()
    synthetic = _synthetic(text)
    if synthetic is not None:
        return synthetic.resolve()
    raise SetupError(
        f"unknown vocabulary {text!r}: give a path to a .gguf file or one of: "
        + ", ".join(SHIPPED) + " (or a synthetic name: `python -m harness synth --list`)"
    )


_SOURCES: dict[Path, dict[str, Any]] = {}  # a checked file -> where it came from (URL, cut file)
_REMOTE: dict[str, Path] = {}  # URL -> checked file, once per process
_CUTS: dict[tuple[Path, int, int], Path] = {}  # (path, size, mtime) -> checked file


def source_of(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Where the file `resolve` returned came from, when it is not the file given: a URL, a cut file."""
    return _SOURCES.get(Path(path))


def attach_source(result: Any, path: Path | None, recorded: dict[str, Any] | None = None) -> None:
    """Name on a `ModelResult` where its checked file came from (a URL, a cut file), with a note saying so.

    `recorded` is a golden's `gguf.source`, used when `path` was not resolved from a URL or cut file here.
    """
    source = (source_of(path) if path is not None else None) or recorded
    if source:
        from .header_only import note

        result.source = source
        result.notes.append(note(source))


def _remote(url: str) -> Path:
    """The checked file of a URL: its header, and a vocab-only copy when the header is cut."""
    if url not in _REMOTE:
        from . import header_only
        from . import remote as remote_gguf  # here: an oracle worker needs neither

        header = remote_gguf.fetch_header(url)
        local = Path(header.path)
        cut = header_only.find_cut(local)
        checked = header_only.vocab_only(cut) if cut is not None else local
        _SOURCES[checked] = {**header.as_source(), "checked": "vocab-only copy" if cut else "whole file"}
        _REMOTE[url] = checked
    return _REMOTE[url]


def _header_only(path: Path) -> Path:
    """`path`, or the vocab-only copy of its metadata when it is cut after its metadata."""
    stat = path.stat()
    key = (path, stat.st_size, stat.st_mtime_ns)
    if key not in _CUTS:
        from . import header_only

        cut = header_only.find_cut(path)
        _CUTS[key] = path if cut is None else header_only.vocab_only(cut)
        if cut is not None:
            _SOURCES[_CUTS[key]] = {**cut.as_source(), "checked": "vocab-only copy"}
    return _CUTS[key]


def _synthetic(name: str) -> Path | None:
    """The cached file of a synthetic vocabulary (`rwkv-world`, `pre-qwen2`, ...), if `name` is one."""
    from . import synth  # here: synth needs numpy and the tokenizer, an oracle worker only `fingerprint`

    if name not in synth.RECIPES:
        return None
    path = synth.synthetic_path(name)
    if not path.is_file():
        raise SetupError(
            f"synthetic vocabulary {name!r} is not built ({path}); run: "
            f"{synth.SYNTH_COMMAND} {name}  (it needs the shipped vocabularies: python -m harness fetch)"
        )
    return path


def fingerprint(path: str | os.PathLike[str]) -> Fingerprint:
    """The file's size and the sha256 of its first FINGERPRINT_BYTES (`SetupError` if unreadable)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(FINGERPRINT_BYTES)
    except OSError as exc:
        raise SetupError(f"cannot read {path}: {exc.strerror or exc}") from None
    return Fingerprint(size, hashlib.sha256(head).hexdigest())


def check_same(path: str | os.PathLike[str], expected: Fingerprint, seen: Fingerprint | dict[str, Any],
               side: str) -> None:
    """Refuse (`SetupError`) when `side` saw other bytes at `path` than the parent resolved."""
    if isinstance(seen, dict):
        seen = Fingerprint(int(seen.get("size", -1)), str(seen.get("head_sha256", "")))
    if seen != expected:
        raise SetupError(
            f"{path}: {side} did not read the same file (size {seen.size} vs {expected.size}, "
            f"head sha256 {seen.head_sha256[:12]} vs {expected.head_sha256[:12]}); "
            "was it replaced during the run?"
        )
