"""What `run` and `compare` were asked to do: `RunConfig`, built here, once, from the parsed arguments.

`live_config` (`run`, and the pytest plugin) and `replay_config` (`compare`) are the only
places a `RunConfig` is made from a command line: models and families, corpora, fuzz budget,
worker limits, known crashes, shard, and the engine options with where a non-default
engine's own files go (its fuzz finds and Hypothesis example database belong to the user,
under the report directory or `--found-dir`, never in the package's `harness/data/corpora/found/`).
"""

from __future__ import annotations

import argparse
import math
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..environment_vars import HYPOTHESIS_DB, HYPOTHESIS_PROFILE, SWEEPS
from ..errors import SetupError
from ..models.families import members
from ..models.shipped import SHIPPED
from ..oracle import known_crashes, worker_limits
from ..oracle.known_crashes import NONE, KnownCrashes
from ..subjects.spec import DEFAULT_ENGINE, is_ours, parse_engine_args
from . import shard as sharding
from .shard import Shard

if TYPE_CHECKING:  # loaded when the options are read (`selection_fields`), so that --help stays light
    from ..compare.expected import ExpectedDifferences
    from .selection import LastRun, Tally

if TYPE_CHECKING:
    from .baseline import Baseline
    from .sweeps import SweepPlan

# The committed fuzz finds (package data: they ship in the wheel and every run of ours replays them).
FOUND_DIR = Path(__file__).resolve().parents[1] / "data" / "corpora" / "found"
PROFILE_ENV = HYPOTHESIS_PROFILE.name  # harness.inputs.fuzz.PROFILE_ENV; not imported, so --help stays light
SWEEPS_ENV = SWEEPS.name  # the --sweeps a three-way run takes when not given one (default: "default")


@dataclass(frozen=True)
class RunConfig:
    """Everything `run` or `compare` was asked to do; built by `live_config` or `replay_config`."""

    models: tuple[str, ...]
    report_dir: Path
    corpora: tuple[Path, ...] = ()
    default_corpora: bool = True
    case_ids: tuple[str, ...] = ()
    fuzz: int = 0
    seed: int | None = None
    seed_drawn: bool = False  # `run` without --seed: `seed` was drawn (printed, recorded); the example database is used
    engine: str | None = None
    engine_args: tuple[tuple[str, str], ...] = ()  # --engine-arg KEY=VALUE, passed to the engine factory
    engine_timeout: float = 30.0  # seconds per request to a contained engine before it counts as hung
    allow_flakes: bool = False  # engine flakes (harness.subjects.client) are listed but do not make the exit 1
    jobs: int = 1
    timeout: float = 60.0
    memory_limit: int | None = None  # bytes per llama.cpp worker; None: harness.environment.default_memory()
    found_dir: Path | None = None  # where fuzz finds are written (`live_config`: <report>/found or --found-dir)
    found_corpora: tuple[Path, ...] = ()  # folders of earlier finds read with the default corpora
    hypothesis_db: Path | None = None  # None: the project's (harness.inputs.fuzz.database_dir)
    quiet: bool = False
    known_crashes: KnownCrashes = NONE
    expect_refusal: bool = False  # the models are hostile files: both refusing is the expected agreement
    shard: Shard | None = None  # --shard K/N: only that part of the work (harness.runs.shard)
    reference: str | None = None  # --reference hf:PATH|spm:PATH|tekken:PATH: the original tokenizer (third_side.py)
    reference_args: tuple[tuple[str, str], ...] = ()  # --reference-arg KEY=VALUE (spm: add_bos=, add_eos=)
    long_docs: int = 0  # --long-docs: long documents per model (harness.runs.documents); `run` defaults to 1
    long_bytes: int = 132_000  # --long-bytes: the largest of them, in UTF-8 bytes
    calls: int = 0  # --calls: tokenize calls of one engine object in a row (harness.runs.calls); `run`: 12,000
    # --baseline REPORT: an earlier run whose differences are carried in and compared (harness.runs.baseline)
    baseline: Baseline | None = field(default=None, compare=False)
    # Selection and stopping, as pytest has them (harness.runs.selection), and an engine's known differences
    keyword: str | None = None  # -k EXPRESSION on case ids (and model names)
    last_failed: LastRun | None = field(default=None, compare=False)  # --lf/--ff: the --report folder's last failures
    failed_first: bool = False  # --ff: those first, then the rest (else --lf: only those)
    tally: Tally | None = field(default=None, compare=False)  # what the selection left out; -x/--maxfail N
    expected: ExpectedDifferences | None = field(default=None, compare=False)  # --expected-differences FILE
    sweeps: SweepPlan | None = field(default=None, compare=False)  # --sweeps: what to sweep (harness.runs.sweeps)

    @property
    def example_database(self) -> bool:
        """Whether the fuzzer replays and saves failures in the example database: not with a --seed given."""
        return self.seed is None or self.seed_drawn


