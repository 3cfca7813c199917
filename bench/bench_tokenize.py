"""Tokenize throughput, load time and memory: our engines next to llama.cpp, in one run.

Per vocabulary (default: one or more of every engine type), add_special=False,
parse_special=False, best of `--passes`, ours and llama.cpp interleaved:

- cold: harness/data/corpora/diverse.txt (300,000 characters in 26 languages and 14 scripts,
  83% of its distinct words occurring once; corpora/build_diverse.py), each pass
  with a fresh `Tokenizer` (no cache warmed by an earlier pass);
- warm: the recombined corpus (the shipped `.inp` test inputs and a dozen lines
  of prose, then seeded recombinations of their words to the same byte size), so
  the per-word caches hit on almost every word; also a fresh `Tokenizer` a pass;
- load: `Tokenizer.from_gguf` against llama.cpp's vocab-only load, best of
  `--repeat`, and the first load in a fresh process;
- RSS: the memory a loaded tokenizer adds to a fresh process, ours and llama.cpp's
  (each in its own subprocess, after importing its package);
- peer (gpt-2 only): a pure-Python BPE built from the same GGUF's tokens and merges
  (`tiktoken._educational`; `--peer-file` adds OpenAI's gpt-2 `src/encoder.py`);
- per document (bench/per_document.py): the corpus's lines one call each, one
  tokenizer object for all of a pass (then ours again on the same object, every word
  cached), and as one `Tokenizer.tokenize_batch` call;
- HF tokenizers (bench/peer_hf.py; byte-level BPE vocabularies, a `tokenizer.json`
  built from the GGUF, single-threaded) on the long call, per document and
  `encode_batch`.

llama.cpp is `harness.oracle.llama.LlamaOracle`: vocab-only load, one thread. Times
are this process's CPU time by default (`--clock wall` for elapsed time): on a
machine shared with other jobs, elapsed time mostly measures the wait. Ratios
are ours / llama.cpp throughput, and llama.cpp's load time / ours (above 1: ours
is faster). Targets: cold BPE and SPM >= 1.3x, WPM and UGM >= 1.0x,
load >= 1.2x, ours >= 3x the pure-Python peer; per document BPE and SPM >= 1.0x,
WPM and UGM >= 0.7x, and >= 0.5x HF tokenizers; the batch >= 1.0x HF's
`encode_batch`. Every pass checks that ours and llama.cpp give the same ids.

    python bench/bench_tokenize.py                       # the default set, markdown tables
    python bench/bench_tokenize.py gpt-2 --passes 5 --json out.json
    python bench/bench_tokenize.py --all                 # every shipped vocabulary we support

Exit status: 0 when measured (a missed target is marked, not an error; --strict
makes it 1), 1 when ours and llama.cpp gave different ids, 2 on a usage or set-up
error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import peer_hf, per_document  # noqa: E402  (after the path: bench/ as a package)

DIVERSE = ROOT / "harness" / "data" / "corpora" / "diverse.txt"
DEFAULT = ("llama-bpe", "qwen2", "gpt-2", "gemma-4", "llama-spm", "phi-3", "bert-bge",
           "nomic-bert-moe", "rwkv-world", "plamo2")
TARGETS = {"bpe": 1.3, "spm": 1.3, "wpm": 1.0, "ugm": 1.0}  # cold, ours / llama.cpp
DOC_TARGETS = {"bpe": 1.0, "spm": 1.0, "wpm": 0.7, "ugm": 0.7}  # per document, ours / llama.cpp
LOAD_TARGET, PEER_TARGET, HF_DOC_TARGET, HF_BATCH_TARGET = 1.2, 3.0, 0.5, 1.0
KW = {"add_special": False, "parse_special": False}

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

# Run in a fresh interpreter: the RSS a loaded tokenizer adds, and the first load's time.
RSS_CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[3])
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
side, path = sys.argv[1], sys.argv[2]
clock = time.process_time if sys.argv[4] == "cpu" else time.perf_counter
if side == "ours":
    from tokenizer import Tokenizer
    load = lambda: Tokenizer.from_gguf(path)
else:
    from harness.oracle.llama import LlamaOracle
    load = lambda: LlamaOracle(path)
gc.collect()
before = rss()
start = clock()
loaded = load()
seconds = clock() - start
gc.collect()
print(json.dumps({"before": before, "after": rss(), "first_load": seconds}))
"""


