"""The nightly's CI matrix (.github/workflows/nightly.yml), run here: N shards as separate processes, then the merge.

The workflow calls this script for both of its steps, so a local run executes the
same commands:

    python tools/matrix_local.py shard 2/3      # one matrix job: GGUF_PARITY_SHARD=2/3 ./quickstart.sh parity
    python tools/matrix_local.py merge          # the merge job: merge-reports over every shard found
    python tools/matrix_local.py all --shards 3 # here: `shard 1/3`, `shard 2/3`, `shard 3/3`, then `merge`
    python tools/matrix_local.py pin            # the pinned llama-cpp-python version (the caches' key)

`shard K/N` leaves reports/<session>/shard-K-of-N/{golden,live} (noxfile.py's
`parity_check`). `merge --root DIR` folds every report.json below DIR (the CI
merge job downloads each shard's artifact into a folder of its own there) into
DIR/merged/ with `python -m harness merge-reports`, and exits as it
does: 0 all match, 1 findings, 2 a shard missing or twice (or any set-up error).
With $GITHUB_STEP_SUMMARY set (or --summary FILE) it also writes the verdict and
the counts there as Markdown.

`all` runs the shards one after another by default (--jobs 1): they share nox's
venv, which only the first one creates. Budgets come from the environment as in
noxfile.py (GGUF_PARITY_FUZZ, GGUF_PARITY_SEED, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSION = "parity"
COUNTS = ("models", "cases", "passed", "failing_cases", "mismatches", "engine_errors", "oracle_crashes",
          "known_oracle_crashes", "vocab_mismatches", "harness_faults")

Runner = Callable[[Sequence[str], dict[str, str]], int]


def run_process(argv: Sequence[str], env: dict[str, str]) -> int:
    """The default runner: the command as a child process in the repository root; its exit status."""
    print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    return subprocess.run(list(argv), cwd=ROOT, env={**os.environ, **env}, check=False).returncode


def parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(p) for p in text.split("/"))
    except ValueError:
        raise SystemExit(f"error: shard {text!r}: expected K/N, e.g. 2/3") from None
    if count < 1 or not 1 <= index <= count:
        raise SystemExit(f"error: shard {text}: K must be between 1 and N")
    return index, count


def pinned_version(pin: Path = ROOT / "harness" / "data" / "pin.txt") -> str:
    """The pinned llama-cpp-python version, read as text from harness/data/pin.txt, where it is written once
    (this script needs neither nox nor the project; the workflows key their caches by it)."""
    match = re.search(r"^llama-cpp-python==(\d+\.\d+\.\d+)$", pin.read_text(encoding="utf-8"), re.M)
    if match is None:
        raise SystemExit(f"error: no llama-cpp-python==X.Y.Z line in {pin}")
    return match.group(1)


def shard_command(index: int, count: int, session: str = SESSION) -> tuple[list[str], dict[str, str]]:
    """One matrix job's command and the environment it adds."""
    return ["./quickstart.sh", session], {"GGUF_PARITY_SHARD": f"{index}/{count}"}


def report_dirs(root: Path, out: Path) -> list[Path]:
    """Every folder below `root` holding a report.json, `out` and its contents excepted, in path order."""
    out = out.resolve()
    found = []
    for path in sorted(root.rglob("report.json")):
        folder = path.parent.resolve()
        if folder != out and out not in folder.parents:
            found.append(path.parent)
    return found


def merge_command(parts: Sequence[Path], out: Path, python: str) -> list[str]:
    return [python, "-m", "harness", "merge-reports", *map(str, parts), "--out", str(out)]


def summary_markdown(report: dict, status: int) -> str:
    """The merged verdict and counts, for $GITHUB_STEP_SUMMARY."""
    s = report.get("summary", {})
    word = {0: "all match", 1: "findings"}.get(status, f"exit {status}")
    lines = [f"## parity over {len(report.get('meta', {}).get('merged', []))} shard reports: {word}", "",
             "| " + " | ".join(COUNTS) + " |", "|" + "---|" * len(COUNTS),
             "| " + " | ".join(str(s.get(k, 0)) for k in COUNTS) + " |", ""]
    families = s.get("per_family", {})
    if families:
        lines += ["| family | models | cases | failing | pass rate |", "|---|---|---|---|---|"]
        lines += [f"| {f} | {c.get('models', 0)} | {c.get('cases', 0)} | {c.get('failing_cases', 0)} | "
                  f"{c.get('pass_rate')} |" for f, c in sorted(families.items())]
    for shard in report.get("meta", {}).get("shards", []):
        lines.append(f"- {shard.get('kind')} partition {shard.get('partition')}: {shard.get('count')} shards, "
                     f"{shard.get('units')} units")
    return "\n".join(lines) + "\n"


