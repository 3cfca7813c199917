"""Line and branch coverage of tokenizer/ under the default parity run (coverage as a signal of what the checks reach).

Runs the main job's two parts under coverage.py, as `./quickstart.sh parity`
runs them (golden replay, then the live run over the default corpora with
`--fuzz 20 --seed 0`), and prints the coverage of tokenizer/ with the totals
for tokenizer/engines/ and the pre-tokenizers (pretokenize/behaviours.py, pretokenize/splitter.py).
An engine branch the parity run never executes is a blind spot.

    python tools/parity_coverage.py                 # every shipped vocabulary (a few minutes)
    python tools/parity_coverage.py --golden-only   # offline, no llama.cpp
    python tools/parity_coverage.py --out reports/coverage   # + coverage.json and an HTML report

Needs coverage.py (`pip install -e .[test]`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SELECTION = [arg for family in ("spm", "bpe", "wpm", "ugm") for arg in ("--family", family)]
GROUPS: dict[str, Callable[[str], bool]] = {
    "tokenizer/engines/": lambda f: f.startswith("tokenizer/engines/"),
    "pre-tokenizers (pretokenizers.py, splitter.py)": lambda f: f in ("tokenizer/pretokenize/behaviours.py",
                                                                       "tokenizer/pretokenize/splitter.py"),
    "tokenizer/ (all)": lambda f: f.startswith("tokenizer/"),
}


def engine_side() -> None:
    """The engine half of `run` (no oracle, no fuzz, no vocabulary record) over every shipped vocabulary."""
    sys.path.insert(0, str(ROOT))
    from harness.compare.subject import run_engine
    from harness.inputs.corpus import default_corpora
    from harness.models.shipped import SHIPPED, vocab_path
    from tokenizer import Tokenizer

    for name in SHIPPED:
        path = vocab_path(name)
        tok = Tokenizer.from_gguf(path)
        for case in default_corpora(path):
            run_engine(tok, case)
        print(f"engine side: {name} done", flush=True)


def run_parts(data_dir: Path, *, golden_only: bool, jobs: int, engine_only: bool = False) -> None:
    base = [sys.executable, "-m", "coverage", "run", "--branch", "--parallel-mode", "--source", "tokenizer",
            f"--data-file={data_dir / '.coverage'}", "-m", "harness"]
    reports = data_dir / "reports"
    if engine_only:
        subprocess.run([*base[:base.index("-m", 3)], str(Path(__file__).resolve()), "--engine-side-worker"],
                       cwd=ROOT, check=False)
        subprocess.run([sys.executable, "-m", "coverage", "combine", f"--data-file={data_dir / '.coverage'}"],
                       cwd=ROOT, check=True, capture_output=True)
        return
    parts = [["compare", "--golden", "golden", *SELECTION, "--quiet", "--report", str(reports / "golden")]]
    if not golden_only:
        parts.append(["run", *SELECTION, "--fuzz", "20", "--seed", "0", "--jobs", str(jobs), "--quiet",
                      "--found-dir", str(data_dir / "found"), "--report", str(reports / "live")])
    for part in parts:
        print("running:", "python -m harness", " ".join(part), flush=True)
        subprocess.run([*base, *part], cwd=ROOT, check=False)
    subprocess.run([sys.executable, "-m", "coverage", "combine", f"--data-file={data_dir / '.coverage'}"],
                   cwd=ROOT, check=True, capture_output=True)


def summarize(data_dir: Path, out: Path | None) -> dict[str, Any]:
    json_path = data_dir / "coverage.json"
    subprocess.run([sys.executable, "-m", "coverage", "json", f"--data-file={data_dir / '.coverage'}",
                    "-o", str(json_path), "--quiet"], cwd=ROOT, check=True)
    files = json.loads(json_path.read_text())["files"]
    files = {Path(k).resolve().relative_to(ROOT).as_posix(): v["summary"] for k, v in files.items()}
    totals = {}
    for name, keep in GROUPS.items():
        picked = [s for f, s in files.items() if keep(f)]
        lines = sum(s["covered_lines"] for s in picked), sum(s["num_statements"] for s in picked)
        branches = sum(s["covered_branches"] for s in picked), sum(s["num_branches"] for s in picked)
        totals[name] = {"lines": lines, "branches": branches}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(json_path, out / "coverage.json")
        subprocess.run([sys.executable, "-m", "coverage", "html", f"--data-file={data_dir / '.coverage'}",
                        "-d", str(out / "html"), "--quiet"], cwd=ROOT, check=True)
    print(f"{'file':48} {'lines':>14} {'branches':>14}")
    for f, s in sorted(files.items()):
        print(f"{f:48} {_pct(s['covered_lines'], s['num_statements']):>14} "
              f"{_pct(s['covered_branches'], s['num_branches']):>14}")
    for name, t in totals.items():
        print(f"{name:48} {_pct(*t['lines']):>14} {_pct(*t['branches']):>14}")
    return totals


def _pct(done: int, total: int) -> str:
    return f"{100 * done / total:.1f}% ({done}/{total})" if total else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden-only", action="store_true", help="only the offline golden replay")
    parser.add_argument("--engine-side", action="store_true",
                        help="a cheaper proxy: only our engine over the default corpora of every shipped vocabulary, "
                             "as `run` calls it (every case's 4 tokenizations and their detokenizations), no llama.cpp")
    parser.add_argument("--jobs", type=int, default=2, help="llama.cpp workers for the live run")
    parser.add_argument("--out", type=Path, default=None, help="also write coverage.json and html/ here")
    parser.add_argument("--engine-side-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine_side_worker:
        engine_side()
        return 0
    with tempfile.TemporaryDirectory(prefix="gguf-parity-coverage-") as tmp:
        os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        run_parts(Path(tmp), golden_only=args.golden_only, jobs=args.jobs, engine_only=args.engine_side)
        summarize(Path(tmp), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
