"""Wall time of one full check of an engine in-process and through the engine protocol.

The same command, `python -m harness COMMAND --model MODEL`, is timed with our
engine in-process (the default), through the Python reference child
(`--engine cmd:python -m harness.children.python_child`), and through the
contained MODULE:CALLABLE path (`--engine tokenizer:Tokenizer.from_gguf`
spelled as a third-party module: `tests.hostile_engines` is not used). Runs
alternate between the variants and the best of `--repeat` is kept, so load
from other processes on the machine hurts every variant alike. Target (issue
12): the child within 2x of in-process on llama-bpe.

    python bench/bench_engine_protocol.py                      # compare --golden golden, llama-bpe
    python bench/bench_engine_protocol.py --command run        # live, needs llama-cpp-python
    python bench/bench_engine_protocol.py --vocab-only         # just the vocabulary record, both ways
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "in-process": [],
    "python child (cmd:)": ["--engine", f"cmd:{sys.executable} -m harness.children.python_child"],
    "contained module": ["--engine", "bench.bench_engine_protocol:ours"],
}


def ours(path):
    """Our engine, named as a third-party MODULE:CALLABLE would be (so it runs contained)."""
    from tokenizer import Tokenizer
    return Tokenizer.from_gguf(path)


def once(command: str, model: str, extra: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "harness", command, "--model", model, "--report", tmp, "--quiet", *extra]
        if command == "compare":
            argv[4:4] = ["--golden", str(ROOT / "golden")]
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return elapsed


def vocab_times(model: str) -> None:
    """Load and vocabulary-record time of our engine in-process and through the Python child."""
    sys.path.insert(0, str(ROOT))
    from harness.models.paths import resolve
    from harness.subjects.spec import load_engine
    path = resolve(model)
    for name, spec in (("in-process", None), ("python child (cmd:)", VARIANTS["python child (cmd:)"][1])):
        start = time.perf_counter()
        engine = load_engine(spec)(path)
        loaded = time.perf_counter()
        record = engine.vocab()
        done = time.perf_counter()
        engine.close()
        print(f"  {name:<22} load {loaded - start:5.2f} s, vocabulary record {done - loaded:5.2f} s "
              f"({record['n_tokens']:,} tokens)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--command", default="compare", choices=("compare", "run"))
    parser.add_argument("--model", default="llama-bpe")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--vocab-only", action="store_true", help="only time the vocabulary record")
    args = parser.parse_args()
    if args.vocab_only:
        vocab_times(args.model)
        return 0
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, extra in VARIANTS.items():
            best[name] = min(best.get(name, float("inf")), once(args.command, args.model, extra))
    base = best["in-process"]
    print(f"{args.command} --model {args.model}, best of {args.repeat} (wall seconds, ratio to in-process)")
    for name, seconds in best.items():
        print(f"  {name:<22} {seconds:7.2f} s  {seconds / base:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
