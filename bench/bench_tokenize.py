"""Tokenize throughput and load time: our engines next to llama.cpp, in one run.

For every shipped vocabulary whose engine is registered (or those named), the
same multilingual text (every llama.cpp `.inp` test input plus prose in a dozen
scripts, repeated to `--size-kb`) is tokenized by `tokenizer.Tokenizer` and by
llama.cpp (`harness.oracle.llama.LlamaOracle`, vocab-only load, single thread), with
add_special=False, parse_special=False. Reported per vocabulary: MB/s of each,
their ratio, and the load-time ratio (best of `--repeat` loads each).
Targets (issue 4): tokenize >= 0.25x llama.cpp on SPM (and UGM), >= 0.5x on BPE
(and WPM); load no slower than 2x llama.cpp's vocab-only load.

    python bench/bench_tokenize.py                   # all registered engines
    python bench/bench_tokenize.py llama-spm phi-3 --size-kb 512
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.models.paths import resolve
from harness.models.shipped import SHIPPED, vocab_path
from harness.oracle.llama import LlamaOracle
from tokenizer import Tokenizer
from tokenizer.engines import ENGINES
from tokenizer.gguf import reader as gguf
from tokenizer.vocab import MODELS

TARGETS = {"spm": 0.25, "ugm": 0.25, "bpe": 0.5, "wpm": 0.5, "rwkv": 0.5, "plamo2": 0.25}

PROSE = (
    "The quick brown fox jumps over the lazy dog. It's 3:14 pm, isn't it? We'll see; they've gone.",
    "Le cœur a ses raisons que la raison ne connaît point. Où est la bibliothèque ?",
    "Der Größenwahn überwältigte die Straßenbahnfahrer während der Überfahrt.",
    "В чащах юга жил бы цитрус? Да, но фальшивый экземпляр!",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από το τεμπέλικο σκυλί.",
    "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧。",
    "私はガラスを食べられます。それは私を傷つけません。東京は大きな都市です。",
    "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요.",
    "أنا قادر على أكل الزجاج و هذا لا يؤلمني.",
    "मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती।",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\nprint(fib(30))  # 832040\n",
    "Emoji: 🦙🚀👍🏽 👨‍👩‍👧 — “quotes” ‘and’ «guillemets» … ½ ¾ №",
)


def bench_text(size_kb: int, *, seed: int = 1234) -> bytes:
    """The shared input: every shipped `.inp` test input and the prose, then seeded
    recombinations of their words and spacing (so words recur as in real text, but
    no long stretch repeats), cut to size."""
    parts = [p.encode() for p in PROSE]
    for name in SHIPPED:
        inp = vocab_path(name).with_name(f"ggml-vocab-{name}.gguf.inp")
        if inp.is_file():
            parts.extend(inp.read_bytes().split(b"\n__ggml_vocab_test__\n"))
    text = bytearray(b"\n".join(parts))
    words = re.findall(rb"\s*\S+", bytes(text))
    rng = random.Random(seed)
    while len(text) < size_kb * 1024:
        text += b"".join(rng.choice(words) for _ in range(rng.randint(5, 40))) + b"\n"
    return bytes(text[: size_kb * 1024])


def vocab_type(path: Path) -> str:
    return MODELS.get(gguf.read(path).metadata.get("tokenizer.ggml.model"), ("?",))[0]


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def bench_one(name: str, text: bytes, repeat: int) -> dict:
    path = resolve(name)
    kind = vocab_type(path)
    load_ours, ours = best_of(repeat, lambda: Tokenizer.from_gguf(path))
    load_llama, oracle = best_of(repeat, lambda: LlamaOracle(path))
    kw = {"add_special": False, "parse_special": False}
    t_llama, ids_llama = best_of(repeat, lambda: oracle.tokenize(text, **kw))
    t_ours, ids_ours = best_of(1, lambda: ours.tokenize(text, **kw))  # a cold cache, the fair case
    mb = len(text) / 1e6
    return {
        "name": name, "type": kind, "ours_mbs": mb / t_ours, "llama_mbs": mb / t_llama,
        "ratio": t_llama / t_ours, "target": TARGETS.get(kind, 0.0),
        "load_ours": load_ours, "load_llama": load_llama, "load_ratio": load_ours / load_llama,
        "same_ids": ids_ours == ids_llama,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="vocabularies (default: every registered engine's)")
    ap.add_argument("--size-kb", type=int, default=256, help="input size in KiB (default 256)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N for loads and llama.cpp")
    args = ap.parse_args(argv)
    names = args.names or [n for n in SHIPPED if vocab_path(n).is_file()
                           and vocab_type(vocab_path(n)) in ENGINES]
    text = bench_text(args.size_kb)
    print(f"input: {len(text)} bytes, multilingual; add_special=False parse_special=False")
    print(f"{'vocab':15s} {'type':6s} {'ours MB/s':>9s} {'llama MB/s':>10s} {'ratio':>6s} "
          f"{'target':>6s} {'load ours':>9s} {'load llama':>10s} {'load x':>6s} ids")
    failed = False
    for name in names:
        r = bench_one(name, text, args.repeat)
        ok = r["ratio"] >= r["target"] and r["load_ratio"] <= 2.0 and r["same_ids"]
        failed |= not ok
        print(f"{r['name']:15s} {r['type']:6s} {r['ours_mbs']:9.3f} {r['llama_mbs']:10.3f} "
              f"{r['ratio']:6.2f} {r['target']:6.2f} {r['load_ours']:8.3f}s {r['load_llama']:9.3f}s "
              f"{r['load_ratio']:6.2f} {'same' if r['same_ids'] else 'DIFFER'}"
              f"{'' if ok else '  <- misses a target'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
