"""Convert an original tokenizer folder with llama.cpp's own convert_hf_to_gguf.py --vocab-only.

Runs the pinned sdist's converter offline, in a venv of its own built once
(~/.cache/gguf-parity/venvs/convert-<version>/; harness/models/convert.py). What the
converter decided is printed and written beside the GGUF as X.convert.json: its
pre-tokenizer fingerprint (chkhsh), the name it chose, or its refusal. A folder
without config.json gets a minimal one (and one without tokenizer_config.json,
for a tokenizer.json, a minimal one), and the command says so.

    python -m harness convert path/to/hf-folder --out vocab.gguf
    python -m harness convert --real            # every entry of the real set -> <cache>/real-gguf/

A folder holding tekken.json (mistral-common's format) is converted with the
converter's --mistral-format, given a minimal params.json when it has none.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# What `convert` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "converted",
    1: "llama.cpp's converter refused the folder: a result about it, recorded in X.convert.json, not a harness error",
    2: "bad input or set-up",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", nargs="?", type=Path, metavar="HF_DIR",
                        help="a folder holding tokenizer.json, tokenizer.model or tekken.json")
    parser.add_argument("--out", type=Path, metavar="FILE.gguf", help="the GGUF to write (with HF_DIR)")
    parser.add_argument("--architecture", metavar="CLASS",
                        help="the model class for a synthesized config.json (default: guessed, "
                             "LlamaForCausalLM or BertModel for a WordPiece tokenizer.json)")
    parser.add_argument("--real", action="store_true",
                        help="convert every entry of the real set (python -m harness fetch --real first)")
    parser.add_argument("--out-dir", type=Path, metavar="DIR",
                        help="with --real: where the GGUFs go (default: <cache>/real-gguf/)")


def run(args: argparse.Namespace) -> int:
    from ..errors import SetupError
    from ..models import convert

    if args.real:
        if args.folder is not None or args.out is not None:
            raise SetupError("convert --real takes no HF_DIR and no --out (use --out-dir)")
        return _convert_real(args.out_dir)
    if args.folder is None or args.out is None:
        raise SetupError("convert needs HF_DIR and --out FILE.gguf (or --real)")
    record = convert.convert(args.folder, args.out, architecture=args.architecture)
    print(f"{args.folder}: {convert.describe(record)}")
    print(f"recorded in {convert.sidecar_path(args.out)}")
    return 1 if record["refusal"] else 0


def _convert_real(out_dir: Path | None) -> int:
    from ..files.atomic import check_output_folder
    from ..models import convert, real_set

    out_dir = check_output_folder(out_dir or real_set.real_gguf_dir(), "--out-dir")
    refused = 0
    for entry in real_set.load_manifest():
        if not real_set.is_fetched(entry):
            raise real_set.SetupError(f"{entry.name} is not fetched; run: {real_set.FETCH_REAL_COMMAND}")
        out = out_dir / f"{entry.name}.gguf"
        record = convert.convert(entry.folder(), out, architecture=entry.architecture)
        refused += bool(record["refusal"])
        print(f"{entry.name}: {convert.describe(record)}")
    print(f"{refused} refusal(s); GGUFs and their .convert.json records in {out_dir}")
    return 1 if refused else 0
