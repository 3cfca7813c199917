"""What the boundary slice costs the main job's live run: with it (the default) and without, in one run.

The default parity run should stay within 2x of its wall time without the boundary
inputs in the default corpora. This runs the main job's live part
(`python -m harness run --family spm --family bpe --family wpm --family ugm --fuzz 20
--seed 0`) alternately with `GGUF_PARITY_BOUNDARIES=off` (the corpora as they were) and
with the default slice, `--rounds` times each, and reports the cases and the best wall
time of each and their ratio. Alternating on the same machine keeps the ratio
meaningful when absolute times drift (a shared machine).

    python bench/bench_boundary_cost.py              # one round each
    python bench/bench_boundary_cost.py --rounds 2 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SELECTION = [arg for family in ("spm", "bpe", "wpm", "ugm") for arg in ("--family", family)]


def one_run(level: str, jobs: int, report: Path) -> tuple[float, int]:
    """(wall seconds, cases) of one live run with GGUF_PARITY_BOUNDARIES=`level`."""
    env = {**os.environ, "GGUF_PARITY_BOUNDARIES": level}
    cmd = [sys.executable, "-m", "harness", "run", *SELECTION, "--fuzz", "20", "--seed", "0",
           "--jobs", str(jobs), "--quiet", "--no-messages", "--report", str(report)]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"error: {' '.join(cmd)} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-500:]}")
    cases = json.loads((report / "report.json").read_text(encoding="utf-8"))["summary"]["cases"]
    return seconds, cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="runs of each, alternating (best kept)")
    parser.add_argument("--jobs", type=int, default=2, help="llama.cpp workers, as the main job uses")
    args = parser.parse_args()
    best: dict[str, tuple[float, int]] = {}
    with tempfile.TemporaryDirectory(prefix="gguf-parity-bench-") as tmp:
        for r in range(args.rounds):
            for level in ("off", "slice"):
                seconds, cases = one_run(level, args.jobs, Path(tmp) / f"{level}-{r}")
                print(f"round {r + 1}: boundaries {level:5}  {cases:6} cases  {seconds:6.1f} s", flush=True)
                if level not in best or seconds < best[level][0]:
                    best[level] = (seconds, cases)
    (off_s, off_n), (on_s, on_n) = best["off"], best["slice"]
    print(f"without the slice: {off_n} cases, {off_s:.1f} s; with it: {on_n} cases, {on_s:.1f} s; "
          f"ratio {on_s / off_s:.2f}x (target: at most 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
