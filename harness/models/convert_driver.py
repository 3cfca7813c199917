"""Runs inside the converter's venv: llama.cpp's `convert_hf_to_gguf.py`, watched.

Not imported by the harness: `harness.models.convert` runs it as a script with the converter
venv's interpreter (`python convert_driver.py MODE LLAMA_CPP_DIR RESULT_JSON ARGS...`),
so it imports nothing from gguf-parity. Two modes:

- `convert ARGS...`: llama.cpp's own `main()` with ARGS as its command line;
- `fingerprint PATH`: only the converter's pre-tokenizer fingerprint of the
  tokenizer folder PATH (`AutoTokenizer.from_pretrained`), for `inspect --reference`.

Either way the converter's `TextModel.get_vocab_base_pre` is wrapped, never changed:
the wrapper keeps what it decided, the fingerprint it computed (read from its own log
line `chkhsh: ...`, so the hash is the converter's, not a copy of its recipe) and the
name it returned, or the exception it raised. RESULT_JSON gets that and, when the
converter stopped with an error (a refusal), the error's type and first line.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from pathlib import Path

_CHKHSH = re.compile(r"chkhsh:\s+([0-9a-f]{64})")


class _Hashes(logging.Handler):
    """Collects the fingerprints the converter logs while it decides the pre-tokenizer."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.seen: list[str] = []

    def last(self) -> str | None:
        return self.seen[-1] if self.seen else None

    def emit(self, record: logging.LogRecord) -> None:
        found = _CHKHSH.search(record.getMessage())
        if found:
            self.seen.append(found.group(1))


def _watch(result: dict) -> None:
    """Wrap `TextModel.get_vocab_base_pre` so that `result` records each decision."""
    from conversion import base

    original = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        hashes = _Hashes()
        level = base.logger.level
        base.logger.addHandler(hashes)
        base.logger.setLevel(logging.DEBUG)
        base.logger.propagate = False  # the converter's debug lines stay out of its output
        try:
            name = original(self, tokenizer)
        except Exception as exc:
            result["decisions"].append({"chkhsh": hashes.last(), "pre": None,
                                        "raised": f"{type(exc).__name__}: {exc}"})
            raise
        finally:
            base.logger.removeHandler(hashes)
            base.logger.setLevel(level)
            base.logger.propagate = True
        result["decisions"].append({"chkhsh": hashes.last(), "pre": name, "raised": None})
        return name

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre


def _convert(argv: list[str], llama_cpp: Path) -> None:
    sys.argv = [str(llama_cpp / "convert_hf_to_gguf.py"), *argv]
    import convert_hf_to_gguf

    convert_hf_to_gguf.main()


def _fingerprint(path: str) -> None:
    from conversion import base
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    base.TextModel.get_vocab_base_pre(None, tokenizer)


def _limit_memory() -> int:
    """Cap this process's address space at $GGUF_PARITY_CHILD_MEMORY bytes (`harness.models.convert`
    sets it), so a hostile folder costs a MemoryError here, not the machine's memory; the cap in force."""
    import os
    import resource

    limit = int(os.environ.get("GGUF_PARITY_CHILD_MEMORY") or 0)
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return int(resource.getrlimit(resource.RLIMIT_AS)[0])


def main(argv: list[str]) -> int:
    mode, llama_cpp, out, rest = argv[0], Path(argv[1]), Path(argv[2]), argv[3:]
    memory = _limit_memory()
    sys.path[:0] = [str(llama_cpp), str(llama_cpp / "gguf-py")]
    result: dict = {"mode": mode, "decisions": [], "error": None, "memory_limit": memory}
    try:
        _watch(result)
        if mode == "convert":
            _convert(rest, llama_cpp)
        else:
            _fingerprint(rest[0])
    except SystemExit as exc:  # argparse or the converter's own sys.exit(1)
        if exc.code not in (0, None):
            result["error"] = {"type": "SystemExit", "message": f"exit status {exc.code}"}
    except BaseException as exc:  # noqa: BLE001 - whatever stops the converter is its result
        text = str(exc).strip().splitlines()
        result["error"] = {"type": type(exc).__name__, "message": text[0] if text else "",
                           "traceback": traceback.format_exc()[-3000:]}
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
