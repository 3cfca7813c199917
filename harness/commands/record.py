"""Record golden files: llama.cpp's tokenizer behaviour on each vocabulary, as JSON.

For each model (default: the 19 shipped vocabularies) the oracle runs in
worker processes on the default corpora (the model's own .inp vectors, our
edge-case and prose corpora, cases built from its special and user-defined
tokens) or on the --corpus files given (plus those special-token cases), and
writes <out>/<gguf stem>.json.
A case on which llama.cpp crashes is recorded as an oracle-crash finding and
the run goes on.  A worker that
dies or hangs is blamed on llama.cpp only when a fresh worker does so again on
the same case (harness.oracle.workers); otherwise the fresh worker's answer is
recorded and the death is printed as a harness fault, never written into the
golden.  Workers run under --timeout and --memory-limit (harness.oracle.worker_limits).

    python -m harness record --model llama-spm --jobs 2
    python -m harness record --model path/to/synthetic.gguf --out golden/
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..files.atomic import check_output_folder
from ..golden import digest
from ..golden import files as goldens
from ..inputs.corpus import CorpusError, default_corpora, load_corpus, unique_ids, vocab_cases
from ..models.header_only import golden_source
from ..models.header_only import note as source_note
from ..models.paths import resolve, source_of
from ..models.shipped import SHIPPED
from ..oracle import worker_limits
from ..oracle.workers import LoadFailure, inspect_model, run_cases
from ..runs.progress import Progress

# What `record` means by the codes of the README's table (harness.cli.exit_help prints them under it).
EXIT_STATUS = {
    0: "every golden was written, and llama.cpp crashed on no case",
    1: "a llama.cpp crash was recorded (a golden is still written)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", metavar="NAME|PATH",
                        help="a shipped vocabulary name, a .gguf path or a URL (http(s)://, hf://ORG/REPO/FILE; "
                             "header only) (repeatable; default: all shipped)")
    parser.add_argument("--corpus", action="append", type=Path, metavar="FILE",
                        help="a .jsonl or .inp corpus to use instead of the default corpora; the "
                             "vocabulary's special-token cases are still added (repeatable)")
    parser.add_argument("--out", type=Path, default=goldens.GOLDEN_DIR, metavar="DIR",
                        help="where golden files go (default: golden/)")
    worker_limits.add_options(parser)  # --jobs --force-jobs --timeout --memory-limit
    parser.add_argument("--verbose", action="store_true", help="let llama.cpp's log through")


def run(args: argparse.Namespace) -> int:
    limits = worker_limits.from_args(args)
    check_output_folder(args.out, "--out")  # before llama.cpp is asked anything
    paths = [resolve(m) for m in (args.model or SHIPPED)]
    extra = _load_corpora(args.corpus) if args.corpus else None
    crashes = 0
    faults: list[dict[str, Any]] = []
    for path in paths:
        cases = unique_ids(extra + vocab_cases(path)) if extra is not None else default_corpora(path)
        golden = record_model(path, cases, jobs=limits.jobs, timeout=limits.timeout,
                              memory_limit=limits.memory, verbose=args.verbose, faults=faults)
        target = goldens.write_golden(goldens.golden_path(args.out, path), golden)
        found = count_crashes(golden)
        crashes += found
        refused = (golden["load_error"] or {}).get("message", "").splitlines()[:1]
        note = f"; llama.cpp did not load it: {refused[0]}" if refused else ""
        print(f"{path.name}: {len(golden['cases'])} cases, {found} oracle crash(es)"
              f" -> {target} ({target.stat().st_size / 1024:.0f} KiB){note}")
        if (source := source_of(path)) is not None:
            print(f"  {source_note(source)}")
        for case in golden["cases"]:
            if "crash" in case:
                print(f"  oracle crash: {describe_crash(path.name, case)}")
        print_faults(path.name, faults)
        faults.clear()
    if crashes:
        print(f"recorded {crashes} oracle crash finding(s); see the \"crash\" records in the golden files")
        return 1
    return 0


def _load_corpora(files: list[Path]) -> list[dict[str, Any]]:
    cases = []
    for file in files:
        try:
            cases += [{**c, "id": f"{file.stem}-{c['id']}"} for c in load_corpus(file)]
        except CorpusError as exc:
            raise SetupError(str(exc)) from None
    return cases


def print_faults(model: str, faults: list[dict[str, Any]]) -> None:
    """One line per harness fault: a worker death that a fresh worker did not repeat."""
    for fault in faults:
        print(f"  harness fault (not in the golden): {model} case {fault['case_id']}: {fault['reason']}")


def describe_crash(model: str, case: dict[str, Any]) -> str:
    """One line naming the vocabulary, the input, the signal or exit status, and llama.cpp's message."""
    crash = case["crash"]
    if "document" in case:
        shown = f"document of {case['document']['size']:,} bytes"
    else:
        shown = repr(case["text"][:60]) if "text" in case else f"bytes {case['bytes'][:60]}"
    status = crash["signal"] or (f"exit {crash['exit']}" if crash["exit"] is not None else crash["kind"])
    message = crash["stderr"].replace("\n", " | ")[:160]
    return f"{model} case {case['id']} ({shown}): {crash['kind']} {status} in {crash['call']}: {message}"


def count_crashes(golden: dict[str, Any]) -> int:
    """Oracle-crash findings in a golden: crashed cases, plus a crashed load or vocabulary read."""
    return sum("crash" in c for c in golden["cases"]) + bool((golden.get("load_error") or {}).get("crash"))


def record_model(path: Path, cases: list[dict[str, Any]], *, jobs: int = 1,
                 timeout: float = worker_limits.DEFAULT_TIMEOUT, memory_limit: int | None = None,
                 verbose: bool = False, faults: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The golden dict for one GGUF file: header, vocabulary record and case records.

    Harness faults (worker deaths a fresh worker did not repeat) go to `faults`, not into the golden.
    """
    gguf = file_info(path)
    if (source := source_of(path)) is not None:  # a URL or cut file: the golden names the real source
        gguf["source"] = golden_source(source)
    try:
        info = inspect_model(path, verbose=verbose, memory_limit=memory_limit, faults=faults)
    except LoadFailure as exc:
        error = {"message": exc.message, **({"crash": exc.crash} if exc.crash else {})}
        return goldens.new_golden(gguf=gguf, llama=_build_info(), tokenizer={"meta": {}},
                                  vocab=None, cases=[], load_error=error)
    with Progress(total=len(cases), label=path.name, every=50) as bar:
        results = run_cases(path, cases, jobs=jobs, timeout=timeout, verbose=verbose,
                            memory_limit=memory_limit, faults=faults,
                            progress=lambda done, total, case_id: bar.advance())
    results = [digest.compact(r, c) if "document" in c else r for r, c in zip(results, cases, strict=True)]
    load_error = {"message": "reading the vocabulary crashed", "crash": info["vocab_crash"]} \
        if info.get("vocab_crash") else None
    return goldens.new_golden(gguf=gguf, llama=info["llama"] or _build_info(),
                              tokenizer=info["tokenizer"] or {"meta": {}}, vocab=info["vocab"],
                              cases=results, load_error=load_error)


def _build_info() -> dict[str, Any]:
    from ..oracle.llama import build_info

    return build_info()


def file_info(path: Path) -> dict[str, Any]:
    """Name, size and sha256 of a GGUF file's bytes before the tensor data (`harness.golden.identity`)."""
    from ..golden.identity import identity
    return identity(path)
