"""Is a GGUF's `tokenizer.ggml.pre` the one llama.cpp's converter picks for the original tokenizer?

`inspect FILE.gguf --reference hf:PATH` asks the converter itself (its
`get_vocab_base_pre`, run in the converter venv by `harness.models.convert.fingerprint`) for
the original's fingerprint (chkhsh) and the name it maps it to, and compares that name
with the GGUF's key. `spm:PATH` needs no converter: `_set_vocab_sentencepiece` computes
no fingerprint and writes `tokenizer.ggml.pre = "default"`, so a SentencePiece GGUF is
consistent when its key is `default` or absent (which llama.cpp reads as `default`).
`tekken:PATH` neither: the converter's `--mistral-format` path writes `tekken` for every
tekken file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..models import folder_data

KINDS = ("hf", "spm", "tekken")


def parse_spec(spec: str) -> tuple[str, Path]:
    """`("hf", PATH)` for `hf:PATH`; `SetupError` for anything else or a missing path."""
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in KINDS or not rest:
        raise SetupError(f"--reference {spec!r}: expected hf:PATH, spm:PATH or tekken:PATH")
    path = Path(rest)
    if not path.exists():
        raise SetupError(f"--reference {spec!r}: {path}: no such file or folder")
    return kind, path


def original_fingerprint(spec: str) -> dict[str, Any]:
    """What the converter makes of the original: {spec, kind, chkhsh, expected_pre}.

    An spm: or tekken: file is opened and checked first (a SentencePiece model with its
    pieces, a tekken file with its config and vocab): a file that is neither is a
    `SetupError`, never "consistent".
    """
    kind, path = parse_spec(spec)
    if kind == "spm":
        folder_data.sentencepiece_pieces(_file(path, "tokenizer.model"))
        return {"spec": spec, "kind": kind, "chkhsh": None, "expected_pre": None}
    if kind == "tekken":  # `_set_vocab_mistral` names every tekken vocabulary so, without a fingerprint
        folder_data.read_tekken(_file(path, "tekken.json"))
        return {"spec": spec, "kind": kind, "chkhsh": None, "expected_pre": "tekken"}
    from ..models.convert import fingerprint

    found = fingerprint(path)
    return {"spec": spec, "kind": kind, "chkhsh": found["chkhsh"], "expected_pre": found["pre"]}


def _file(path: Path, name: str) -> Path:
    """`path`, or `path/name` for a folder; `SetupError` when that is not a file."""
    file = path / name if path.is_dir() else path
    if not file.is_file():
        raise SetupError(f"--reference: no such file {file}")
    return file


def check_pre(summary: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
    """The verdict for one GGUF summary (`harness.models.summary.summarize`) against `original`."""
    actual = summary["tokenizer"]["pre"]
    expected = original["expected_pre"]
    if original["kind"] == "spm":
        consistent = actual in (None, "default")
    else:
        consistent = expected is not None and actual == expected
    return {**original, "file": summary["file"], "gguf_pre": actual, "consistent": consistent}


def describe(verdict: dict[str, Any]) -> str:
    """One line for people."""
    head = f"{verdict['file']} against {verdict['spec']}: "
    actual = verdict["gguf_pre"]
    if verdict["kind"] == "spm":
        why = "a SentencePiece model has no fingerprint; the converter writes tokenizer.ggml.pre='default'"
        return head + (f"consistent ({why}; the GGUF has {actual!r})" if verdict["consistent"]
                       else f"INCONSISTENT: the GGUF has tokenizer.ggml.pre={actual!r}, but {why}")
    verb = "consistent" if verdict["consistent"] else "INCONSISTENT"
    if verdict["kind"] == "tekken":
        return head + (f"{verb}: the converter's --mistral-format path writes 'tekken' for a tekken file; "
                       f"the GGUF has tokenizer.ggml.pre={actual!r}")
    fp = verdict["chkhsh"]
    if verdict["expected_pre"] is None:
        return head + (f"INCONSISTENT: the converter does not recognise the original's fingerprint "
                       f"(chkhsh {fp}: it would refuse to convert it), yet the GGUF has "
                       f"tokenizer.ggml.pre={actual!r}")
    return head + (f"{verb}: the converter maps the original's fingerprint (chkhsh {fp}) to "
                   f"{verdict['expected_pre']!r}; the GGUF has tokenizer.ggml.pre={actual!r}")
