"""HF tokenizers (the `tokenizers` package, Rust) as a peer of bench/bench_tokenize.py, single-threaded.

The peer is a `tokenizer.json` built with the `tokenizers` library from a byte-level
BPE GGUF: the GGUF's token texts and merges as they are (they are already GPT-2
byte-level strings, as in the original file), the pre-tokenizer's expressions as
`Split(..., "isolated")` stages followed by `ByteLevel(use_regex=False)`, and
`ignore_merges` as the GGUF says. That is how the originals of Llama-3 and Qwen2
are written; the bench checks its ids against llama.cpp's on every pass and
reports where they differ, so a peer that is not the same tokenizer shows.

`tokenizers` runs `encode_batch` on a thread pool; `single_threaded()` sets
RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false before it is imported, so the
batch figures compare one core with one core.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def single_threaded() -> None:
    """One thread for HF tokenizers (call before `tokenizers` is imported)."""
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def version() -> str | None:
    try:
        import tokenizers
    except ImportError:
        return None
    return str(tokenizers.__version__)


def build_json(path: Path) -> str | None:
    """A `tokenizer.json` (as a string) for a byte-level BPE GGUF, None for any other vocabulary."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    from tokenizer.gguf import reader as gguf
    from tokenizer.pretokenize import behaviours
    from tokenizer.vocab import load_vocab

    vocab = load_vocab(gguf.read(path))
    if vocab.vocab_type != "bpe" or vocab.model != "gpt2":
        return None
    pre = behaviours.get(vocab.pre_type)
    if not pre.byte_encode or any("AFMoE" in p or "Han}" in p for p in pre.patterns):
        return None
    merges = [(a.decode("utf-8"), b.decode("utf-8")) for a, b in vocab.merges]
    model = models.BPE(vocab={t.decode("utf-8"): i for t, i in vocab.token_to_id.items()}, merges=merges,
                       ignore_merges=vocab.ignore_merges)
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in pre.patterns]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    return str(tok.to_str())


def load(json_text: str) -> Any:
    """A fresh HF tokenizer (its word cache empty) from `build_json`'s text."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(json_text)
