"""Tokenize one text with llama.cpp and our engine, side by side: what ids for this text?

    python -m harness tokenize --model llama-bpe -p "Hello world"
    echo "Hello" | python -m harness tokenize --model x.gguf --stdin --ids

The options follow llama.cpp's `llama-tokenize`: the text from -p, --file or --stdin (its bytes
as they are; a file is read whole, at most 16 MB); BOS and the model's other added tokens unless
--no-bos; special tokens parsed in the text unless --no-parse-special. --engine SPEC and
--reference hf:DIR|spm:FILE|tekken:FILE add a column (the engine under test, the model's original
tokenizer). Each token is shown with its id, its piece made visible and its bytes; the first row
where the columns part is marked `<<`. --ids prints the id lists alone, --show-count the number of
tokens, --json everything for machines (pieces as hex).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..errors import SetupError
from ..files.input_limits import MAX_CORPUS_BYTES, read_capped
from . import engine_options

# What `tokenize` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "every column gives llama.cpp's ids",
    1: "a column differs from llama.cpp's (a column that failed counts as differing)",
}

LLAMA = "llama.cpp"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", "-m", required=True, metavar="NAME|PATH|URL",
                        help="a shipped vocabulary's name, a .gguf file or a URL (its header)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-p", "--prompt", metavar="TEXT", help="the text to tokenize")
    source.add_argument("--file", "-f", type=Path, metavar="FILE", help="tokenize the bytes of FILE")
    source.add_argument("--stdin", action="store_true", help="tokenize standard input")
    parser.add_argument("--no-bos", dest="add_special", action="store_false",
                        help="add_special=false: no BOS (or other token the model adds)")
    parser.add_argument("--add-special", dest="add_special", action="store_true", default=True,
                        help="add_special=true (the default)")
    parser.add_argument("--no-parse-special", dest="parse_special", action="store_false", default=True,
                        help="parse_special=false: special tokens' text in the input is plain text")
    parser.add_argument("--ids", action="store_true", help="print each column's ids as a list, nothing else")
    parser.add_argument("--show-count", action="store_true", help="print each column's number of tokens")
    parser.add_argument("--json", action="store_true", help="print JSON for machines")
    parser.add_argument("--engine", default=None, metavar="SPEC",
                        help="add a column: the engine under test (as `run --engine`)")
    parser.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="an option for the engine's factory or child (repeatable)")
    parser.add_argument("--reference", default=None, metavar="hf:PATH|spm:PATH|tekken:PATH",
                        help="add a column: the model's original tokenizer (docs/references.md)")
    parser.add_argument("--timeout", type=float, default=engine_options.DEFAULT_ENGINE_TIMEOUT, metavar="SECONDS",
                        help="each side must answer within SECONDS (default %(default)g)")


def run(args: argparse.Namespace) -> int:
    from ..runs.tokenize_columns import columns_for

    data = _text(args)
    started = time.perf_counter()
    columns = columns_for(args, data)
    elapsed = time.perf_counter() - started
    agree = all(c.ids == columns[0].ids and c.error is None for c in columns)
    if args.json:
        print(json.dumps({"text_hex": data.hex(), "add_special": args.add_special, "parse_special": args.parse_special,
                          "agree": agree, "seconds": round(elapsed, 3),
                          "columns": [c.as_dict() for c in columns]}, indent=1))
    elif args.ids:
        for column in columns:
            print(f"{column.name:<12} {column.error or column.ids}")
    else:
        from ..runs.tokenize_columns import table
        print(table(columns))
    if args.show_count and not args.json:
        for column in columns:
            print(f"{column.name}: {len(column.ids)} tokens" if column.error is None else f"{column.name}: failed")
    if not agree:
        print(f"the columns differ (llama.cpp's ids are the reference){_first(columns)}", file=sys.stderr)
    return 0 if agree else 1


def _first(columns) -> str:
    from ..runs.tokenize_columns import first_difference
    index = first_difference(columns)
    return "" if index is None else f": first at token {index}"


def _text(args: argparse.Namespace) -> bytes:
    if args.prompt is not None:
        return args.prompt.encode("utf-8", "surrogateescape")
    if args.file is not None:
        try:
            return read_capped(args.file, MAX_CORPUS_BYTES, "the text to tokenize")
        except FileNotFoundError:
            raise SetupError(f"{args.file}: no such file") from None
    data = sys.stdin.buffer.read(MAX_CORPUS_BYTES + 1)
    if len(data) > MAX_CORPUS_BYTES:
        raise SetupError(f"standard input is over {MAX_CORPUS_BYTES:,} bytes, the limit of one text")
    return data
