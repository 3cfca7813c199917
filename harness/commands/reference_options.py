"""`run` / `compare --reference SPEC` and `--reference-arg KEY=VALUE`: the model's original tokenizer as a third side.

SPEC is `hf:PATH` (a folder holding tokenizer.json, or the file), `spm:PATH`
(a SentencePiece .model, or a folder holding tokenizer.model) or `tekken:PATH`
(a Mistral tekken.json, or a folder holding one); docs/references.md.
`--reference-arg` passes options to the reference, as `--engine-arg` does to an
engine (spm: `add_bos=true|false`, `add_eos=...`, what the original adds where
no tokenizer_config.json says it; tekken: the same, BOS only by default). What they become in a `RunConfig` is
`harness.runs.config.reference_fields`.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reference", default=None, metavar="hf:PATH|spm:PATH|tekken:PATH",
                        help="also run the model's original tokenizer and compare three ways: engine, "
                             "llama.cpp, original, and the original's decode of llama.cpp's ids "
                             "(docs/references.md); exit 0 only when all three agree")
    parser.add_argument("--reference-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="an option for the reference (spm:, tekken: add_bos=true|false, add_eos=...; repeatable)")

