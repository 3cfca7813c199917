"""A readable summary of a GGUF file's header and tokenizer metadata.

A value that is not what its key needs is shown as what it is, never made into one: a special
id stored as a float (NaN, 2.5) is not an id, and every NaN or infinite float in the metadata
(a score, a float key) is listed by key and index (`non_finite`): a finding about the file,
which `inspect`, `repair` and `run --reference` name (llama.cpp compares scores when it
merges, and a NaN is neither above nor below any of them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tokenizer.gguf.constants import Keys
from tokenizer.gguf.reader import GGUFFile, as_bytes, read

MAX_SHOWN = 5  # non-finite values shown per key (all are counted)

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
            "special_ids": {k: _as(md[key], int) for k, key in SPECIAL_KEYS.items() if key in md},
            "flags": {k: _as(md[key], bool) for k, key in FLAG_KEYS.items() if key in md},
            "precompiled_charsmap_bytes": _count(charsmap),
            "chat_template_bytes": None if template is None else len(as_bytes(template)),
        },
        "tensors": {
            "count": len(f.tensors),
            "total_bytes": sum(t.nbytes for t in f.tensors),
        },
        "alignment": f.alignment,
        "data_offset": f.data_offset,
        "non_finite": non_finite(md),
    }


def _as(value: Any, kind: type) -> Any:
    """`value` as `kind` (an int id, a bool flag) when it is stored as one; else a text saying what it is."""
    if kind is int and isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if kind is bool and isinstance(value, (bool, np.bool_)):
        return bool(value)
    return f"{_shown(value)} (not {'an id' if kind is int else 'a boolean'})"


def _shown(value: Any) -> str:
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "inf" if value > 0 else "-inf"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def non_finite(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every key holding a NaN or an infinite float, in order: {"key", "count", "first": [[index, "NaN"], ...]}
    (index None for a scalar; at most `MAX_SHOWN` shown, all counted). JSON-ready: no float is kept."""
    found = []
    for key, value in metadata.items():
        bad = _non_finite_at(value)
        if bad:
            found.append({"key": key, "count": len(bad),
                          "first": [[i, _shown(v)] for i, v in bad[:MAX_SHOWN]]})
    return found


def _non_finite_at(value: Any) -> list[tuple[int | None, float]]:
    if isinstance(value, (float, np.floating)):
        return [] if math.isfinite(value) else [(None, float(value))]
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        where = np.flatnonzero(~np.isfinite(value))
        return [(int(i), float(value.flat[i])) for i in where]
    if isinstance(value, list):
        return [(i, float(v)) for i, v in enumerate(value)
                if isinstance(v, (float, np.floating)) and not math.isfinite(v)]
    return []


def non_finite_line(entry: Mapping[str, Any]) -> str:
    """One `non_finite` entry as text: `tokenizer.ggml.scores: 2 non-finite values (NaN at 7, inf at 9)`."""
    shown = ", ".join(v if i is None else f"{v} at {i}" for i, v in entry["first"])
    more = f", and {entry['count'] - len(entry['first']):,} more" if entry["count"] > len(entry["first"]) else ""
    noun = "value" if entry["count"] == 1 else "values"
    return f"{entry['key']}: {entry['count']:,} non-finite {noun} ({shown}{more})"


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
    rows += [("non-finite", non_finite_line(entry)) for entry in summary.get("non_finite", [])]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {'-' if v is None else v}" for k, v in rows)


def _bytes_or_absent(n: int | None) -> str:
    return "absent" if n is None else f"{n:,} bytes"
