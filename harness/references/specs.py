"""Reference specs `hf:PATH`, `spm:PATH` and `tekken:PATH`: checked once, then run as a contained child.

    hf:DIR            DIR/tokenizer.json (+ DIR/tokenizer_config.json when present), HF `tokenizers`
    hf:FILE.json      that tokenizer.json (+ a tokenizer_config.json beside it)
    spm:FILE.model    a SentencePiece model (+ a tokenizer_config.json beside it), `sentencepiece`
    spm:DIR           DIR/tokenizer.model
    tekken:FILE.json  a Mistral tekken file, `mistral_common`'s Tekkenizer (tiktoken underneath)
    tekken:DIR        DIR/tekken.json

The reference's library is imported only in the Python reference child
(`harness.children.python_child`), the one every `--engine MODULE:CALLABLE`
runs in: a crash or a hang costs one case, as for any engine. Its address
space is capped as a llama.cpp worker's is (`--memory-limit`, by default 4 GiB
or half the RAM), its load by the engine load timeout and each request by
`--engine-timeout`; the reference's file is refused above its size limit
(`harness.files.input_limits.tokenizer_file_limit`) before any child starts. The child is
handed the GGUF path at `hello` like any engine, and ignores it: the
reference's own file comes in the `reference` argument.

The reference's file and the `tokenizer_config.json` beside it are a model folder's files:
read only inside their folder, only as regular files (`harness.models.folder_files`: a link
that leaves the folder, a FIFO or a device is refused, naming it), and copied once per
process into a private folder. Every reader of the harness and the child itself open that
copy (`ReferenceSpec.path`), never the user's folder; messages name the user's file
(`ReferenceSpec.source`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..environment import child_env, child_memory
from ..errors import SetupError
from ..files.input_limits import loads, read_tokenizer_file, tokenizer_file_limit
from ..models import folder_files
from ..subjects.client import RemoteEngine
from ..subjects.records import NotApplicable
from .classify import outcome_ids

EXTRA = "pip install 'gguf-parity[reference]'"
# kind -> (the child's factory, the modules it needs, the file a folder must hold)
KINDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "hf": ("harness.references.hf:load", ("tokenizers",), "tokenizer.json"),
    "spm": ("harness.references.spm:load", ("sentencepiece",), "tokenizer.model"),
    "tekken": ("harness.references.tekken:load", ("mistral_common", "tiktoken"), "tekken.json"),
}
NOT_APPLICABLE_TYPE = "NotApplicable"
CONFIG = "tokenizer_config.json"  # read beside the file by `hf:` and `spm:` (`harness.references.hf.config_beside`)
WITH_CONFIG = ("hf", "spm")
MAX_TEKKEN_SPECIALS = 1 << 16


@dataclass(frozen=True)
class ReferenceSpec:
    """A parsed reference spec: its kind, the private copy of its file that the harness and the child read
    (`path`), and the file as the user named it (`source`, its folder resolved)."""

    kind: str
    path: Path
    source: Path | None = None

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.source or self.path}"


def is_reference(spec: str | None) -> bool:
    """True for `hf:...`, `spm:...` and `tekken:...` (these prefixes are reserved, like `cmd:`)."""
    return bool(spec) and str(spec).partition(":")[0] in KINDS and ":" in str(spec)


def parse(spec: str) -> ReferenceSpec:
    """The spec checked: a known kind, a file that exists, read as a model folder's file is read (inside its
    folder, regular, within its size limit: `harness.models.folder_files`) and copied, with the
    tokenizer_config.json beside it, into a private folder that the harness and the child read from;
    `SetupError` (exit 2) naming what is wrong."""
    kind, _, raw = spec.partition(":")
    if kind not in KINDS:
        raise SetupError(f"reference {spec!r}: unknown kind {kind!r} (known: {', '.join(f'{k}:PATH' for k in KINDS)})")
    if not raw:
        raise SetupError(f"reference {spec!r}: no path after {kind}:")
    given = Path(raw).expanduser().absolute()
    folder, name = (given, KINDS[kind][2]) if given.is_dir() else (given.parent, given.name)
    source = Path(os.path.realpath(folder)) / name  # the folder as named (a link to it is the user's); not the file
    if not folder_files.present(source):
        raise SetupError(f"reference {spec!r}: no such file {source}")
    try:
        path = _private(kind, source, _identity(source), _identity(source.with_name(CONFIG)))
    except SetupError as exc:
        raise SetupError(f"reference {spec!r}: {exc}") from None
    if kind == "tekken":
        _check_tekken(spec, path, source)
    return ReferenceSpec(kind, path, source)


def _identity(path: Path) -> tuple[int, ...]:
    """What tells a changed file from the one copied before (nothing for a file that is not there)."""
    try:
        info = os.stat(path)
    except OSError:
        return ()
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


@lru_cache(maxsize=16)
def _private(kind: str, source: Path, *identity: tuple[int, ...]) -> Path:
    """The private copy of `source` (and of the tokenizer_config.json beside it, for `hf:` and `spm:`), made
    once per file and process: what every reader and the reference child open, never the user's folder."""
    names = [(source.name, tokenizer_file_limit(source))]
    if kind in WITH_CONFIG:
        names.append((CONFIG, tokenizer_file_limit(Path(CONFIG))))
    return folder_files.private_copy(source.parent, names) / source.name


