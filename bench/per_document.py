"""The job users run, for bench/bench_tokenize.py: a corpus one document at a time, and as one batch.

Documents: the non-empty lines of the corpus (harness/data/corpora/diverse.txt by default: 2,158
paragraphs of about 140 characters in 26 languages). Per pass, with one tokenizer
object for all documents of the pass and a fresh one each pass (no word cached by an
earlier pass):

- per document: ours `Tokenizer.tokenize(doc)` per document (a `str`, as a user has
  it), llama.cpp `llama_tokenize` per document (given the UTF-8 bytes), HF
  tokenizers `encode(doc)` per document;
- per document again: ours on the same documents with the same tokenizer object, every
  word cached by then (what the cold figure costs beyond merging new words; llama.cpp
  keeps no cache, so its figure is the same both times);
- batch: ours `Tokenizer.tokenize_batch(docs)`, HF `encode_batch(docs)` single-threaded.
  llama.cpp has no batch call: its per-document loop is its figure.

add_special=False, parse_special=False (HF: add_special_tokens=False). Best of the
passes for each; the sides interleaved within a pass. Every pass checks every
document's ids against llama.cpp's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import peer_hf

KW = {"add_special": False, "parse_special": False}


def documents(corpus: Path) -> list[str]:
    """The corpus's non-empty lines, each a document (its newline kept off)."""
    return [line for line in corpus.read_text(encoding="utf-8").split("\n") if line.strip()]


def bench(path: Path, docs: list[str], passes: int, oracle: Any, hf_json: str | None,
          timed: Callable[..., tuple[float, Any]]) -> dict[str, Any]:
    """Seconds (best of `passes`) per side and job, and whether each gave llama.cpp's ids."""
    from tokenizer import Tokenizer

    raw = [d.encode("utf-8") for d in docs]
    best: dict[str, float] = {}
    same: dict[str, bool] = {}

    def keep(key: str, seconds: float, ids: list[list[int]], expected: list[list[int]]) -> None:
        best[key] = min(best.get(key, float("inf")), seconds)
        same[key] = same.get(key, True) and ids == expected

    for _ in range(passes):
        ours = Tokenizer.from_gguf(path)
        t_ours, ids_ours = timed(_each, ours.tokenize, docs, **KW)
        t_llama, expected = timed(_each, oracle.tokenize, raw, **KW)
        keep("llama", t_llama, expected, expected)
        keep("ours", t_ours, ids_ours, expected)
        keep("ours_again", *timed(_each, ours.tokenize, docs, **KW), expected)
        keep("ours_batch", *timed(Tokenizer.from_gguf(path).tokenize_batch, docs, **KW), expected)
        if hf_json is not None:
            t, enc = timed(_each, peer_hf.load(hf_json).encode, docs, add_special_tokens=False)
            keep("hf", t, [e.ids for e in enc], expected)
            t, enc = timed(peer_hf.load(hf_json).encode_batch, docs, add_special_tokens=False)
            keep("hf_batch", t, [e.ids for e in enc], expected)
    mb = sum(map(len, raw)) / 1e6
    row: dict[str, Any] = {"docs": len(docs), "mb": mb, "seconds": best, "same_ids": same}
    row["ratio"] = best["llama"] / best["ours"]
    if "hf" in best:
        row["ratio_hf"] = best["hf"] / best["ours"]
        row["batch_ratio_hf"] = best["hf_batch"] / best["ours_batch"]
    return row


def _each(encode: Callable[..., Any], items: list[Any], **kw: Any) -> list[Any]:
    """One call per document, as a user's loop makes them."""
    return [encode(item, **kw) for item in items]


def long_call_hf(hf_json: str, text: bytes, expected: list[int], passes: int,
                 timed: Callable[..., tuple[float, Any]]) -> dict[str, Any]:
    """HF tokenizers on the whole cold corpus in one `encode` call, a fresh instance a pass."""
    decoded = text.decode("utf-8")
    seconds, same = float("inf"), True
    for _ in range(passes):
        hf = peer_hf.load(hf_json)
        t, enc = timed(hf.encode, decoded, add_special_tokens=False)
        seconds, same = min(seconds, t), same and enc.ids == expected
    return {"hf_mbs": len(text) / 1e6 / seconds, "hf_same_ids": same}
