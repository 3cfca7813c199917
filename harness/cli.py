"""`python -m harness`: the command line.

Exit codes: `harness.errors` defines them, the README's "Exit codes" table says what each
means. An input or set-up error is one line `error: ...` naming the thing, never a traceback
(`--debug` shows it); our own bug prints its traceback and exits 3.

Only the command that runs is imported (`fetch --help` loads no pandas,
Hypothesis or engine): a command module imports its heavy parts inside `run`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import textwrap
import traceback
import zlib

from .errors import EXIT_BUG, EXIT_CODES, EXIT_USAGE, SetupError
from .runs.interrupts import Interrupted, raising_on_signals

# subcommand -> module in harness.commands; modules load only when their command runs.
COMMANDS = {
    "fetch": "fetch",
    "convert": "convert",
    "inspect": "inspect",
    "tokenize": "tokenize",
    "repair": "repair",
    "run": "run",
    "compare": "replay",
    "merge-reports": "merge_reports",
    "diff": "diff",
    "record": "record",
    "drift": "drift",
    "builds": "builds",
    "rerecord": "rerecord",
    "bump-pin": "bump_pin",
    "ledger": "ledger",
    "synth": "synth",
    "peers": "peers",
    "chat": "chat",
    "selftest": "selftest",
}

# An optional dependency's top-level module -> the extra of pyproject.toml that installs it. One missing is
# a set-up error naming the extra (exit 2), never an internal error (tests/commands/test_missing_extra.py).
OPTIONAL_MODULES = {
    **dict.fromkeys(("llama_cpp", "pandas", "hypothesis", "jinja2", "jsonschema", "huggingface_hub", "pytest"),
                    "harness"),
    **dict.fromkeys(("tokenizers", "sentencepiece", "mistral_common", "transformers"), "reference"),
    "torch": "transformers",
    "tiktoken": "bench",
}

EXIT_HELP = "exit status:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES.items())
# commands whose --model may be a URL (harness.models.remote): they take --offline and --header-cap
REMOTE_MODELS = ("inspect", "tokenize", "run", "compare", "record")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `only`, just that command's module is imported (the others stay unloaded)."""
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description="Check GGUF tokenizers against llama.cpp, token by token.",
        epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"harness.commands.{module_name}")
        doc = (module.__doc__ or "").strip()
        summary = doc.split("\n", 1)[0] if doc else ""
        p = sub.add_parser(name, help=summary, description=doc, epilog=exit_help(name, module),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of an error")
        module.add_arguments(p)
        if name in REMOTE_MODELS:
            _add_remote_options(p)
        p.set_defaults(_run=module.run)
    return parser


def exit_help(name: str, module) -> str:
    """A command's exit-status table: the README's "Exit codes", each code with what this command means by
    it under it (the module's `EXIT_STATUS`), or in its place where the command uses a code otherwise
    (`EXIT_INSTEAD`: the README's section names such a command). tests/commands/test_exit_help.py holds
    every command's table to the README's."""
    own, instead = getattr(module, "EXIT_STATUS", {}), getattr(module, "EXIT_INSTEAD", {})
    lines = ["exit status:"]
    for code, meaning in EXIT_CODES.items():
        first = f"{name}: {instead[code]}" if code in instead else meaning
        lines += textwrap.wrap(first, 100, initial_indent=f"  {code:<4} ", subsequent_indent=" " * 7)
        if code in own:
            lines += textwrap.wrap(f"{name}: {own[code]}", 100, initial_indent=" " * 9, subsequent_indent=" " * 11)
    return "\n".join(lines)


def _add_remote_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--offline", action="store_true", default=False,
                        help="a URL model's header from the cache only, no request (as HF_HUB_OFFLINE=1)")
    parser.add_argument("--header-cap", default=None, metavar="SIZE",
                        help="a URL model's header: at most SIZE bytes fetched in all, in windows from 2M "
                             "doubling (default 64M, at most 1G; $GGUF_PARITY_HEADER_CAP); a server without "
                             "Range support is refused above it")
    parser.add_argument("--fetch-timeout", default=None, metavar="SECONDS",
                        help="a URL model's header fetch must end within SECONDS (default 300; "
                             "$GGUF_PARITY_FETCH_TIMEOUT); each request also times out after 10 s "
                             "connecting, 30 s without a byte")


def _configure_remote(args: argparse.Namespace) -> None:
    """Apply --offline, --header-cap and --fetch-timeout (harness.models.remote; imported only when given)."""
    timeout = getattr(args, "fetch_timeout", None)
    if getattr(args, "offline", False) or getattr(args, "header_cap", None) or timeout:
        from .models import remote as remote_gguf

        cap = remote_gguf.parse_size(args.header_cap) if args.header_cap else None
        deadline = remote_gguf.parse_deadline(timeout) if timeout else None
        remote_gguf.configure(cap=cap, offline=args.offline, deadline=deadline)


def _command_in(argv: list[str]) -> str | None:
    """The subcommand of `argv` (its first word that is not an option), if it is a known one."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in COMMANDS else None


def input_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input or set-up (exit 2, one line), not a bug of ours."""
    from tokenizer.errors import GGUFError

    from .files.input_limits import InputTooLarge
    from .files.jsonl import JSONLError
    from .golden.files import GoldenError
    from .inputs.corpus import CorpusError
    from .oracle.known_crashes import KnownCrashesError

    return (SetupError, GGUFError, CorpusError, GoldenError, JSONLError, KnownCrashesError,
            InputTooLarge, OSError, UnicodeDecodeError, zlib.error, RecursionError, MemoryError)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(_command_in(argv))
    except ImportError as exc:  # a command module whose dependency is not installed: its extra named
        return _report_error(exc, debug="--debug" in argv)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    try:
        _configure_remote(args)
        with raising_on_signals():  # SIGINT/SIGTERM unwind the command, so its children end with it
            return int(args._run(args))
    except Interrupted as exc:
        print(f"{exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `... | head`: the reader left, nothing more to say
        sys.stderr.close()
        return 0
    except Exception as exc:  # noqa: BLE001 - sorted into input errors (exit 2) and our bugs (exit 3)
        return _report_error(exc, debug=debug)


def _report_error(exc: Exception, *, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    missing = missing_extra(exc)
    if missing is not None:
        print(f"error: {missing}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, input_errors()):
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    if not debug:
        traceback.print_exc()
    print(f"internal error (a bug in gguf-parity, please report it): {one_line(exc)}", file=sys.stderr)
    return EXIT_BUG


def missing_extra(exc: BaseException) -> str | None:
    """The line for a module of an extra that is not installed (`OPTIONAL_MODULES`), else None.

    Only a module that cannot be found at all: one that is installed but fails on import is a
    broken install or our bug, and keeps its traceback.
    """
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.partition(".")[0]
    extra = OPTIONAL_MODULES.get(top)
    if extra is None or _importable(top):
        return None
    return f"{top} is not installed; it comes with the [{extra}] extra: pip install \"gguf-parity[{extra}]\""


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def one_line(exc: BaseException) -> str:
    """The exception as one line: its message (first line), named by type when that says more."""
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc).strip().split("\n", 1)[0] or type(exc).__name__
    if isinstance(exc, (RecursionError, MemoryError, UnicodeDecodeError, zlib.error)):
        text = f"{type(exc).__name__}: {text}"
    return text
