"""A readable summary of a GGUF file's header and tokenizer metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizer.gguf.constants import Keys
from tokenizer.gguf.reader import GGUFFile, as_bytes, read

SPECIAL_KEYS = {
    "bos": Keys.BOS_ID, "eos": Keys.EOS_ID, "eot": Keys.EOT_ID, "eom": Keys.EOM_ID,
    "unk": Keys.UNK_ID, "sep": Keys.SEP_ID, "pad": Keys.PAD_ID, "cls": Keys.CLS_ID,
    "mask": Keys.MASK_ID, "fim_pre": Keys.FIM_PRE_ID, "fim_suf": Keys.FIM_SUF_ID,
    "fim_mid": Keys.FIM_MID_ID, "fim_pad": Keys.FIM_PAD_ID, "fim_rep": Keys.FIM_REP_ID,
    "fim_sep": Keys.FIM_SEP_ID,
}
FLAG_KEYS = {
    "add_bos_token": Keys.ADD_BOS, "add_eos_token": Keys.ADD_EOS, "add_sep_token": Keys.ADD_SEP,
    "add_space_prefix": Keys.ADD_SPACE_PREFIX, "remove_extra_whitespaces": Keys.REMOVE_EXTRA_WS,
}


def _count(value: Any) -> int | None:
    return None if value is None else len(value)


def summarize(path: Path) -> dict[str, Any]:
    """The summary as plain JSON-ready data."""
    f: GGUFFile = read(path)
    md = f.metadata
    template = md.get(Keys.CHAT_TEMPLATE)
    charsmap = md.get(Keys.PRECOMPILED_CHARSMAP)
    return {
        "file": str(path),
        "file_size": f.file_size,
        "gguf_version": f.version,
        "architecture": md.get(Keys.ARCHITECTURE),
        "name": md.get(Keys.NAME),
        "metadata_keys": len(md),
        "tokenizer": {
            "model": md.get(Keys.MODEL),
            "pre": md.get(Keys.PRE),
            "vocab_size": _count(md.get(Keys.TOKENS)),
            "scores": _count(md.get(Keys.SCORES)),
            "token_types": _count(md.get(Keys.TOKEN_TYPE)),
            "merges": _count(md.get(Keys.MERGES)),
            "special_ids": {k: int(md[key]) for k, key in SPECIAL_KEYS.items() if key in md},
            "flags": {k: bool(md[key]) for k, key in FLAG_KEYS.items() if key in md},
            "precompiled_charsmap_bytes": _count(charsmap),
            "chat_template_bytes": None if template is None else len(as_bytes(template)),
        },
        "tensors": {
            "count": len(f.tensors),
            "total_bytes": sum(t.nbytes for t in f.tensors),
        },
        "alignment": f.alignment,
        "data_offset": f.data_offset,
    }


def render(summary: dict[str, Any]) -> str:
    """The summary as aligned text lines."""
    tok = summary["tokenizer"]
    rows = [
        ("file", summary["file"]),
        ("size", f"{summary['file_size']:,} bytes"),
        ("GGUF version", summary["gguf_version"]),
        ("architecture", summary["architecture"]),
        ("name", summary["name"]),
        ("metadata keys", summary["metadata_keys"]),
        ("tokenizer model", tok["model"]),
        ("pre-tokenizer", tok["pre"] if tok["pre"] is not None else "(none)"),
        ("vocab size", tok["vocab_size"]),
        ("scores / types", f"{tok['scores']} / {tok['token_types']}"),
        ("merges", tok["merges"]),
        ("precompiled charsmap", _bytes_or_absent(tok["precompiled_charsmap_bytes"])),
        ("chat template", _bytes_or_absent(tok["chat_template_bytes"])),
    ]
    rows += [(f"special {k}", v) for k, v in tok["special_ids"].items()]
    rows += [(k, v) for k, v in tok["flags"].items()]
    rows += [
        ("tensors", summary["tensors"]["count"]),
        ("tensor bytes", f"{summary['tensors']['total_bytes']:,}"),
        ("alignment", summary["alignment"]),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {'-' if v is None else v}" for k, v in rows)


def _bytes_or_absent(n: int | None) -> str:
    return "absent" if n is None else f"{n:,} bytes"