def selected_models(args: argparse.Namespace, *, required: bool = True) -> tuple[str, ...]:
    """`--model` and `--family` expanded, in order, each model once; `SetupError` for a family with
    no models, or (when `required`) for no selection at all."""
    of_families = members(args.family)
    if args.family and not of_families:
        raise SetupError(f"family {', '.join(args.family)} has no models yet")
    names = tuple(dict.fromkeys([*args.model, *of_families]))
    if required and not names:
        raise SetupError("give --model NAME|PATH or --family FAMILY (shipped: " + ", ".join(SHIPPED) + ")")
    return names


def fuzz_budget(args: argparse.Namespace) -> int:
    if args.fuzz is not None:
        if args.fuzz < 0:
            raise SetupError("--fuzz must be 0 or more")
        return args.fuzz
    if HYPOTHESIS_PROFILE.get():
        from hypothesis import settings

        from ..inputs.fuzz import load_profile
        load_profile()
        return settings().max_examples
    return 0


# The long phases' budgets, by default and under the nightly profile: (documents, their largest size, calls).
# 12,000 calls reach past a 10,000th call whatever the corpus; the nightly goes to 1.1 MB and 40,000 calls
# (our engine: about 30 s per 1 MB document with llama.cpp's side, 3 ms per case of 4 calls).
LONG_DEFAULTS = {"default": (1, 132_000, 12_000), "nightly": (2, 1_100_000, 40_000)}


def long_fields(args: argparse.Namespace) -> dict:
    """RunConfig fields for --long-docs, --long-bytes and --calls (`SetupError` on a bad one)."""
    docs, size, calls = LONG_DEFAULTS["nightly" if HYPOTHESIS_PROFILE.get() == "nightly" else "default"]
    if getattr(args, "case", None) or getattr(args, "keyword", None) or getattr(args, "last_failed", False):
        docs, calls = 0, 0  # a reproduce command (--case ID), -k or --lf checks its cases, not new documents
    given = {"long_docs": getattr(args, "long_docs", None), "long_bytes": getattr(args, "long_bytes", None),
             "calls": getattr(args, "calls", None)}
    for key, value in given.items():
        if value is not None and value < 0:
            raise SetupError(f"--{key.replace('_', '-')} must be 0 or more")
    return {"long_docs": docs, "long_bytes": size, "calls": calls} | {k: v for k, v in given.items() if v is not None}


def sweep_fields(args: argparse.Namespace) -> dict:
    """The `sweeps` field (`SetupError` on a bad `--sweeps` or `--sweep-seconds`). Given, the sweeps run (they need
    `--reference`); not given, a three-way run over the default corpora sweeps what `$GGUF_PARITY_SWEEPS` says,
    else `default`, unless it is a reproduce line, -k or --lf. `default` is every sweep within
    `DEFAULT_SECONDS` per model; `--sweep-seconds` sets that budget for any value."""
    from ..inputs import sweeps as generators
    given = getattr(args, "sweeps", None)
    text = given if given is not None else SWEEPS.get() or "default"
    try:
        sizes = generators.parse(text)
    except ValueError as exc:
        raise SetupError(f"{'--sweeps' if given is not None else '$' + SWEEPS_ENV} {text!r}: {exc}") from None
    seconds = getattr(args, "sweep_seconds", None)
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise SetupError(f"--sweep-seconds {seconds:g}: must be more than 0")
    reference = getattr(args, "reference", None)
    if given is None:
        narrowed = getattr(args, "case", None) or getattr(args, "keyword", None) or getattr(args, "last_failed", False)
        if not reference or not getattr(args, "default_corpora", True) or narrowed:
            return {}
    elif sizes and not reference:
        raise SetupError("--sweeps needs --reference: a sweep screens the engine, llama.cpp and the original")
    if not sizes:
        return {}
    from .sweeps import SweepPlan
    budget = seconds if seconds is not None else generators.DEFAULT_SECONDS if text.strip() == "default" else None
    return {"sweeps": SweepPlan(sizes, seconds=budget)}


