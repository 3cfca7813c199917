"""One module per `python -m harness` subcommand.

Each module has a docstring whose first line is the command's help, and two
functions: `add_arguments(parser)` and `run(args) -> int` (the exit code).
May import: `harness`, `tokenizer` (the commands are the top floor).
"""
