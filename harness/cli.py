"""`python -m harness`: the command line.

Exit codes: 0 success (for checks: everything matched), 1 a check found a
difference, a crash or an engine error, 2 usage or set-up errors.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .models import SetupError

# subcommand -> module in harness.commands; modules load only when their command runs.
COMMANDS = {
    "fetch": "fetch",
    "inspect": "inspect",
    "run": "run",
    "compare": "compare",
    "merge-reports": "merge_reports",
    "record": "record",
    "drift": "drift",
    "synth": "synth",
    "selftest": "selftest",
}

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description="Check GGUF tokenizers against llama.cpp, token by token.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"harness.commands.{module_name}")
        doc = (module.__doc__ or "").strip()
        summary = doc.splitlines()[0] if doc else ""
        p = sub.add_parser(name, help=summary, description=doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return args._run(args)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `... | head`: the reader left, nothing more to say
        sys.stderr.close()
        return 0
