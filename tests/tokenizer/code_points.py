"""llama.cpp's answers to every code point's probe, recorded once per pinned release.

The nightly's every-code-point test tokenizes a probe string per code point (0..0x10FFFF),
`BATCH` probes to a call, on five vocabularies whose pre-tokenizers see the Unicode classes.
Asking llama.cpp those 2,720 calls every night cost 7.6 of the test's 11.6 minutes on one
core, and its answers only change with the pinned release. So llama.cpp's ids are recorded
here, as a 64-bit digest per call, in `golden/code-points/<vocabulary>.json` with the
llama-cpp-python version and the GGUF's sha256; the test compares our engine's ids with
the digests and asks llama.cpp live only on a call that differs, to name the code points.
A record made by another release, or of another file, fails the test until it is re-recorded:

    python -m tests.tokenizer.code_points [NAME ...]      # all of PROBE_VOCABS by default

(the vocabularies fetched and built first: `python -m harness fetch`, `python -m harness synth`).
The probes, the batching and the digest are `harness.golden.every_code_point`'s, which `python -m harness
builds` uses to hold another llama.cpp build to these records.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from harness.golden.every_code_point import BATCH, FLAGS, MAX_CODEPOINTS, PROBE_VOCABS, batches, digest, probe
from harness.models.fetch import sha256_file
from tokenizer.attrs import Attr

__all__ = ["BATCH", "FLAGS", "MAX_CODEPOINTS", "PROBE_VOCABS", "RECORDS", "batches", "differing", "digest", "probe",
           "record", "record_path", "separator", "stale"]
RECORDS = Path(__file__).resolve().parents[2] / "golden" / "code-points"


def separator(tok) -> bytes | None:
    """The longest CONTROL token's text (probes joined by it are tokenized apart), or None."""
    control = [t for t in range(tok.n_tokens) if tok.token_attr(t) & Attr.CONTROL]
    return max((tok.token_text(t) for t in control), key=len) if control else None


def record_path(name: str) -> Path:
    return RECORDS / f"{name.split(':', 1)[-1]}.json"


def llama_version() -> str:
    import llama_cpp

    return llama_cpp.__version__


def stale(name: str, path: Path) -> str | None:
    """Why the record of `name` cannot be used for `path` and the installed llama.cpp, or None."""
    where = record_path(name)
    if not where.is_file():
        return f"{where} is missing"
    record = json.loads(where.read_text(encoding="utf-8"))
    if record.get("llama_cpp_python") != llama_version():
        return f"{where} was recorded with llama-cpp-python {record.get('llama_cpp_python')}, " \
               f"this is {llama_version()}"
    if record.get("gguf_sha256") != sha256_file(path):
        return f"{where} was recorded from another file than {path}"
    if record.get("batch") != BATCH or len(record.get("digests", ())) != -(-MAX_CODEPOINTS // BATCH):
        return f"{where} holds another batching than {BATCH} code points per call"
    return None


def differing(name: str, tokenize: Callable[[bytes], list[int]], sep: bytes) -> list[int]:
    """The first code points of the batches whose ids differ from llama.cpp's recorded digests."""
    recorded = json.loads(record_path(name).read_text(encoding="utf-8"))["digests"]
    return [start for (start, data), want in zip(batches(sep), recorded, strict=True)
            if digest(tokenize(data)) != want]


def record(name: str, path: Path) -> Path:
    """Ask llama.cpp every batch of `path` and write the digests to `record_path(name)`."""
    from harness.oracle.llama import LlamaOracle
    from tokenizer import Tokenizer

    sep = separator(Tokenizer.from_gguf(path))
    if sep is None:
        raise SystemExit(f"{path}: no CONTROL token to separate probes with")
    with LlamaOracle(path) as oracle:
        digests = [digest(oracle.tokenize(data, **FLAGS)) for _, data in batches(sep)]
    out = record_path(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {"vocabulary": name, "llama_cpp_python": llama_version(), "gguf_sha256": sha256_file(path),
            "batch": BATCH, "flags": FLAGS, "separator": sep.decode("utf-8", "replace"), "digests": digests}
    out.write_text(json.dumps(body, indent=0) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tokenizer.code_points", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(PROBE_VOCABS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(PROBE_VOCABS))
    if unknown:
        print(f"error: unknown vocabulary {', '.join(unknown)}; choose from {', '.join(PROBE_VOCABS)}",
              file=sys.stderr)
        return 2
    from harness.errors import SetupError
    from harness.models.paths import resolve

    for name in args.names or PROBE_VOCABS:
        try:
            path = resolve(name.removeprefix("synthetic:"))
        except SetupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"{name}: {record(name, path)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