def live_config(args: argparse.Namespace) -> RunConfig:
    """`run`'s config from its parsed arguments."""
    limits = worker_limits.from_args(args)
    kwargs = found_fields(args) | reference_fields(args) | long_fields(args) | sweep_fields(args)
    return RunConfig(  # paths absolute once, here: workers run in another directory
        models=selected_models(args), report_dir=args.report.absolute(),
        corpora=tuple(c.absolute() for c in args.corpus),
        default_corpora=args.default_corpora, case_ids=tuple(args.case), fuzz=fuzz_budget(args),
        seed=args.seed if args.seed is not None else draw_seed(), seed_drawn=args.seed is None,
        jobs=limits.jobs, timeout=limits.timeout,
        memory_limit=limits.memory, quiet=args.quiet, known_crashes=known_crashes.from_args(args),
        expect_refusal=args.expect_refusal, shard=sharding.from_text(args.shard),
        **engine_fields(args), **kwargs, **selection_fields(args),
    )


def draw_seed() -> int:
    """A seed for a run given none: printed and recorded in report.json's meta, so `--seed N` repeats it."""
    return secrets.randbits(32)


def replay_config(args: argparse.Namespace) -> RunConfig:
    """`compare`'s config from its parsed arguments."""
    return RunConfig(models=selected_models(args, required=False), report_dir=args.report.absolute(), quiet=args.quiet,
                     known_crashes=known_crashes.from_args(args), expect_refusal=args.expect_refusal,
                     shard=sharding.from_text(args.shard), **engine_fields(args), **reference_fields(args),
                     **selection_fields(args))


def selection_fields(args: argparse.Namespace) -> dict:
    """RunConfig fields for -k, --lf, --ff, -x/--maxfail and --expected-differences (`SetupError` on a bad one,
    before any work): the -k expression parsed, the last report and the expected-differences file read."""
    from ..compare import expected
    from . import selection
    fields: dict = {}
    if getattr(args, "keyword", None):
        selection.keyword_matcher(args.keyword)  # a bad expression: exit 2 now, not at the first model
        fields["keyword"] = args.keyword
    last = None
    if getattr(args, "last_failed", False) or getattr(args, "failed_first", False):
        fields["last_failed"] = last = selection.read_last_run(args.report.absolute())
        fields["failed_first"] = not getattr(args, "last_failed", False)  # --lf with --ff: only the failures
    if getattr(args, "expected_differences", None) is not None:
        fields["expected"] = expected.load(args.expected_differences)
    fields["tally"] = selection.tally_from(args, last, fields.get("expected"))
    return fields


def engine_fields(args: argparse.Namespace) -> dict:
    """RunConfig fields for the engine options (`SetupError` on a bad one)."""
    timeout = args.engine_timeout
    if not math.isfinite(timeout) or not 0 < timeout <= 86400:
        raise SetupError(f"--engine-timeout {timeout:g}: must be more than 0 and at most 86400 seconds")
    pairs = tuple(parse_engine_args(args.engine_arg).items())
    if pairs and is_ours(args.engine):
        raise SetupError(f"--engine-arg: the default engine ({DEFAULT_ENGINE}) takes no options")
    return {"engine": args.engine, "engine_args": pairs, "engine_timeout": timeout,
            "allow_flakes": bool(args.allow_flakes)}


def found_fields(args: argparse.Namespace) -> dict:
    """Where fuzz finds go, which earlier finds are read, and the Hypothesis example database (RunConfig fields).

    A run's finds are written under its report folder, `<report>/found/` (or `--found-dir DIR`: to add them
    to the package's committed corpus, give `--found-dir harness/data/corpora/found`), never into the
    checkout unasked; later runs with the same report folder read them back. Our own engine also reads the
    committed finds (`FOUND_DIR`) and keeps the project's .hypothesis/; anyone else's run, and any run with
    `--reference`, has its example database in `.hypothesis/` inside the finds' folder
    (`$GGUF_PARITY_HYPOTHESIS_DB` still wins).
    """
    found = (args.found_dir or Path(args.report) / "found").absolute()  # workers run elsewhere
    if is_ours(args.engine) and not getattr(args, "reference", None):  # a reference's finds are the user's too
        return {"found_dir": found, "found_corpora": (FOUND_DIR,)}
    return {"found_dir": found, "hypothesis_db": HYPOTHESIS_DB.get() or found / ".hypothesis"}


def reference_fields(args: argparse.Namespace) -> dict:
    """RunConfig fields for `--reference` and `--reference-arg` (`SetupError` on a bad one, before any work)."""
    from ..references.specs import is_reference
    spec = getattr(args, "reference", None)
    pairs = tuple(parse_engine_args(getattr(args, "reference_arg", None) or []).items())
    if spec is None:
        if pairs:
            raise SetupError("--reference-arg needs --reference")
        return {}
    if not is_reference(spec):
        raise SetupError(f"--reference {spec!r}: expected hf:PATH, spm:PATH or tekken:PATH")
    return {"reference": spec, "reference_args": pairs}
