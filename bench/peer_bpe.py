"""Pure-Python BPE peers for bench/bench_tokenize.py, built from a byte-level GGUF (gpt-2).

- `tiktoken._educational.SimpleBytePairEncoding` (tiktoken on PyPI; the module is
  pure Python: a regex split, then each word merged by the lowest-ranked pair, no
  cache). Its ranks come from the GGUF: a token's bytes (the byte-level characters
  mapped back) rank as its id, which for gpt-2 is 256 + the merge's index, as in
  tiktoken's own r50k_base.
- OpenAI's gpt-2 `src/encoder.py` (`--peer-file PATH`; not on PyPI, so not
  shipped here): its `Encoder` takes the GGUF's token texts and merges as they
  are, and caches each word, as transformers' slow GPT2Tokenizer does.

Each peer is timed once on the cold corpus with a fresh instance; its ids are
compared with llama.cpp's.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# tiktoken's r50k_base pattern (gpt-2's), as tiktoken_ext/openai_public.py spells it.
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _gguf_tokens(path: Path) -> tuple[list[str], list[str], list[int]]:
    from tokenizer.gguf import reader as gguf

    meta = gguf.read(path).metadata
    return (list(meta["tokenizer.ggml.tokens"]), list(meta["tokenizer.ggml.merges"]),
            [int(t) for t in meta["tokenizer.ggml.token_type"]])


def educational(path: Path) -> tuple[str, Any]:
    import tiktoken
    from tiktoken import _educational

    from tokenizer.unicode import char_to_byte

    tokens, _, types = _gguf_tokens(path)
    to_byte = char_to_byte()
    ranks = {bytes(to_byte[c] for c in text): i for i, (text, t) in enumerate(zip(tokens, types)) if t == 1}
    enc = _educational.SimpleBytePairEncoding(pat_str=R50K_PATTERN, mergeable_ranks=ranks)
    return f"tiktoken {tiktoken.__version__} `_educational`", lambda text: enc.encode(text, visualise=None)


def gpt2_encoder(path: Path, encoder_py: Path) -> tuple[str, Any]:
    spec = importlib.util.spec_from_file_location("gpt2_encoder", encoder_py)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {encoder_py}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tokens, merges, _ = _gguf_tokens(path)
    enc = module.Encoder(encoder={t: i for i, t in enumerate(tokens)},
                         bpe_merges=[tuple(m.split(" ")) for m in merges])
    return "OpenAI gpt-2 `src/encoder.py`", enc.encode


def bench(path: Path, text: bytes, oracle: Any, ours_mbs: float, *, peer_file: Path | None,
          clock: Callable[[], float] = time.process_time) -> list[dict]:
    """One timed pass per peer that can be built here; a peer that cannot is reported as such."""
    makers = [lambda: educational(path)]
    if peer_file is not None:
        makers.append(lambda: gpt2_encoder(path, peer_file))
    expected = oracle.tokenize(text, add_special=False, parse_special=False)
    decoded = text.decode("utf-8")
    rows = []
    for make in makers:
        try:
            name, encode = make()
        except ImportError as e:
            rows.append({"peer": f"not run ({e})", "peer_mbs": 0.0, "ours_mbs": ours_mbs,
                         "ours_over_peer": float("nan"), "agreement": "-"})
            continue
        start = clock()  # the bench's clock, as for ours
        ids = encode(decoded)
        seconds = clock() - start
        same = sum(a == b for a, b in zip(ids, expected))
        agreement = "same" if ids == expected else f"{same}/{len(expected)} positions"
        peer_mbs = len(text) / 1e6 / seconds
        rows.append({"peer": name, "peer_mbs": peer_mbs, "ours_mbs": ours_mbs,
                     "ours_over_peer": ours_mbs / peer_mbs, "agreement": agreement})
    return rows
