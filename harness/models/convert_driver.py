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
name it returned, or the exception it raised. Its vocabulary paths (`_set_vocab_sentencepiece`,
`_set_vocab_llama_hf`, `_set_vocab_gpt2`, `_set_vocab_mistral`, `get_vocab_base`, ...) are
wrapped the same way (`paths`: which ran, for which model class, and what each raised), so a
line about a conversion or a refusal names the path that made it. RESULT_JSON gets that and, when the
converter stopped with an error (a refusal), the error's type and first line.

No code of the model folder runs: before the converter starts, transformers' one loader of
a folder's own Python (`get_class_from_dynamic_module`, behind every `trust_remote_code=True`
of `AutoTokenizer`, `AutoConfig` and the other auto classes) is replaced by one that raises
`CustomCodeRefused`, which the harness reports as bad input (exit 2), not as a refusal.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import traceback
from pathlib import Path

_CHKHSH = re.compile(r"chkhsh:\s+([0-9a-f]{64})")
_LOADER = "get_class_from_dynamic_module"  # transformers' one loader of a folder's own Python
FOLDER_CODE_ENV = "GGUF_PARITY_FOLDER_CODE"  # harness.models.convert.FOLDER_CODE_ENV (nothing is imported from it)


class CustomCodeRefused(RuntimeError):
    """transformers was about to import Python from the model folder (or the hub's module cache)."""


def _refuse_custom_code(result: dict) -> None:
    """Make every transformers route to a folder's own code raise `CustomCodeRefused`.

    The refusal is also kept in `result["custom_code"]`, so that a converter catching
    the exception and failing otherwise is still reported as the refusal it was.
    """
    def refuse(class_reference, pretrained_model_name_or_path, *args, **kwargs):
        result["custom_code"] = (f"the tokenizer needs custom code: the converter asked for the folder's own "
                                 f"{class_reference}, and gguf-parity runs no code from a model folder")
        raise CustomCodeRefused(result["custom_code"])

    try:
        from transformers import dynamic_module_utils
    except ImportError:  # no transformers: nothing here loads a folder's code
        return
    _refuse_trusted_tokenizer(result, refuse)
    original = getattr(dynamic_module_utils, _LOADER)
    setattr(dynamic_module_utils, _LOADER, refuse)  # what a module imported from now on gets
    for module in list(sys.modules.values()):  # and the modules that imported it by name already
        # the module's own namespace only: `getattr` on transformers' lazy modules imports submodules
        if (getattr(module, "__dict__", None) or {}).get(_LOADER) is original:
            setattr(module, _LOADER, refuse)


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


def _refuse_trusted_tokenizer(result: dict, refuse) -> None:
    """`AutoTokenizer.from_pretrained(..., trust_remote_code=True)` on a folder whose `auto_map` named a
    custom tokenizer (removed from the copy the converter reads) is the converter asking for that code."""
    code = os.environ.get(FOLDER_CODE_ENV)
    if not code:
        return
    import transformers

    auto = transformers.AutoTokenizer
    original = auto.from_pretrained

    def from_pretrained(path, *args, **kwargs):
        if kwargs.get("trust_remote_code"):
            refuse(code, path)
        return original(path, *args, **kwargs)

    auto.from_pretrained = staticmethod(from_pretrained)


def _watch_paths(result: dict) -> None:
    """Wrap the converter's vocabulary paths (`TextModel._set_vocab_*` and `get_vocab_base`, which the BPE and
    WordPiece paths share) so that `result["paths"]` records each one entered, in order: its name, the model
    class it ran for, how deep it was called, and the exception it raised (None: it returned). A path that
    raised and was caught is one the converter fell through (a SentencePiece path without tokenizer.model);
    the one that stopped the converter names its refusal."""
    from conversion import base

    names = [n for n in vars(base.TextModel) if n.startswith("_set_vocab_") or n == "get_vocab_base"]
    depth = [0]

    def wrap(name: str, original):
        def path(self, *args, **kwargs):
            entry = {"path": name, "model": type(self).__name__, "depth": depth[0], "raised": None}
            result["paths"].append(entry)
            depth[0] += 1
            try:
                return original(self, *args, **kwargs)
            except Exception as exc:
                lines = str(exc).strip().splitlines()
                entry["raised"] = f"{type(exc).__name__}: {lines[0] if lines else ''}"
                raise
            finally:
                depth[0] -= 1
        return path

    for name in names:
        setattr(base.TextModel, name, wrap(name, getattr(base.TextModel, name)))


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
    sets it), so a hostile folder costs a MemoryError here, not the machine's memory; the cap in force.

    An inherited lower limit (`ulimit -v`, a container, `prlimit`) stays: the cap is never raised, as
    `harness.environment.lower_limit` (not imported: this script runs in the converter's venv)."""
    import os
    import resource

    limit = int(os.environ.get("GGUF_PARITY_CHILD_MEMORY") or 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if limit:
        limit = min([limit, *(v for v in (soft, hard) if v != resource.RLIM_INFINITY and v >= 0)])
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError) as exc:
            raise LimitError(f"cannot set the memory limit RLIMIT_AS to {limit:,} bytes "
                             f"(inherited soft {soft}, hard {hard}): {exc}") from None
    return int(resource.getrlimit(resource.RLIMIT_AS)[0])


class LimitError(RuntimeError):
    """The converter's memory cap could not be set: the harness's set-up, never the converter's refusal."""


def main(argv: list[str]) -> int:
    mode, llama_cpp, out, rest = argv[0], Path(argv[1]), Path(argv[2]), argv[3:]
    result: dict = {"mode": mode, "decisions": [], "paths": [], "error": None, "memory_limit": None}
    try:
        result["memory_limit"] = _limit_memory()
    except LimitError as exc:
        result["error"] = {"type": LimitError.__name__, "message": str(exc)}
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return 0
    sys.path[:0] = [str(llama_cpp), str(llama_cpp / "gguf-py")]
    try:
        _refuse_custom_code(result)
        _watch(result)
        _watch_paths(result)
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
    if result.get("custom_code"):
        result["error"] = {"type": CustomCodeRefused.__name__, "message": result["custom_code"]}
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