def merge(parts: Sequence[Path], out: Path, *, python: str, runner: Runner = run_process,
          summary: Path | None = None) -> int:
    """merge-reports over `parts` into `out`; its exit status (2 when there is none)."""
    if not parts:
        print(f"error: no shard report to merge into {out}", file=sys.stderr)
        return 2
    status = runner(merge_command(parts, out, python), {})
    if summary is not None:
        merged = out / "report.json"
        text = (summary_markdown(json.loads(merged.read_text(encoding="utf-8")), status) if status in (0, 1)
                and merged.is_file() else f"## parity merge failed (exit {status}): see the job log\n")
        with summary.open("a", encoding="utf-8") as handle:
            handle.write(text)
    return status


def run_all(count: int, *, session: str, jobs: int, python: str | None, runner: Runner = run_process,
            summary: Path | None = None) -> int:
    """Every shard as its own process (this script's `shard K/N`), then `merge`; merge's exit status.

    A shard that stops with a set-up error (exit 2) leaves its reports missing,
    and the merge then refuses with one line. The merge runs in the session's
    venv (`python`, default .nox/SESSION/bin/python), which the shards made.
    """
    script = str(Path(__file__).resolve())

    def one(index: int) -> int:
        return runner([sys.executable, script, "shard", f"{index}/{count}", "--session", session], {})

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        statuses = list(pool.map(one, range(1, count + 1)))
    for index, status in enumerate(statuses, 1):
        if status:
            print(f"shard {index}/{count} exited {status}", file=sys.stderr)
    root = ROOT / "reports" / session  # only this run's shard folders: not an older unsharded or N-shard run
    out = root / "merged"
    parts = [p for k in range(1, count + 1) for p in report_dirs(root / f"shard-{k}-of-{count}", out)]
    venv = ROOT / ".nox" / session / "bin" / "python"
    return merge(parts, out, python=python or str(venv), runner=runner, summary=summary)


def main(argv: Sequence[str] | None = None, runner: Runner = run_process) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    one = sub.add_parser("shard", help="one matrix job: GGUF_PARITY_SHARD=K/N ./quickstart.sh SESSION")
    one.add_argument("shard", metavar="K/N")
    merging = sub.add_parser("merge", help="the merge job: merge-reports over every shard report")
    merging.add_argument("--root", type=Path, default=None, help="where the shard reports are "
                         "(default reports/SESSION)")
    merging.add_argument("--out", type=Path, default=None, help="default ROOT/merged")
    sub.add_parser("pin", help="print the pinned llama-cpp-python version")
    both = sub.add_parser("all", help="every shard as a separate process, then the merge")
    both.add_argument("--shards", type=int, default=3, metavar="N")
    both.add_argument("--jobs", type=int, default=1, metavar="J", help="shards at once (default 1)")
    for p in (one, merging, both):
        p.add_argument("--session", default=SESSION, help="the nox parity session (default parity)")
        p.add_argument("--python", default=None, help="the interpreter with the harness installed, for the "
                       "merge (default: the nox session's venv after `all`, else this one)")
        p.add_argument("--summary", type=Path, default=os.environ.get("GITHUB_STEP_SUMMARY") or None,
                       help="append the verdict and counts as Markdown (default $GITHUB_STEP_SUMMARY)")
    args = parser.parse_args(argv)
    if args.step == "pin":
        print(pinned_version())
        return 0
    if args.step == "shard":
        argv_, env = shard_command(*parse_shard(args.shard), session=args.session)
        return runner(argv_, env)
    if args.step == "merge":
        root = args.root or ROOT / "reports" / args.session
        out = args.out or root / "merged"
        return merge(report_dirs(root, out), out, python=args.python or sys.executable, runner=runner,
                     summary=args.summary)
    if args.shards < 1:
        raise SystemExit("error: --shards must be 1 or more")
    return run_all(args.shards, session=args.session, jobs=args.jobs, python=args.python, runner=runner,
                   summary=args.summary)


if __name__ == "__main__":
    sys.exit(main())
