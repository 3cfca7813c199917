"""A long document's golden record, held compactly: a digest per block of ids, not the ids.

A document case (`harness.inputs.documents`) gives llama.cpp's answer as tens of
thousands of ids per flag combination; in a golden it is written as

    {"id": "doc-diverse", "document": {"sha256": ..., "size": 462588},
     "digest": [{"ids": {"n": 109872, "blocks": ["<16 hex>", ...]}, "detokenize": [...4]},
                ... 4 in (add_special, parse_special) order FF FT TF TT]}

- `ids`: `n` ids, the first 64 bits of a sha256 over each block of `ID_BLOCK` ids
  (int32 little-endian); or `{"of": k, "pre": [...], "post": [...]}` (encoding k's
  ids with up to two added at either end, BOS/EOS/SEP); or the item is `{"as": k}`;
- each detokenization: `{"as": "input"}`, `{"as": [i, j]}` (an earlier output),
  `{"wrap": [prefix, suffix]}` (the input with short text around it), or
  `{"n": size, "blocks": [...]}` over blocks of `BYTE_BLOCK` bytes.

A crash on a document is `{"id", "document", "crash"}`. Replay (`resolve`) turns a
digest record back into the `evaluate_case` layout against the engine's answer:
an encoding whose digests agree has the engine's ids (a 64-bit collision aside),
one that differs has `ids` None and a `digest_diff` naming the first differing
block, so the report says where (ids `[start, end)`) without the recorded ids.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..inputs.corpus import case_input
from .records import FLAGS, field_bytes, output_field

ID_BLOCK = 256
BYTE_BLOCK = 4096
MAX_WRAP = 2      # ids added around an earlier encoding's: BOS/EOS, CLS/SEP
MAX_WRAP_TEXT = 64  # characters around the input in a wrapped detokenization


def id_blocks(ids: list[int]) -> dict:
    """`{"n", "blocks"}`: 64-bit sha256 prefixes of each block of ID_BLOCK ids (int32 little-endian)."""
    data = np.asarray(ids, dtype="<i4").tobytes()
    return {"n": len(ids), "blocks": _blocks(data, ID_BLOCK * 4)}


def byte_blocks(data: bytes) -> dict:
    """`{"n", "blocks"}` of a detokenization, blocks of BYTE_BLOCK bytes."""
    return {"n": len(data), "blocks": _blocks(data, BYTE_BLOCK)}


def _blocks(data: bytes, size: int) -> list[str]:
    return [hashlib.sha256(data[i:i + size]).hexdigest()[:16] for i in range(0, len(data), size)]


def first_block_diff(expected: dict, got: dict) -> int | None:
    """The index of the first block that differs (or where one side ends), None when both agree."""
    a, b = expected["blocks"], got["blocks"]
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if (expected["n"], len(a)) == (got["n"], len(b)) else min(len(a), len(b))


# -- recording ------------------------------------------------------------------------------

def compact(record: dict, case: dict) -> dict:
    """The golden form of a document case's `evaluate_case` record (or crash record)."""
    head = {"id": record["id"], "document": case["document"]}
    if "crash" in record:
        return {**head, "crash": record["crash"]}
    data = case_input(case)
    items: list[dict] = []
    outputs: dict[bytes, list[int]] = {}
    for i, item in enumerate(record["encode"]):
        same = next((k for k, e in enumerate(record["encode"][:i])
                     if e["ids"] == item["ids"] and e["detokenize"] == item["detokenize"]), None)
        if same is not None:
            items.append({"as": same})
            continue
        detok = []
        for j, out in enumerate(item["detokenize"]):
            value = field_bytes(out)
            detok.append(_output(value, data, outputs))
            outputs.setdefault(value, [i, j])
        items.append({"ids": _ids(item["ids"], record["encode"][:i]), "detokenize": detok})
    return {**head, "digest": items}


def _ids(ids: list[int], earlier: list[dict]) -> dict:
    for k, other in enumerate(earlier):
        inner = other["ids"]
        extra = len(ids) - len(inner)
        for start in range(min(MAX_WRAP, extra) + 1):
            if inner and extra - start <= MAX_WRAP and ids[start:start + len(inner)] == inner:
                return {"of": k, "pre": ids[:start], "post": ids[start + len(inner):]}
    return id_blocks(ids)


