"""cProfile of `Tokenizer.from_gguf`: where a load's time goes, per vocabulary.

    python bench/profile_load.py                     # llama-bpe, phi-3, bert-bge, nomic-bert-moe
    python bench/profile_load.py gemma-4 --top 20 --sort cumulative

One untimed load first (the Unicode tables and imports are then built), then one
profiled load; prints the top entries as a markdown table (function, calls,
own time, cumulative time). Profiling inflates per-call costs, so read the
shares, not the absolute times (bench/bench_tokenize.py times loads unprofiled).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT = ("llama-bpe", "phi-3", "bert-bge", "nomic-bert-moe")


def where(func: tuple[str, int, str]) -> str:
    file, line, name = func
    if file == "~":
        return name
    parts = Path(file).parts
    short = "/".join(parts[parts.index("tokenizer"):]) if "tokenizer" in parts else Path(file).name
    return f"{short}:{line}({name})"


def profile(path: Path, top: int, sort: str) -> list[str]:
    from tokenizer import Tokenizer

    Tokenizer.from_gguf(path)
    prof = cProfile.Profile()
    prof.enable()
    Tokenizer.from_gguf(path)
    prof.disable()
    stats = pstats.Stats(prof)
    key = 2 if sort == "tottime" else 3
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][key], reverse=True)[:top]  # type: ignore[attr-defined]
    total = max(v[3] for v in stats.stats.values())  # type: ignore[attr-defined]
    out = [f"profiled load {total:.3f} s", "", "| function | calls | own s | cumulative s |",
           "|---|---:|---:|---:|"]
    for func, (_, ncalls, tottime, cumtime, _) in rows:
        out.append(f"| `{where(func)}` | {ncalls} | {tottime:.3f} | {cumtime:.3f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"vocabularies (default: {' '.join(DEFAULT)})")
    ap.add_argument("--top", type=int, default=12, help="entries per vocabulary (default 12)")
    ap.add_argument("--sort", choices=("tottime", "cumulative"), default="tottime")
    args = ap.parse_args(argv)
    from harness.models.paths import resolve
    from harness.models.shipped import SetupError

    for name in args.names or DEFAULT:
        try:
            path = resolve(name)
        except SetupError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"\n### {name}\n")
        print("\n".join(profile(path, args.top, args.sort)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
