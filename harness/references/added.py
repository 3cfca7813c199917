"""The original's own special and added token texts, for boundary cases (`run --reference`).

The boundary slice (`harness.inputs.boundaries`) takes its special texts from
the GGUF, so a token the conversion dropped, or wrote as NORMAL (Mistral v3's
user-defined `[REFERENCE_DOC_1]`), never reaches a case. With `--reference`
the run adds cases built from the original's own list, read here:

- `hf:`: every `added_tokens[].content` of tokenizer.json, and the
  `added_tokens_decoder` contents and `additional_special_tokens` of the
  tokenizer_config.json beside it (plain JSON);
- `spm:`: the pieces of type UNKNOWN, CONTROL and USER_DEFINED (the model's
  protobuf read without the library, `gguf_keys.read_spm`);
- `tekken:`: the special tokens as mistral-common has them (the file's
  `special_tokens`, or a v7-and-older file's defaults, then the `<SPECIAL_n>`
  fillers), asked of the library in a child process
  (`python -m harness.references.tekken FILE`), as every reference library
  runs apart from the harness.

Each text comes with whether the original treats it as special (a special added token, a
CONTROL or UNKNOWN piece, a tekken special token) or as a plain added token (non-special, a
USER_DEFINED piece): the boundary slice adds every one the GGUF does not hold as special the same
way (`harness.inputs.boundaries.reference_probes`), so a retyped token shows up too. In the
original's order, each text once (its first entry).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..environment import child_env, child_memory
from ..errors import SetupError
from ..files.input_limits import loads, read_tokenizer_file
from .gguf_keys import read_spm
from .hf import config_beside
from .specs import ReferenceSpec, parse

SPM_SPECIAL_TYPES = (2, 3, 4)  # UNKNOWN, CONTROL, USER_DEFINED
USER_DEFINED = 4
CHILD_TIMEOUT = 120.0  # seconds for the tekken child; its address space is capped as a worker's


def texts(spec: str | ReferenceSpec) -> list[tuple[str, bool]]:
    """The reference's special and added tokens as (text, special); `SetupError` when its file cannot be read.

    Read once per spec and process (a tekken file's list costs a child loading the library).
    """
    return list(_texts(parse(spec) if isinstance(spec, str) else spec))


@lru_cache(maxsize=8)
def _texts(ref: ReferenceSpec) -> tuple[tuple[str, bool], ...]:
    return tuple(_read(ref))


def _read(ref: ReferenceSpec) -> list[tuple[str, bool]]:
    try:
        if ref.kind == "hf":
            return hf_texts(loads(read_tokenizer_file(ref.path), str(ref.source or ref.path)), config_beside(ref.path))
        if ref.kind == "spm":
            model = read_spm(read_tokenizer_file(ref.path))
            return _once((p, t != USER_DEFINED) for p, t in zip(model["pieces"], model["types"], strict=True)
                         if t in SPM_SPECIAL_TYPES)
        if ref.kind == "tekken":
            return tekken_texts(ref.path)
    except subprocess.TimeoutExpired:
        raise SetupError(f"reference {ref.spec}: cannot read its special tokens: the tekken child did not "
                         f"finish in {CHILD_TIMEOUT:g} s (killed)") from None
    except (OSError, ValueError) as exc:
        raise SetupError(f"reference {ref.spec}: cannot read its special tokens: {exc}") from None
    return []


def hf_texts(data: dict, config: dict) -> list[tuple[str, bool]]:
    """tokenizer.json's added tokens, then the config's added_tokens_decoder and additional_special_tokens."""
    found: list[tuple[Any, bool]] = [(t.get("content"), bool(t.get("special")))
                                     for t in data.get("added_tokens") or [] if isinstance(t, dict)]
    decoder = config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        found += [(t.get("content"), bool(t.get("special"))) for t in decoder.values() if isinstance(t, dict)]
    for item in config.get("additional_special_tokens") or []:
        found.append((item.get("content") if isinstance(item, dict) else item, True))
    return _once(found)


def tekken_texts(path: Path) -> list[tuple[str, bool]]:
    """The tekken file's special tokens by id, as mistral-common has them (the listed ones, or a v7-and-older
    file's defaults, then the `<SPECIAL_n>` fillers), asked of the library in a child process.

    Every one is special: `Tekkenizer.encode` matches none of them in text, whatever its
    `is_control`, and the converter writes them all CONTROL.
    """
    done = subprocess.run([sys.executable, "-m", "harness.references.tekken", str(path), str(child_memory())],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT, stdin=subprocess.DEVNULL,
                          env=child_env(), check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ValueError(f"mistral-common could not list them: {last}")
    return _once((text, True) for text in json.loads(done.stdout))


def _once(items: Iterable[tuple[Any, bool]]) -> list[tuple[str, bool]]:
    """Each text once, with the kind of its first entry; empty and non-text entries left out."""
    seen: dict[str, bool] = {}
    for text, special in items:
        if isinstance(text, str) and text and text not in seen:
            seen[text] = special
    return list(seen.items())