def _output(value: bytes, data: bytes, outputs: dict[bytes, list[int]]) -> dict:
    if value == data:
        return {"as": "input"}
    if value in outputs:
        return {"as": outputs[value]}
    start = value.find(data) if data else -1
    if start >= 0 and len(value) - len(data) <= MAX_WRAP_TEXT:
        try:
            return {"wrap": [value[:start].decode("utf-8"), value[start + len(data):].decode("utf-8")]}
        except UnicodeDecodeError:
            pass
    return byte_blocks(value)


# -- replay -----------------------------------------------------------------------------------

def resolve(golden: dict, got: dict) -> dict:
    """The golden record in `evaluate_case` layout, filled from the engine's `got` where the digests agree.

    An encoding or output whose digest differs has `ids` None (and `digest_diff`), or an
    output `"text"` that says what was recorded (`digest_diff` on it too).
    """
    data = case_input(golden)
    encode: list[dict] = []
    for (add_special, parse_special), item, theirs in zip(FLAGS, golden["digest"], got["encode"], strict=True):
        head = {"add_special": add_special, "parse_special": parse_special}
        if "as" in item:
            source = encode[item["as"]]
            encode.append({**source, **head})
            continue
        entry = {**head, **_resolve_ids(item["ids"], encode, theirs["ids"])}
        ours = [field_bytes(d) for d in theirs.get("detokenize", [])]
        entry["detokenize"] = []
        encode.append(entry)  # before its outputs: one may refer to an earlier output of the same encoding
        for j, (out, flags) in enumerate(zip(item["detokenize"], FLAGS, strict=True)):
            entry["detokenize"].append(_resolve_output(out, data, encode, flags, ours[j] if j < len(ours) else None))
    return {k: v for k, v in golden.items() if k != "digest"} | {"encode": encode}


def _resolve_ids(ids: dict, encode: list[dict], ours: list[int]) -> dict:
    if "of" in ids:
        base = encode[ids["of"]]["ids"]
        if base is None:
            return {"ids": None, "digest_diff": {"unknown": f"the recorded ids are encoding {ids['of']}'s "
                                                            "with ids added, and those differ"}}
        return {"ids": ids["pre"] + base + ids["post"]}
    mine = id_blocks(ours)
    block = first_block_diff(ids, mine)
    if block is None:
        return {"ids": list(ours)}
    return {"ids": None, "digest_diff": {"recorded_n": ids["n"], "n": len(ours), "block": ID_BLOCK,
                                         "first_block": block, "start": block * ID_BLOCK}}


def _resolve_output(out: dict, data: bytes, encode: list[dict], flags: tuple[bool, bool],
                    ours: bytes | None) -> dict:
    head = {"remove_special": flags[0], "unparse_special": flags[1]}
    if out.get("as") == "input":
        return {**head, **output_field(data)}
    if "wrap" in out:
        prefix, suffix = out["wrap"]
        return {**head, **output_field(prefix.encode("utf-8") + data + suffix.encode("utf-8"))}
    if "as" in out:
        i, j = out["as"]
        return {**encode[i]["detokenize"][j], **head}
    if ours is not None and first_block_diff(out, byte_blocks(ours)) is None:
        return {**head, **output_field(ours)}
    block = first_block_diff(out, byte_blocks(ours or b""))
    start = (block or 0) * BYTE_BLOCK
    return {**head, "text": f"(recorded as a digest: {out['n']:,} bytes; the engine's {len(ours or b''):,} "
                            f"differ from byte {start:,} on)",
            "digest_diff": {"recorded_n": out["n"], "start": start, "block": BYTE_BLOCK}}


def diff_digests(old: dict, new: dict) -> list[str]:
    """Readable differences between two digest records of one document (drift); empty when their digests agree."""
    if old.get("document") != new.get("document"):
        return [f"document changed: {old.get('document')} -> {new.get('document')}"]
    out = []
    for (add_special, parse_special), a, b in zip(FLAGS, old.get("digest") or [], new.get("digest") or []):
        if a == b:
            continue
        where = ""
        if "blocks" in a.get("ids", {}) and "blocks" in b.get("ids", {}):
            block = first_block_diff(a["ids"], b["ids"])
            where = f" from ids [{block * ID_BLOCK}, {(block + 1) * ID_BLOCK}) on" if block is not None else \
                " (same ids, other detokenization)"
        out.append(f"[add_special={add_special} parse_special={parse_special}] document digest changed{where}")
    return out
