"""A model named once: the argument as given, the file it resolves to, its short name, its metadata.

`open_model(arg)` resolves a `--model` argument (`harness.models.paths.resolve`) into a `Model`
that every stage of one model's check shares: the live run, the golden replay and the pytest
plugin gather its cases from it, the report names it by `name`, and `source` says where a URL
or a cut file came from. `metadata` is the file's GGUF metadata as our reader reads it, read
on first use and then kept until `forget_metadata()` (at the end of the model's check), so that
the corpus's vocabulary cases, the boundary probes, the documents and the token table read the
file once between them. The engine under test and llama.cpp still read
the file themselves: this copy only chooses inputs, it never stands in for either side.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, cast

from .paths import resolve, source_of
from .shipped import short_name


@dataclass(frozen=True)
class Model:
    """One model of a run. `arg` is how the user named it; `path` the absolute file checked."""

    arg: str
    path: Path
    name: str

    @property
    def metadata(self) -> Mapping[str, Any] | None:
        """The GGUF metadata (key -> value), or None when our reader refuses the file.

        A file our reader refuses may still be one llama.cpp loads (or refuses): the run records
        that; the inputs drawn from the metadata are then left out.
        """
        return self._read[0]

    def require_metadata(self) -> Mapping[str, Any]:
        """The GGUF metadata; the reader's own error (naming the offset and key) when it refuses the file."""
        metadata, error = self._read
        if metadata is None:
            raise cast(Exception, error)
        return metadata

    def forget_metadata(self) -> None:
        """Let the metadata go (read again if asked): a run holds every model it was given, and the
        metadata of a large vocabulary is tens of MiB."""
        self.__dict__.pop("_read", None)

    @cached_property
    def _read(self) -> tuple[Mapping[str, Any] | None, Exception | None]:
        from tokenizer import GGUFError
        from tokenizer.gguf import reader as gguf  # here, so the oracle side never needs the engines

        try:
            return dict(gguf.read(self.path).metadata), None
        except (GGUFError, OSError) as exc:
            return None, exc

    @property
    def source(self) -> dict[str, Any] | None:
        """Where the checked file came from when it is not the file given (a URL, a cut file)."""
        return source_of(self.path)


def open_model(arg: str | os.PathLike[str]) -> Model:
    """A `--model` argument (a shipped or synthetic name, a path, a URL) as a `Model`; `SetupError` if bad."""
    path = resolve(arg)
    return Model(os.fspath(arg), path, short_name(path))


def as_model(model: Model | str | os.PathLike[str]) -> Model:
    """`model` itself, or a `Model` of a GGUF file's path (for callers that hold a path only)."""
    if isinstance(model, Model):
        return model
    path = Path(model)
    return Model(os.fspath(model), path, short_name(path))
