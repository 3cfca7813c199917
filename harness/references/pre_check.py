"""Is a GGUF's `tokenizer.ggml.pre` the one llama.cpp's converter writes for the original tokenizer?

`inspect FILE.gguf --reference hf:PATH` runs the converter itself on the original's folder
(`harness.models.convert.decide`: a vocab-only conversion in the converter venv, into a private
folder) and compares the `tokenizer.ggml.pre` it wrote with the GGUF's key. The line names the
converter's path, as its driver recorded it: only the BPE and WordPiece paths (`_set_vocab_gpt2`,
`BertModel.set_vocab`, through `get_vocab_base`) compute a fingerprint (chkhsh) and map it to a name;
`_set_vocab_sentencepiece` and `_set_vocab_llama_hf` write `default` and compute none, so no line
claims a fingerprint mismatch for them; a refusal names the path that refused. `spm:PATH` needs no
converter: `_set_vocab_sentencepiece` writes `tokenizer.ggml.pre = "default"`, so a SentencePiece
GGUF is consistent when its key is `default` or absent (which llama.cpp reads as `default`).
`tekken:PATH` neither: the converter's `--mistral-format` path (`_set_vocab_mistral`) writes
`tekken` for every tekken file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..models import folder_data

KINDS = ("hf", "spm", "tekken")
SPM_PATH = "_set_vocab_sentencepiece"  # the converter's path for a tokenizer.model
TEKKEN_PATH = "_set_vocab_mistral"  # and for a tekken.json (--mistral-format)


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
    """What the converter makes of the original: {spec, kind, chkhsh, expected_pre, path, ...}.

    An spm: or tekken: file is opened and checked first (a SentencePiece model with its
    pieces, a tekken file with its config and vocab): a file that is neither is a
    `SetupError`, never "consistent". An hf: folder is converted (`convert.decide`): `path` is
    the converter's path, `fingerprint` whether it computes one, `expected_pre` what it wrote,
    `refusal` why it wrote nothing.
    """
    kind, path = parse_spec(spec)
    if kind == "spm":
        folder_data.sentencepiece_pieces(_file(path, "tokenizer.model"))
        return {"spec": spec, "kind": kind, "chkhsh": None, "expected_pre": None, "path": SPM_PATH}
    if kind == "tekken":  # `_set_vocab_mistral` names every tekken vocabulary so, without a fingerprint
        folder_data.read_tekken(_file(path, "tekken.json"))
        return {"spec": spec, "kind": kind, "chkhsh": None, "expected_pre": "tekken", "path": TEKKEN_PATH}
    from ..models.convert import converter_path, decide

    record = decide(path)
    taken = converter_path(record) or {}
    refusal = record.get("refusal")
    return {"spec": spec, "kind": kind, "chkhsh": record.get("chkhsh"), "path": taken.get("name"),
            "fingerprint": bool(taken.get("fingerprint") or record.get("chkhsh")),
            "expected_pre": None if refusal else (record.get("written") or {}).get("pre"),
            "refusal": f"{refusal['type']}: {refusal['message']}" if refusal else None}


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
    if original["kind"] == "spm" or (original["kind"] == "hf" and "refusal" in original
                                     and not original["refusal"] and original["expected_pre"] is None):
        consistent = actual in (None, "default")  # no key written: llama.cpp reads it as default
    else:
        consistent = expected is not None and actual == expected
    return {**original, "file": summary["file"], "gguf_pre": actual, "consistent": consistent}


def describe(verdict: dict[str, Any]) -> str:
    """One line for people."""
    head = f"{verdict['file']} against {verdict['spec']}: "
    actual = verdict["gguf_pre"]
    if verdict["kind"] == "spm":
        why = (f"a SentencePiece model has no fingerprint; the converter's {SPM_PATH} writes "
               "tokenizer.ggml.pre='default'")
        return head + (f"consistent ({why}; the GGUF has {actual!r})" if verdict["consistent"]
                       else f"INCONSISTENT: the GGUF has tokenizer.ggml.pre={actual!r}, but {why}")
    verb = "consistent" if verdict["consistent"] else "INCONSISTENT"
    if verdict["kind"] == "tekken":
        return head + (f"{verb}: the converter's --mistral-format path writes 'tekken' for a tekken file "
                       f"({TEKKEN_PATH}, no fingerprint); the GGUF has tokenizer.ggml.pre={actual!r}")
    fp, path = verdict["chkhsh"], verdict.get("path") or "its path"
    if verdict.get("refusal") or (verdict["expected_pre"] is None and "refusal" not in verdict):
        why = verdict.get("refusal") or "it does not recognise the original's fingerprint"
        shown = f"; chkhsh {fp}" if fp else ""
        return head + (f"INCONSISTENT: the converter refuses this folder (refused by {path}: {why}{shown}), "
                       f"yet the GGUF has tokenizer.ggml.pre={actual!r}")
    if verdict.get("fingerprint", True) and fp:
        return head + (f"{verb}: the converter's {path} maps the original's fingerprint (chkhsh {fp}) to "
                       f"{verdict['expected_pre']!r}; the GGUF has tokenizer.ggml.pre={actual!r}")
    return head + (f"{verb}: the converter's {path} computes no fingerprint and writes tokenizer.ggml.pre="
                   f"{verdict['expected_pre']!r}; the GGUF has tokenizer.ggml.pre={actual!r}")
