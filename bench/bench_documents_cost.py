"""What the long documents cost the main job: its golden replay and its live run, with and without them.

The main job (`./quickstart.sh parity`) replays the goldens, then runs live with fuzz, over the
shipped families and the sensitivity one. This times both parts alternately without the
documents and with them, `--rounds` times each, and reports the best wall time of each and
their ratio (alternating keeps the ratio meaningful on a shared machine):

- golden replay: `compare --golden DIR` on the goldens as they were at `--before` (default
  `main`, read with `git show` into a scratch folder: no documents) and on `golden/` (with them);
- live: `run ... --fuzz 20 --seed 0` with `GGUF_PARITY_DOCUMENTS=off` and with the default.

    python bench/bench_documents_cost.py                  # one round each
    python bench/bench_documents_cost.py --rounds 2 --part live
    python bench/bench_documents_cost.py --cpu --model llama-spm --model bert-bge   # CPU seconds, two vocabularies
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("spm", "bpe", "wpm", "ugm", "sensitivity")
SELECTION = [arg for family in FAMILIES for arg in ("--family", family)]
CPU = False  # --cpu: CPU seconds (harness and llama.cpp workers), which a shared machine's load does not inflate


def cpu_seconds() -> float:
    """User and system CPU of every child process waited for so far (the harness and its workers)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(cmd: list[str], env: dict[str, str], report: Path) -> tuple[float, int]:
    """(seconds, cases) of one harness command writing `report`: CPU seconds with --cpu, else wall."""
    start, cpu = time.perf_counter(), cpu_seconds()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = cpu_seconds() - cpu if CPU else time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"error: {' '.join(cmd)} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-500:]}")
    return seconds, json.loads((report / "report.json").read_text(encoding="utf-8"))["summary"]["cases"]


def old_goldens(before: str, into: Path) -> Path:
    """The golden/ folder as it was at `before`, written into `into`."""
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{before}:golden"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    into.mkdir(parents=True)
    for name in names:
        if name.endswith(".json"):
            data = subprocess.run(["git", "show", f"{before}:golden/{name}"], cwd=ROOT, check=True,
                                  capture_output=True).stdout
            (into / name).write_bytes(data)
    return into


def golden_run(folder: Path, report: Path) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "harness", "compare", "--golden", str(folder), *SELECTION, "--quiet",
           "--report", str(report)]
    return timed(cmd, dict(os.environ), report)


def live_run(level: str, jobs: int, report: Path) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "harness", "run", *SELECTION, "--fuzz", "20", "--seed", "0",
           "--jobs", str(jobs), "--quiet", "--report", str(report)]
    return timed(cmd, {**os.environ, "GGUF_PARITY_DOCUMENTS": level}, report)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="runs of each, alternating (best kept)")
    parser.add_argument("--jobs", type=int, default=2, help="llama.cpp workers, as the main job uses")
    parser.add_argument("--part", choices=("golden", "live", "both"), default="both")
    parser.add_argument("--before", default="main", help="the commit whose goldens have no documents")
    parser.add_argument("--model", action="append", default=[],
                        help="only these vocabularies (default: the main job's)")
    parser.add_argument("--cpu", action="store_true", help="CPU seconds instead of wall seconds")
    args = parser.parse_args()
    global CPU, SELECTION
    CPU = args.cpu
    if args.model:
        SELECTION = [arg for model in args.model for arg in ("--model", model)]
    best: dict[tuple[str, str], tuple[float, int]] = {}
    with tempfile.TemporaryDirectory(prefix="gguf-parity-bench-") as tmp:
        before = old_goldens(args.before, Path(tmp) / "before") if args.part != "live" else None
        for r in range(args.rounds):
            for part in ("golden", "live"):
                if args.part not in (part, "both"):
                    continue
                for label in ("without", "with"):
                    report = Path(tmp) / f"{part}-{label}-{r}"
                    if part == "golden":
                        seconds, cases = golden_run(before if label == "without" else ROOT / "golden", report)
                    else:
                        seconds, cases = live_run("off" if label == "without" else "default", args.jobs, report)
                    print(f"round {r + 1}: {part:6} {label:7} documents  {cases:6} cases  {seconds:6.1f} s"
                          f"{' CPU' if CPU else ''}", flush=True)
                    if (part, label) not in best or seconds < best[(part, label)][0]:
                        best[(part, label)] = (seconds, cases)
    total = {label: sum(best[(p, label)][0] for p in ("golden", "live") if (p, label) in best)
             for label in ("without", "with")}
    for part in ("golden", "live"):
        if (part, "with") in best:
            (a, n), (b, m) = best[(part, "without")], best[(part, "with")]
            print(f"{part}: without {n} cases {a:.1f} s; with {m} cases {b:.1f} s; ratio {b / a:.2f}x")
    print(f"both parts: without {total['without']:.1f} s, with {total['with']:.1f} s, "
          f"ratio {total['with'] / total['without']:.2f}x (target: the main job within 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
