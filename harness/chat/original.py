"""The original's chat templates, read as transformers reads them, and compared with the GGUF's.

An original folder (`--reference hf:DIR`) carries its template in one of the places
transformers looks:

- `chat_template.jinja` beside `tokenizer_config.json` (transformers 4.43 and later write it
  there; it wins over the config's key), and `additional_chat_templates/NAME.jinja`;
- `tokenizer_config.json`'s `chat_template`: a string, or a list of `{"name", "template"}`
  (named templates; "default" is the one transformers uses without a name).

The GGUF's are `tokenizer.chat_template` and each `tokenizer.chat_template.NAME`, the names
llama.cpp's converter (gguf-py's `SpecialVocab`) writes: the default is the unnamed key.
Every read is size-bounded; a file too large, not UTF-8 or not the expected JSON shape is a
`SetupError` naming it (exit 2), never a traceback.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import SetupError

MAX_TEMPLATE_BYTES = 4 << 20  # a chat template is a few KiB; 4 MiB is already hostile
MAX_CONFIG_BYTES = 64 << 20   # tokenizer_config.json holds added_tokens_decoder: it can be large
DEFAULT = ""  # the name of the default template on both sides
ABSENT_GGUF, ABSENT_ORIGINAL, TEMPLATE_DIFFERS = "absent in the GGUF", "absent in the original", "template differs"


def _read(path: Path, limit: int) -> str:
    """`path` as UTF-8 text, at most `limit` bytes; `SetupError` naming the file otherwise."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise SetupError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise SetupError(f"{path}: larger than {limit >> 20} MiB, refused as a chat template source")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SetupError(f"{path}: not UTF-8 (byte {exc.start})") from None


def folder_of(reference: str | Path) -> Path:
    """The original's folder from `hf:DIR`, `hf:DIR/tokenizer.json` or a plain path."""
    text = str(reference)
    if text.startswith("hf:"):
        text = text[3:]
    path = Path(text).expanduser()
    return path.parent if path.is_file() else path  # a path that does not exist stays itself: the caller refuses it


def config(folder: Path) -> dict[str, Any]:
    """tokenizer_config.json of `folder` ({} when there is none); `SetupError` when it is not a JSON object."""
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(_read(path, MAX_CONFIG_BYTES))
    except json.JSONDecodeError as exc:
        raise SetupError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise SetupError(f"{path}: not a JSON object")
    return data


def _config_templates(value: Any, path: Path) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, str):
        return {DEFAULT: value}
    if isinstance(value, list) and all(isinstance(v, dict) and isinstance(v.get("name"), str)
                                       and isinstance(v.get("template"), str) for v in value):
        return {(DEFAULT if v["name"] == "default" else v["name"]): v["template"] for v in value}
    raise SetupError(f"{path}: chat_template is neither a string nor a list of {{name, template}} objects")


def original_templates(folder: Path) -> dict[str, str]:
    """Name -> template text of the original folder, as transformers would load them ("" is the default)."""
    out = _config_templates(config(folder).get("chat_template"), folder / "tokenizer_config.json")
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        out[DEFAULT] = _read(jinja, MAX_TEMPLATE_BYTES)
    extra = folder / "additional_chat_templates"
    if extra.is_dir():
        for path in sorted(extra.glob("*.jinja"))[:64]:
            out[path.stem] = _read(path, MAX_TEMPLATE_BYTES)
    return out


def gguf_templates(metadata: Mapping[str, Any]) -> dict[str, str]:
    """Name -> template text of a GGUF's metadata ("" is `tokenizer.chat_template`)."""
    prefix = "tokenizer.chat_template"
    return {key[len(prefix):].lstrip("."): value for key, value in metadata.items()
            if key.startswith(prefix) and isinstance(value, str)}


def compare(gguf: Mapping[str, str], original: Mapping[str, str]) -> list[dict[str, Any]]:
    """One finding per template name whose bytes differ, or which one side lacks (a conversion finding).

    Each finding: name, class (`TEMPLATE_DIFFERS`, `ABSENT_GGUF`, `ABSENT_ORIGINAL`), both
    sizes and, for differing bytes, a unified diff by line (`diff`, at most 200 lines).
    """
    findings = []
    for name in sorted(set(gguf) | set(original)):
        ours, theirs = gguf.get(name), original.get(name)
        if ours == theirs:
            continue
        kind = ABSENT_GGUF if ours is None else ABSENT_ORIGINAL if theirs is None else TEMPLATE_DIFFERS
        finding: dict[str, Any] = {"name": name or "default", "class": kind,
                                   "gguf_chars": None if ours is None else len(ours),
                                   "original_chars": None if theirs is None else len(theirs)}
        if ours is not None and theirs is not None:
            finding["diff"] = template_diff(theirs, ours)
        findings.append(finding)
    return findings


def template_diff(original: str, gguf: str, limit: int = 200) -> list[str]:
    """A unified diff, the original's lines as "-" and the GGUF's as "+"; line ends kept visible."""
    lines = list(difflib.unified_diff(original.splitlines(keepends=True), gguf.splitlines(keepends=True),
                                      "original", "gguf", n=2))
    body = [not line.startswith(("---", "+++", "@@")) for line in lines]
    out = [line.rstrip("\n") + ("\u21b5" if is_body and line.endswith("\n") else "")
           for line, is_body in zip(lines, body, strict=True)]
    if not out and original != gguf:  # differ only in a final newline or CR: difflib shows nothing useful
        out = [f"- {original[-40:]!r}", f"+ {gguf[-40:]!r}"]
    return out[:limit] + ([f"... {len(out) - limit} more lines"] if len(out) > limit else [])
