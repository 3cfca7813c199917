"""The original's chat templates, read as transformers reads them, and compared with the GGUF's.

An original folder (`--reference hf:DIR`) carries its template in one of the places
transformers looks:

- `chat_template.jinja` beside `tokenizer_config.json` (transformers 4.43 and later write it
  there; it wins over the config's key), and `additional_chat_templates/NAME.jinja`;
- `tokenizer_config.json`'s `chat_template`: a string, or a list of `{"name", "template"}`
  (named templates; "default" is the one transformers uses without a name).

The GGUF's are `tokenizer.chat_template` and each `tokenizer.chat_template.NAME`, the names
llama.cpp's converter (gguf-py's `SpecialVocab`) writes: the default is the unnamed key.
Every read is size-bounded and inside the folder (`harness.models.folder_files`: a
`chat_template.jinja` that is a link leaving the folder, a FIFO or a device is refused, never
read); a file too large, not UTF-8 or not the expected JSON shape is a `SetupError` naming it
(exit 2), never a traceback.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..models import folder_files

MAX_TEMPLATE_BYTES = 4 << 20  # a chat template is a few KiB; 4 MiB is already hostile
MAX_CONFIG_BYTES = 64 << 20   # tokenizer_config.json holds added_tokens_decoder: it can be large
DEFAULT = ""  # the name of the default template on both sides
JINJA, EXTRA = "chat_template.jinja", "additional_chat_templates"
MAX_EXTRA = 64  # named templates read from additional_chat_templates/
ABSENT_GGUF, ABSENT_ORIGINAL, TEMPLATE_DIFFERS = "absent in the GGUF", "absent in the original", "template differs"


def _read(folder: Path, name: str, limit: int) -> str:
    """`folder/name` as UTF-8 text, at most `limit` bytes, a regular file inside `folder`
    (`harness.models.folder_files`); `SetupError` naming the file otherwise."""
    path = folder / name
    try:
        data = folder_files.read_file(path, limit, folder=folder)
    except folder_files.TooLarge:
        raise SetupError(f"{path}: larger than {limit >> 20} MiB, refused as a chat template source") from None
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
    if not folder_files.present(path):
        return {}
    try:
        data = json.loads(_read(folder, path.name, MAX_CONFIG_BYTES))
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
    if folder_files.present(folder / JINJA):
        out[DEFAULT] = _read(folder, JINJA, MAX_TEMPLATE_BYTES)
    for name in extra_templates(folder):
        out[Path(name).stem] = _read(folder, name, MAX_TEMPLATE_BYTES)
    return out


def extra_templates(folder: Path) -> list[str]:
    """The names (`additional_chat_templates/NAME.jinja`) of the folder's named templates, at most
    `MAX_EXTRA` of them; each is read (or refused) as any file of the folder."""
    extra = folder / EXTRA
    if not extra.is_dir():
        return []
    return [f"{EXTRA}/{path.name}" for path in sorted(extra.glob("*.jinja"))[:MAX_EXTRA]]


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
