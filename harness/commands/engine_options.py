"""The engine options `run` and `compare` share: --engine, --engine-arg, --engine-timeout, --allow-flakes.

Also where a non-default engine's own files go: its fuzz finds and its
Hypothesis example database belong to the user, under the report directory
(or `--found-dir`), never in this project's `corpora/found/`.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from ..errors import SetupError
from ..runs.config import FOUND_DIR
from ..subjects.spec import DEFAULT_ENGINE, DEFAULT_ENGINE_TIMEOUT, is_ours, parse_engine_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", default=None, metavar="MODULE:CALLABLE|cmd:COMMAND",
                        help=f"the engine under test (default {DEFAULT_ENGINE}, in-process); MODULE:CALLABLE "
                             "runs a Python factory in a contained child, cmd:\"COMMAND LINE\" any program "
                             "speaking docs/engine-protocol.md; hf:PATH / spm:PATH the model's original "
                             "tokenizer (docs/references.md)")
    parser.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="an option for the engine's factory or child (repeatable)")
    parser.add_argument("--engine-timeout", type=float, default=DEFAULT_ENGINE_TIMEOUT, metavar="SECONDS",
                        help="a contained engine's request taking longer is a hang: an engine error for "
                             f"that case, the engine restarted (default {DEFAULT_ENGINE_TIMEOUT:g})")
    parser.add_argument("--allow-flakes", action="store_true",
                        help="an engine flake (the engine's process hung, exited or broke the protocol once, "
                             "and a fresh process answered the re-check) is listed in the report but does not "
                             "make the exit status 1")


def config_fields(args: argparse.Namespace) -> dict:
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
    """Where fuzz finds and the Hypothesis example database go (RunConfig fields).

    Our own engine keeps the project's corpora/found/ and .hypothesis/ (later
    runs replay them); anyone else's finds, and any run with `--reference`, are theirs: `<report>/found/` unless
    `--found-dir`, with the example database in `.hypothesis/` inside it
    (`$GGUF_PARITY_HYPOTHESIS_DB` still wins).
    """
    if is_ours(args.engine) and not getattr(args, "reference", None):  # a reference's finds are the user's too
        return {"found_dir": args.found_dir.absolute() if args.found_dir else FOUND_DIR}
    found = (args.found_dir or Path(args.report) / "found").absolute()  # workers run elsewhere
    from ..inputs.fuzz import DB_ENV  # late: importing Hypothesis would slow down every --help

    return {"found_dir": found, "hypothesis_db": Path(os.environ.get(DB_ENV) or found / ".hypothesis")}
