"""The child side of a llama.cpp worker: the model loaded once, JSON-line requests answered.

`python -m harness.oracle.worker_child --serve MODEL --memory-limit BYTES --parent PID` is what
`harness.oracle.workers.Worker` starts (the parent side: crash records, blame, restarts). The
child caps its own address space and dies with its parent (`harness.oracle.worker_limits`),
moves its stdout aside so nothing llama.cpp prints corrupts the protocol, then speaks it:

    {"ready": true} | {"load_error": ...} | {"setup_error": ...}     once, after loading
    {"op": "evaluate", "args": [case]}                               a request, on stdin
    {"step": "tokenize(add_special=False, parse_special=False)"}     before each llama.cpp call
    {"result": ...} | {"error": "ValueError: ..."}                   its answer

A `step` line names the llama.cpp call in flight, so a death mid-call becomes a crash record
that says which call it was. The requests (`_ops`): evaluate, inspect, vocab, pieces, attrs,
ping, fingerprint, tokenize_many (the sweeps' batches).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ..environment import LimitError
from .worker_limits import die_with_parent, limit_memory


class _Tracer:
    """Wraps the oracle so each llama.cpp call is announced before it runs."""

    def __init__(self, oracle, send) -> None:
        self._oracle, self._send = oracle, send

    def __getattr__(self, name):
        return getattr(self._oracle, name)

    def tokenize(self, text, *, add_special, parse_special):
        self._send({"step": f"tokenize(add_special={add_special}, parse_special={parse_special})"})
        return self._oracle.tokenize(text, add_special=add_special, parse_special=parse_special)

    def detokenize(self, ids, *, remove_special, unparse_special):
        self._send({"step": f"detokenize(remove_special={remove_special}, "
                            f"unparse_special={unparse_special})"})
        return self._oracle.detokenize(ids, remove_special=remove_special, unparse_special=unparse_special)


def _inspect(oracle) -> dict:
    from ..golden.records import vocab_record

    keys = ("general.architecture", "tokenizer.ggml.model", "tokenizer.ggml.pre")
    tokenizer = {"meta": {k: oracle.meta(k) for k in keys}, **oracle.internals()}
    return {"llama": dict(oracle.build_info), "tokenizer": tokenizer, "vocab": vocab_record(oracle)}


def _ops() -> dict[str, Callable]:
    """The requests a worker answers, by name: `op(oracle, traced_oracle, *args)`, JSON-ready."""
    from ..golden.records import evaluate_case, vocab_record
    from ..models.paths import fingerprint

    return {
        "evaluate": lambda oracle, traced, case: evaluate_case(traced, case),
        "inspect": lambda oracle, traced: _inspect(oracle),
        "vocab": lambda oracle, traced: vocab_record(oracle),
        "pieces": lambda oracle, traced: [oracle.token_to_piece(t, special=True).hex()
                                          for t in range(oracle.n_tokens)],
        "pieces_of": lambda oracle, traced, ids: [oracle.token_to_piece(int(t), special=True).hex() for t in ids
                                                  if 0 <= int(t) < oracle.n_tokens],
        "attrs": lambda oracle, traced: [oracle.token_attr(t) for t in range(oracle.n_tokens)],
        "ping": lambda oracle, traced: oracle.n_tokens,
        # the bytes this worker opened, checked against the parent's (harness.models.paths)
        "fingerprint": lambda oracle, traced: fingerprint(oracle.path).as_dict(),
        "tokenize_many": lambda oracle, traced, texts, flags: _tokenize_many(oracle, texts, flags),
    }


def _tokenize_many(oracle, texts: list[str], flags: list[list[bool]]) -> dict:
    """The sweeps' batch (`harness.runs.sweeps`): ids of every text under every flag pair, and the seconds
    spent inside llama.cpp's tokenize calls (timed around each call, so the cost per call is llama.cpp's)."""
    import time

    spent, ids = 0.0, []
    for text in texts:
        row = []
        for add_special, parse_special in flags:
            start = time.perf_counter()
            row.append(oracle.tokenize(text, add_special=bool(add_special), parse_special=bool(parse_special)))
            spent += time.perf_counter() - start
        ids.append(row)
    return {"ids": ids, "seconds": spent, "calls": len(texts) * len(flags)}


def serve(model: str, *, verbose: bool = False, memory_limit: int | None = None,
          parent: int | None = None) -> int:
    """Worker main loop: load `model`, then answer JSON-line requests on stdin."""
    if parent is not None:
        die_with_parent(parent)
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # anything C prints to stdout must not corrupt the protocol

    def send(message: dict) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    try:  # a limit that cannot be set is our set-up's, never llama.cpp's crash on load
        cap = limit_memory(memory_limit) if memory_limit is not None else None
    except LimitError as exc:
        send({"setup_error": f"the llama.cpp worker {exc}"})
        return 0
    try:
        from .llama import LlamaOracle, OracleError
    except ImportError as exc:  # our set-up, not llama.cpp: the parent makes it an exit 2
        send({"setup_error": f"the llama.cpp worker cannot import llama-cpp-python ({exc}); it comes with "
                             "the [harness] extra: pip install \"gguf-parity[harness]\""})
        return 0
    except MemoryError:
        inherited = f" (inherited; --memory-limit asked {memory_limit:,})" if cap != memory_limit else ""
        send({"setup_error": f"a memory limit of {cap or 0:,} bytes{inherited} is too small for a "
                             "llama.cpp worker to start; give more (--memory-limit, default 4G)"})
        return 0
    try:
        oracle = LlamaOracle(model, verbose=verbose)
    except OracleError as exc:  # the path is cut to the file name so goldens do not depend on it
        send({"load_error": str(exc).replace(str(Path(model).parent) + os.sep, "")})
        return 0
    send({"ready": True})
    traced, ops = _Tracer(oracle, send), _ops()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = ops[request["op"]](oracle, traced, *request["args"])
        except Exception as exc:  # noqa: BLE001 - reported per case; the worker lives on
            send({"error": f"{type(exc).__name__}: {exc}"})
            continue
        send({"result": result})
    oracle.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.oracle.worker_child",
                                     description="An oracle worker (started by harness.oracle.workers).")
    parser.add_argument("--serve", required=True, metavar="MODEL")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--memory-limit", type=int, default=None, metavar="BYTES")
    parser.add_argument("--parent", type=int, default=None, metavar="PID")
    args = parser.parse_args(argv)
    return serve(args.serve, verbose=args.verbose, memory_limit=args.memory_limit, parent=args.parent)


if __name__ == "__main__":
    sys.exit(main())
