"""The sweeps' cost per sweep, three ways, on one GGUF and its original (docs/benchmarks.md, "Sweeps").

Each sweep (harness/inputs/sweeps.py) is screened as `run --reference` screens it (harness/runs/sweeps.py:
llama.cpp in a worker of its own, the original in its reference child, our engine in this process, batched),
at the size asked, without a time budget; per sweep it prints the inputs, the wall time, each side's time,
llama.cpp's time per call (measured inside the worker, around each tokenize) and the process CPU time of
this process and its children, then the total. The sizes are `--sweeps` values (`all`, `NAME=N,...`).

    python bench/bench_sweeps.py --model X.gguf --reference spm:DIR --sweeps added=2560,vocab,unicode,ascii
    python bench/bench_sweeps.py --model X.gguf --reference hf:DIR --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu_seconds() -> float:
    """User + system time of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    from harness.inputs import sweeps as generators
    from harness.models.model import open_model
    from harness.runs import sweeps
    from harness.runs.config import RunConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the GGUF")
    parser.add_argument("--reference", required=True, help="hf:PATH, spm:PATH or tekken:PATH")
    parser.add_argument("--reference-arg", action="append", default=[], metavar="K=V")
    parser.add_argument("--sweeps", default="all", help="as run's --sweeps (default: all, every input)")
    parser.add_argument("--json", type=Path, help="also write the blocks here")
    args = parser.parse_args()
    sizes = generators.parse(args.sweeps)
    model = open_model(args.model)
    config = RunConfig(models=(args.model,), report_dir=Path("."), reference=args.reference,
                       reference_args=tuple(tuple(a.split("=", 1)) for a in args.reference_arg),  # type: ignore[misc]
                       timeout=600.0, quiet=True)
    start, cpu = time.perf_counter(), cpu_seconds()
    sides = sweeps.Sides.open(config, model)
    print(f"{model.name}: the three sides started in {time.perf_counter() - start:.1f} s", flush=True)
    blocks = {}
    try:
        for name, size in sizes.items():
            everything = sweeps._inputs(name, config, model, sides)
            items = generators.sized(generators.screen_order(everything, ordered=name == "added"), size)
            block, _ = sweeps.screen(sides, name, items)
            blocks[name] = {**block, "of": len(everything)}
            print(sweeps.summary_line(model.name, name, blocks[name]) + f"; sides {block['sides_seconds']}",
                  flush=True)
    finally:
        sides.close()
    wall = time.perf_counter() - start
    print(f"total: {sum(b['inputs'] for b in blocks.values()):,} inputs in {wall:.1f} s wall, "
          f"{cpu_seconds() - cpu:.1f} s CPU (this process and its ended children), load {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(blocks, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
