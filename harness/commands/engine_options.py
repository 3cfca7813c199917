"""The engine options `run` and `compare` share: --engine, --engine-arg, --engine-timeout, --allow-flakes.

What they become in a `RunConfig` (and where a non-default engine's own files go) is
`harness.runs.config`, where the whole config is built.
"""

from __future__ import annotations

import argparse

from ..subjects.spec import DEFAULT_ENGINE, DEFAULT_ENGINE_TIMEOUT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", default=None, metavar="MODULE:CALLABLE|cmd:COMMAND",
                        help=f"the engine under test (default {DEFAULT_ENGINE}, in-process); MODULE:CALLABLE "
                             "runs a Python factory in a contained child, cmd:\"COMMAND LINE\" any program "
                             "speaking docs/engine-protocol.md; hf:PATH / spm:PATH / tekken:PATH the model's original "
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