class BenchError(Exception):
    """A usage or set-up problem: printed as one line, exit 2."""


def warm_text(size: int, *, seed: int = 1234) -> bytes:
    """The recombined corpus: every shipped `.inp` test input and the prose, then
    seeded recombinations of their words and spacing (words recur, but no long
    stretch repeats), cut to `size` bytes."""
    from harness.models.shipped import SHIPPED, vocab_path

    parts = [p.encode() for p in PROSE]
    for name in SHIPPED:
        inp = vocab_path(name).with_name(f"ggml-vocab-{name}.gguf.inp")
        if inp.is_file():
            parts.extend(inp.read_bytes().split(b"\n__ggml_vocab_test__\n"))
    text = bytearray(b"\n".join(parts))
    words = re.findall(rb"\s*\S+", bytes(text))
    rng = random.Random(seed)
    while len(text) < size:
        text += b"".join(rng.choice(words) for _ in range(rng.randint(5, 40))) + b"\n"
    return bytes(text[:size])


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
clock = CLOCKS["cpu"]  # set by --clock


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = clock()
    result = fn(*args, **kwargs)
    return clock() - start, result


def vocab_type(path: Path) -> str:
    from tokenizer.gguf import reader as gguf
    from tokenizer.vocab import MODELS

    return MODELS.get(gguf.read(path).metadata.get("tokenizer.ggml.model"), ("?",))[0]


def throughput(path: Path, text: bytes, passes: int, oracle: Any) -> dict[str, Any]:
    """Best of `passes` for each side, each of ours with a fresh Tokenizer."""
    from tokenizer import Tokenizer

    best_ours = best_llama = float("inf")
    same = True
    for _ in range(passes):
        fresh = Tokenizer.from_gguf(path)
        t_ours, ids_ours = timed(fresh.tokenize, text, **KW)
        t_llama, ids_llama = timed(oracle.tokenize, text, **KW)
        best_ours, best_llama = min(best_ours, t_ours), min(best_llama, t_llama)
        same &= ids_ours == ids_llama
    mb = len(text) / 1e6
    return {"ours_mbs": mb / best_ours, "llama_mbs": mb / best_llama,
            "ratio": best_llama / best_ours, "same_ids": same, "n_ids": len(ids_llama)}


def loads(path: Path, repeat: int) -> tuple[float, float]:
    from harness.oracle.llama import LlamaOracle
    from tokenizer import Tokenizer

    best_ours = best_llama = float("inf")
    for _ in range(repeat):
        best_ours = min(best_ours, timed(lambda: Tokenizer.from_gguf(path))[0])
        t, oracle = timed(lambda: LlamaOracle(path))
        oracle.close()
        best_llama = min(best_llama, t)
    return best_ours, best_llama