@lru_cache(maxsize=8)
def _check_tekken(spec: str, path: Path, source: Path) -> None:
    """A tekken file's special-token count within bounds: mistral-common builds each filler token one by
    one, so `default_num_special_tokens = 2**31` once took 23 GB before failing (the child's cap stops it
    too, after minutes; this says why at once)."""
    try:
        data = loads(read_tokenizer_file(path), str(source))
    except ValueError as exc:
        raise SetupError(f"reference {spec!r}: {exc}") from None
    config = data.get("config") if isinstance(data, dict) else None
    count = config.get("default_num_special_tokens") if isinstance(config, dict) else None
    if count is not None and (type(count) is not int or not 0 <= count <= MAX_TEKKEN_SPECIALS):
        raise SetupError(f"reference {spec!r}: config.default_num_special_tokens is {count!r}; at most "
                         f"{MAX_TEKKEN_SPECIALS:,} (Mistral's files have 1,000)")


def missing(kind: str) -> str | None:
    """Why a `kind:` reference cannot run here (a missing library), or None."""
    need = [name for name in KINDS[kind][1] if importlib.util.find_spec(name) is None]
    if need:
        return f"a {kind}: reference needs {', '.join(need)}: {EXTRA}"
    return None


def child_argv(kind: str) -> list[str]:
    """The reference child's command: `-P`, so that no module of the current directory (a model folder,
    say) can stand in for the reference's library; its address space capped (`child_memory`:
    --memory-limit or the workers' default)."""
    return [sys.executable, "-P", "-m", "harness.children.python_child", "--engine", KINDS[kind][0],
            "--memory-limit", str(child_memory())]


def reference_factory(spec: str, *, args: dict[str, str], timeout: float) -> Callable[[Path], Any]:
    """GGUF path -> a contained engine handle serving the reference (as `harness.runs.engine.load_engine` returns).

    `SetupError` for a bad spec or a missing library, before anything starts.
    """
    ref = parse(spec)
    reason = missing(ref.kind)
    if reason:
        raise SetupError(reason)
    argv, env = child_argv(ref.kind), child_env()
    child_args = {**args, "reference": str(ref.path)}
    return lambda path: ReferenceClient(argv, Path(path), args=child_args, timeout=timeout, env=env)


@dataclass(frozen=True)
class PartlyApplicable(NotApplicable):
    """A case the reference answered for some flag pairs only: not applicable as a whole today.

    `pairs` holds the ids per flag pair (`harness.golden.records.FLAGS` order), None where
    the reference cannot express the pair; the three-way check reads them
    (`reference_ids`), today's per-case records cannot.
    """

    pairs: tuple[tuple[int, ...] | None, ...] = field(default=())


def reference_ids(outcome: object) -> list[list[int] | None] | None:
    """The reference's ids per flag pair from a `ReferenceClient` outcome (`classify.outcome_ids`)."""
    return outcome_ids(outcome)


class ReferenceClient(RemoteEngine):
    """A `RemoteEngine` that takes a reference's "not applicable" for what it is.

    A reference answers a flag pair it cannot express with an error of type
    `NotApplicable` (`harness.references.flags.NotExpressible`). Today's per-case
    records hold all four flag pairs or none, so such a case is not applicable
    as a whole: counted apart, never a pass and never a finding. Only reference
    children get this reading; any other engine's `NotApplicable` error stays
    an engine error, so an engine under test cannot dodge a case that way.
    """

    def _case(self, case: dict, data: bytes, items: object) -> Any:
        if isinstance(items, list):
            reasons = [_not_applicable(item) for item in items]
            failed = any(reason is None and not _plain_ids(item) for item, reason in zip(items, reasons, strict=True))
            if any(reason is not None for reason in reasons) and not failed:  # a real error stays an engine error
                pairs = tuple(tuple(item["ids"]) if reason is None else None
                              for item, reason in zip(items, reasons, strict=True))
                reason = next(r for r in reasons if r is not None)
                return PartlyApplicable(reason, pairs) if any(p is not None for p in pairs) else NotApplicable(reason)
        return super()._case(case, data, items)


def _not_applicable(item: object) -> str | None:
    """The reason of a `NotApplicable` error object, or None."""
    error = item.get("error") if isinstance(item, dict) else None
    if isinstance(error, dict) and error.get("type") == NOT_APPLICABLE_TYPE:
        return str(error.get("message", ""))
    return None


def _plain_ids(item: object) -> bool:
    ids = item.get("ids") if isinstance(item, dict) else None
    return isinstance(ids, list) and all(type(i) is int for i in ids)
