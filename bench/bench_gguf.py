"""Benchmark: read the full metadata of the shipped vocabularies three ways.

In one run, interleaved file by file (the order rotates each pass, so no reader
always goes first on a cold cache), it times:

- ours: `tokenizer.gguf.reader.read`, every value decoded (token arrays included);
- gguf-py: `gguf.GGUFReader`, then every field's parts read into bytes, so its
  lazy memmap reads are counted;
- llama.cpp: `llama_model_load_from_file` with `vocab_only=True` (its log
  silenced), then `llama_model_free`.

Each file's time is the best of `--repeat` passes; the table shows them and the
totals, then the ratios: how many times faster ours is than gguf-py (target:
at least 20x) and ours' time over llama.cpp's vocab-only load (target: at most 2x).

    python bench/bench_gguf.py --repeat 3
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from pathlib import Path

try:
    from harness.errors import SetupError
    from harness.models.paths import resolve
    from harness.models.shipped import SHIPPED
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from harness.errors import SetupError
    from harness.models.paths import resolve
    from harness.models.shipped import SHIPPED

from harness.runs.progress import Progress
from tokenizer.gguf.reader import read

READERS = ("ours", "gguf-py", "llama.cpp")


def read_ours(path: Path) -> None:
    read(path)


def read_gguf_py(path: Path) -> None:
    import gguf
    reader = gguf.GGUFReader(path)
    for field in reader.fields.values():
        for i in field.data:
            bytes(field.parts[i])


class LlamaVocabLoader:
    """llama.cpp's own vocab-only load, with its log silenced."""

    def __init__(self):
        import llama_cpp
        self.llama_cpp = llama_cpp
        # keep a reference: llama.cpp calls it for as long as the process lives
        self._silence = llama_cpp.llama_log_callback(lambda level, text, data: None)
        llama_cpp.llama_log_set(self._silence, ctypes.c_void_p())
        llama_cpp.llama_backend_init()

    def __call__(self, path: Path) -> None:
        params = self.llama_cpp.llama_model_default_params()
        params.vocab_only = True
        model = self.llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.llama_cpp.llama_model_free(model)


def timed(fn, path: Path) -> float:
    start = time.perf_counter()
    fn(path)
    return time.perf_counter() - start


def run(paths: dict[str, Path], readers: dict, repeat: int) -> dict[str, dict[str, float]]:
    """Best time per (vocabulary, reader) over `repeat` interleaved passes."""
    best = {name: {r: float("inf") for r in readers} for name in paths}
    order = list(readers)
    with Progress(total=repeat * len(paths), label="bench_gguf", every=5) as bar:
        for rep in range(repeat):
            for i, (name, path) in enumerate(paths.items()):
                shift = (rep + i) % len(order)
                for reader in order[shift:] + order[:shift]:
                    best[name][reader] = min(best[name][reader], timed(readers[reader], path))
                bar.advance(note=f"pass {rep + 1}: {name}")
    return best


def report(paths: dict[str, Path], best: dict[str, dict[str, float]], readers) -> str:
    cols = list(readers)
    lines = ["| vocabulary | MB | " + " | ".join(f"{c} ms" for c in cols) + " |",
             "|---|---:|" + "---:|" * len(cols)]
    totals = dict.fromkeys(cols, 0.0)
    for name, path in paths.items():
        mb = path.stat().st_size / 1e6
        cells = []
        for c in cols:
            totals[c] += best[name][c]
            cells.append(f"{best[name][c] * 1e3:.1f}")
        lines.append(f"| {name} | {mb:.1f} | " + " | ".join(cells) + " |")
    size = sum(p.stat().st_size for p in paths.values()) / 1e6
    lines.append(f"| **total** | {size:.1f} | "
                 + " | ".join(f"**{totals[c] * 1e3:.0f}**" for c in cols) + " |")
    lines.append("")
    lines += ratios(totals)
    return "\n".join(lines)


def ratios(totals: dict[str, float]) -> list[str]:
    out = []
    ours = totals.get("ours")
    if ours and "gguf-py" in totals:
        x = totals["gguf-py"] / ours
        out.append(f"ours vs gguf-py GGUFReader: {x:.1f}x faster "
                   f"(target >= 20x: {'met' if x >= 20 else 'NOT met'})")
    if ours and "llama.cpp" in totals:
        x = ours / totals["llama.cpp"]
        out.append(f"ours vs llama.cpp vocab-only load: {x:.2f}x its time "
                   f"(target <= 2x: {'met' if x <= 2 else 'NOT met'})")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="Vocabularies come from: python -m harness fetch")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="interleaved passes; each time is the best of N (default 1)")
    p.add_argument("--readers", default=",".join(READERS),
                   help=f"comma-separated subset of {', '.join(READERS)} (default: all)")
    p.add_argument("vocabs", nargs="*", metavar="NAME|PATH",
                   help="vocabularies to read (default: the 19 shipped ones)")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    unknown = set(args.readers.split(",")) - set(READERS)
    if unknown:
        p.error(f"unknown readers {sorted(unknown)}; choose from {', '.join(READERS)}")
    return args


def make_readers(names: list[str]) -> dict:
    table = {"ours": read_ours, "gguf-py": read_gguf_py}
    readers = {}
    for name in names:
        readers[name] = LlamaVocabLoader() if name == "llama.cpp" else table[name]
    return readers


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        paths = {Path(v).name.removeprefix("ggml-vocab-").removesuffix(".gguf"): resolve(v)
                 for v in (args.vocabs or SHIPPED)}
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    readers = make_readers([r for r in READERS if r in args.readers.split(",")])
    best = run(paths, readers, args.repeat)
    print(report(paths, best, readers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
