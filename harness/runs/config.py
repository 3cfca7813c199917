"""What `run` and `compare` were asked to do: `RunConfig`, built by the CLI commands."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..models.shipped import project_root
from ..oracle.known_crashes import NONE, KnownCrashes
from .shard import Shard

FOUND_DIR = project_root() / "corpora" / "found"


@dataclass(frozen=True)
class RunConfig:
    """Everything `run` was asked to do; built by `harness.commands.run` from the CLI."""

    models: tuple[str, ...]
    report_dir: Path
    corpora: tuple[Path, ...] = ()
    default_corpora: bool = True
    case_ids: tuple[str, ...] = ()
    fuzz: int = 0
    seed: int | None = None
    engine: str | None = None
    engine_args: tuple[tuple[str, str], ...] = ()  # --engine-arg KEY=VALUE, passed to the engine factory
    engine_timeout: float = 30.0  # seconds per request to a contained engine before it counts as hung
    allow_flakes: bool = False  # engine flakes (harness.subjects.client) are listed but do not make the exit 1
    jobs: int = 1
    timeout: float = 60.0
    memory_limit: int | None = None  # bytes per llama.cpp worker; None: harness.oracle.worker_limits.default_memory()
    found_dir: Path | None = FOUND_DIR
    hypothesis_db: Path | None = None  # None: the project's (harness.inputs.fuzz.database_dir)
    quiet: bool = False
    known_crashes: KnownCrashes = NONE
    expect_refusal: bool = False  # the models are hostile files: both refusing is the expected agreement
    shard: Shard | None = None  # --shard K/N: only that part of the work (harness.runs.shard)
    reference: str | None = None  # --reference hf:PATH|spm:PATH: the original tokenizer (runs/reference.py)
    reference_args: tuple[tuple[str, str], ...] = ()  # --reference-arg KEY=VALUE (spm: add_bos=, add_eos=)