def rss_child(side: str, path: Path, clock_name: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", RSS_CHILD, side, str(path), str(ROOT), clock_name],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"the {side} RSS subprocess failed on {path.name}: {tail}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["added"] = out["after"] - out["before"]
    return out


def bench_one(name: str, cold: bytes, warm: bytes, args: argparse.Namespace) -> dict[str, Any]:
    from harness.models.paths import resolve
    from harness.oracle.llama import LlamaOracle

    path = resolve(name)
    row: dict[str, Any] = {"name": name, "type": vocab_type(path)}
    row["load_ours"], row["load_llama"] = loads(path, args.repeat)
    row["load_ratio"] = row["load_llama"] / row["load_ours"]
    with LlamaOracle(path) as oracle:
        row["cold"] = throughput(path, cold, args.passes, oracle)
        if args.warm:
            row["warm"] = throughput(path, warm, args.passes, oracle)
        if row["type"] == "bpe" and name == "gpt-2" and args.peer:
            from bench import peer_bpe

            row["peers"] = peer_bpe.bench(path, cold, oracle, row["cold"]["ours_mbs"],
                                          peer_file=args.peer_file, clock=clock)
        hf_json = peer_hf.build_json(path) if args.hf and peer_hf.version() else None
        if hf_json is not None:
            expected = oracle.tokenize(cold, **KW)
            row["cold"].update(per_document.long_call_hf(hf_json, cold, expected, args.passes, timed))
        if args.docs:
            row["docs"] = per_document.bench(path, per_document.documents(args.docs_corpus), args.passes,
                                             oracle, hf_json, timed)
    if args.rss:
        row["rss_ours"] = rss_child("ours", path, args.clock)
        row["rss_llama"] = rss_child("llama", path, args.clock)
    return row


def mark(value: float, target: float | None) -> str:
    return "" if target is None or value >= target else " (miss)"


def tables(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    out = ["", "Cold: harness/data/corpora/diverse.txt, a fresh Tokenizer per pass", "",
           "| vocabulary | type | ours MB/s | llama.cpp MB/s | ratio | target | ids |",
           "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        c, t = r["cold"], TARGETS.get(r["type"])
        out.append(f"| {r['name']} | {r['type']} | {c['ours_mbs']:.2f} | {c['llama_mbs']:.2f} | "
                   f"**{c['ratio']:.2f}x**{mark(c['ratio'], t)} | {f'{t:.1f}x' if t else '-'} | "
                   f"{'same' if c['same_ids'] else 'DIFFER'} |")
    if args.warm:
        out += ["", "Warm: the recombined corpus (words recur), a fresh Tokenizer per pass", "",
                "| vocabulary | type | ours MB/s | llama.cpp MB/s | ratio | ids |", "|---|---|---:|---:|---:|---|"]
        for r in rows:
            w = r["warm"]
            out.append(f"| {r['name']} | {r['type']} | {w['ours_mbs']:.2f} | {w['llama_mbs']:.2f} | "
                       f"{w['ratio']:.2f}x | {'same' if w['same_ids'] else 'DIFFER'} |")
    out += ["", "Load (best of --repeat; first = the first load in a fresh process)", "",
            "| vocabulary | ours | llama.cpp | load ratio (llama.cpp / ours) | first ours | first llama.cpp |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        first = (f"{r['rss_ours']['first_load']:.3f} s | {r['rss_llama']['first_load']:.3f} s"
                 if args.rss else "- | -")
        out.append(f"| {r['name']} | {r['load_ours']:.3f} s | {r['load_llama']:.3f} s | "
                   f"**{r['load_ratio']:.2f}x**{mark(r['load_ratio'], LOAD_TARGET)} | {first} |")
    if args.rss:
        out += ["", "RSS a loaded tokenizer adds to a fresh process (each side in its own subprocess)", "",
                "| vocabulary | ours MB | llama.cpp MB | ours / llama.cpp |", "|---|---:|---:|---:|"]
        for r in rows:
            o, ll = r["rss_ours"]["added"] / 1e6, r["rss_llama"]["added"] / 1e6
            out.append(f"| {r['name']} | {o:.1f} | {ll:.1f} | {o / ll if ll > 0 else float('nan'):.2f}x |")
    out += per_document_tables(rows)
    peers = [(r["name"], p) for r in rows for p in r.get("peers", [])]
    if peers:
        out += ["", "Pure-Python peer, cold corpus, same vocabulary (built from the GGUF)", "",
                "| vocabulary | peer | peer MB/s | ours MB/s | ours / peer | ids as llama.cpp |",
                "|---|---|---:|---:|---:|---|"]
        for name, p in peers:
            ratio = p["ours_over_peer"]
            shown = "not measured" if not p["peer_mbs"] else f"**{ratio:.1f}x**{mark(ratio, PEER_TARGET)}"
            out.append(f"| {name} | {p['peer']} | {p['peer_mbs']:.3f} | {p['ours_mbs']:.2f} | {shown} | "
                       f"{p['agreement']} |")
    return out


def per_document_tables(rows: list[dict[str, Any]]) -> list[str]:
    """The per-document and batch table, and HF tokenizers' long call, where measured."""
    out: list[str] = []
    docs = [r for r in rows if "docs" in r]
    if docs:
        d0 = docs[0]["docs"]
        out += ["", f"Per document: {d0['docs']:,} documents ({d0['mb']:.3f} MB), one call each, a fresh "
                "Tokenizer per pass; batch: one call for all", "",
                "| vocabulary | type | ours ms | llama.cpp ms | ours / llama.cpp | ours again ms | HF ms | "
                "ours / HF | batch ours ms | HF encode_batch ms | batch ours / HF | ids (ours, again, batch, HF) |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in docs:
            d, sec, t = r["docs"], r["docs"]["seconds"], DOC_TARGETS.get(r["type"])
            hf = (f"{sec['hf'] * 1e3:.0f} | **{d['ratio_hf']:.2f}x**{mark(d['ratio_hf'], HF_DOC_TARGET)}"
                  if "hf" in sec else "- | -")
            hfb = (f"{sec['hf_batch'] * 1e3:.0f} | **{d['batch_ratio_hf']:.2f}x**"
                   f"{mark(d['batch_ratio_hf'], HF_BATCH_TARGET)}" if "hf_batch" in sec else "- | -")
            same = ", ".join("same" if d["same_ids"].get(k, True) else "DIFFER"
                             for k in ("ours", "ours_again", "ours_batch", "hf"))
            out.append(f"| {r['name']} | {r['type']} | {sec['ours'] * 1e3:.0f} | {sec['llama'] * 1e3:.0f} | "
                       f"**{d['ratio']:.2f}x**{mark(d['ratio'], t)} | {sec['ours_again'] * 1e3:.0f} | {hf} | "
                       f"{sec['ours_batch'] * 1e3:.0f} | "
                       f"{hfb} | {same} |")
    hf_long = [r for r in rows if "hf_mbs" in r["cold"]]
    if hf_long:
        out += ["", "HF tokenizers, one long call (the cold corpus), single-threaded", "",
                "| vocabulary | ours MB/s | HF MB/s | ours / HF | HF ids |", "|---|---:|---:|---:|---|"]
        for r in hf_long:
            c = r["cold"]
            out.append(f"| {r['name']} | {c['ours_mbs']:.2f} | {c['hf_mbs']:.2f} | "
                       f"**{c['ours_mbs'] / c['hf_mbs']:.2f}x** | {'same' if c['hf_same_ids'] else 'DIFFER'} |")
    return out


def header(cold: bytes, warm: bytes, args: argparse.Namespace, argv: list[str]) -> list[str]:
    import numpy

    from harness.oracle.llama import LlamaOracle

    load = os.getloadavg()
    return [
        f"date {datetime.datetime.now():%Y-%m-%d %H:%M}; Python {platform.python_version()}, "
        f"numpy {numpy.__version__}; llama.cpp {LlamaOracle.build_info}; "
        f"HF tokenizers {peer_hf.version() or 'not installed'} (RAYON_NUM_THREADS=1); "
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {os.cpu_count()} CPUs",
        "command: python bench/bench_tokenize.py " + " ".join(argv),
        f"cold corpus: {args.corpus.name}, {len(cold):,} bytes; warm corpus: {len(warm):,} bytes; "
        f"best of {args.passes} passes, loads best of {args.repeat}; {args.clock} time; "
        "add_special=False parse_special=False",
    ]


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"vocabularies: shipped or synthetic names or .gguf paths "
                                             f"(default: {' '.join(DEFAULT)})")
    ap.add_argument("--all", action="store_true", help="every shipped vocabulary whose engine is registered")
    ap.add_argument("--corpus", type=Path, default=DIVERSE,
                    help="the cold corpus (default harness/data/corpora/diverse.txt)")
    ap.add_argument("--passes", type=int, default=3, help="tokenize passes per side, best kept (default 3)")
    ap.add_argument("--repeat", type=int, default=3, help="loads per side, best kept (default 3)")
    ap.add_argument("--no-warm", dest="warm", action="store_false", help="skip the warm corpus")
    ap.add_argument("--no-rss", dest="rss", action="store_false", help="skip the RSS subprocesses")
    ap.add_argument("--no-peer", dest="peer", action="store_false", help="skip the pure-Python peer")
    ap.add_argument("--peer-file", type=Path, metavar="ENCODER_PY",
                    help="also run OpenAI's gpt-2 src/encoder.py (a path to it) as a peer on gpt-2")
    ap.add_argument("--no-docs", dest="docs", action="store_false", help="skip the per-document and batch jobs")
    ap.add_argument("--docs-corpus", type=Path, default=DIVERSE,
                    help="the per-document corpus, one document a line (default harness/data/corpora/diverse.txt)")
    ap.add_argument("--no-hf", dest="hf", action="store_false", help="skip the HF tokenizers peer")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                    help="cpu: this process's CPU time (default; steady on a shared, loaded machine); "
                         "wall: elapsed time")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    if args.passes < 1 or args.repeat < 1:
        ap.error("--passes and --repeat must be at least 1")
    if not args.corpus.is_file():
        ap.error(f"no such corpus file: {args.corpus} (python corpora/build_diverse.py writes the default)")
    if not args.docs_corpus.is_file():
        ap.error(f"no such corpus file: {args.docs_corpus}")
    if args.peer_file and not args.peer_file.is_file():
        ap.error(f"no such file: {args.peer_file}")
    return args


def selection(args: argparse.Namespace) -> list[str]:
    from harness.models.paths import resolve
    from harness.models.shipped import SHIPPED, SetupError, vocab_path
    from tokenizer.engines import ENGINES

    if args.all:
        return [n for n in SHIPPED if vocab_path(n).is_file() and vocab_type(vocab_path(n)) in ENGINES]
    names = args.names or list(DEFAULT)
    for name in list(names):
        try:
            resolve(name)
        except SetupError as e:
            if args.names:
                raise BenchError(str(e)) from None
            print(f"skipped {name}: {e}", file=sys.stderr)
            names.remove(name)
    return names


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    global clock
    clock = CLOCKS[args.clock]
    peer_hf.single_threaded()  # before `tokenizers` is imported
    try:
        import harness.oracle.llama  # noqa: F401  (llama-cpp-python, the oracle)
    except ImportError as e:
        print(f"error: cannot import the oracle ({e}); run ./quickstart.sh first", file=sys.stderr)
        return 2
    try:
        names = selection(args)
        cold = args.corpus.read_bytes()
        warm = warm_text(len(cold))
        print("\n".join(header(cold, warm, args, argv)), flush=True)
        rows = []
        for name in names:
            rows.append(bench_one(name, cold, warm, args))
            print(f"  measured {name}: cold {rows[-1]['cold']['ratio']:.2f}x, load {rows[-1]['load_ratio']:.2f}x",
                  file=sys.stderr, flush=True)
    except (BenchError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(tables(rows, args)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    differ = [r["name"] for r in rows if not r["cold"]["same_ids"] or not r.get("warm", {}).get("same_ids", True)
              or not all(v for k, v in r.get("docs", {}).get("same_ids", {}).items() if not k.startswith("hf"))]
    if differ:
        print(f"ids differ from llama.cpp's on: {', '.join(differ)}", file=sys.stderr)
        return 1
    missed = [r["name"] for r in rows if r["cold"]["ratio"] < TARGETS.get(r["type"], 0)
              or r["load_ratio"] < LOAD_TARGET or r.get("docs", {}).get("ratio", 9) < DOC_TARGETS.get(r["type"], 0)]
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
