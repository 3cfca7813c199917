"""report.json's `summary.reference` (`run --reference`): the three-way counts of every model, added up.

Each model's `per_model` entry carries its own block (`ModelResult.reference`:
`harness.references.classify.Counts.as_dict()` plus the spec, the reference's
errors and the GGUF key discrepancies). The summary adds the numbers up:

    {"cases", "classes": {class: {"checked", "agree", "differ", "not_applicable"}},
     "pairs_not_applicable": {"add_special=...,parse_special=...": n}, "decode": {...}, "errors",
     "causes": {cause: conversion findings (cases) it explains, `harness.references.causes`},
     "cause_classes": {class of difference: cases},
     "findings": {"conversion": n, "engine_vs_original": n, "decode": n, "reference_error": n}, "models": [...]}

`findings` counts the `reference_findings` entries (one per case, flag pair
and class); `classes` counts cases; `decode` counts detokenizations (16 per case:
llama.cpp's four id lists, each under four detokenize pairs, decoded by the
original too: agree, explained:..., differ, not_applicable; an explained one is a
finding with its cause); `cause_classes` counts the cases per class of difference found by
experiment (`harness.references.class_experiments`: unicode-version, loader-retyping,
model-type, normalizer, segmentation-only, normalization, gguf-key, llama.cpp-behaviour,
unexplained). A report without a reference has no block.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..references.classify import CLASSES, OUTCOMES

NUMBERS = ("checked", *OUTCOMES)


def empty() -> dict:
    return {"cases": 0, "classes": {c: dict.fromkeys(NUMBERS, 0) for c in CLASSES},
            "pairs_not_applicable": {}, "decode": {}, "causes": {}, "cause_classes": {}, "errors": 0}


def add(into: dict, block: Mapping) -> dict:
    """`block` (one model's, or a summed one) added into `into`; returns `into`."""
    into["cases"] += int(block.get("cases", 0))
    into["errors"] += int(block.get("errors", 0))
    for cls, row in (block.get("classes") or {}).items():
        target = into["classes"].setdefault(cls, dict.fromkeys(NUMBERS, 0))
        for key in NUMBERS:
            target[key] += int(row.get(key, 0))
    for part in ("pairs_not_applicable", "decode", "causes", "cause_classes"):
        for key, n in (block.get(part) or {}).items():
            into[part][key] = into[part].get(key, 0) + int(n)
    for key in ("spec", "gguf_keys"):
        if key in block:
            into[key] = block[key]
    return into


def fold(into: dict, counts: Mapping) -> None:
    """A model's block from another report (`merge`) added into its merged counts."""
    block = counts.get("reference")
    if block:
        into["reference"] = add(into.get("reference") or empty(), block)


def attach(report: dict, per_model: Mapping[str, Mapping]) -> None:
    """`report["summary"]["reference"]` from the models' blocks and the report's `reference_findings`,
    when any model had a reference."""
    blocks = {m: c["reference"] for m, c in per_model.items() if c.get("reference")}
    if not blocks:
        return
    total = empty()
    for block in blocks.values():
        add(total, block)
    total.pop("spec", None)
    total.pop("gguf_keys", None)
    total["pairs_not_applicable"] = dict(sorted(total["pairs_not_applicable"].items()))
    for part in ("causes", "cause_classes"):
        total[part] = dict(sorted(total[part].items(), key=lambda item: (-item[1], item[0])))
    total["models"] = sorted(blocks)
    total["findings"] = {}
    for entry in report.get("reference_findings") or []:
        cls = str(entry.get("class"))
        total["findings"][cls] = total["findings"].get(cls, 0) + 1
    report["summary"]["reference"] = total


def line(summary: Mapping) -> str:
    """"; reference: parity 5/5 agree, conversion 4/5 agree (1 differ, 0 n/a), ..." or "" without a reference."""
    block = summary.get("reference")
    if not block:
        return ""
    parts = []
    for cls in CLASSES:
        row = block["classes"].get(cls) or dict.fromkeys(NUMBERS, 0)
        parts.append(f"{cls.replace('_', ' ')} {row['agree']}/{row['checked']} agree "
                     f"({row['differ']} differ, {row['not_applicable']} not applicable)")
    parts.append(decode_line(block.get("decode") or {}))
    errors = f", {block['errors']} reference errors" if block.get("errors") else ""
    found = block.get("causes") or {}
    causes = ("; causes: " + ", ".join(f"{cause} {n}" for cause, n in found.items())) if found else ""
    kinds = block.get("cause_classes") or {}
    classes = ("; classes: " + ", ".join(f"{kind} {n}" for kind, n in kinds.items())) if kinds else ""
    return "; reference: " + ", ".join(parts) + errors + causes + classes


def decode_line(decode: Mapping) -> str:
    """"decode 14/16 agree (2 differ: 1 explained, 1 unexplained; 4 not applicable)": the original's decode of
    llama.cpp's ids against llama.cpp's detokenize, counted per detokenization; an explained difference (a known
    llama.cpp behaviour the original's configuration does not ask for) is a finding like any other."""
    explained = sum(int(n) for key, n in decode.items() if str(key).startswith("explained:"))
    agree, differ = int(decode.get("agree", 0)), int(decode.get("differ", 0))
    return (f"decode {agree}/{agree + explained + differ} agree ({explained + differ} differ: {explained} explained, "
            f"{differ} unexplained; {int(decode.get('not_applicable', 0))} not applicable)")
