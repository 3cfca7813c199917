"""report.json's `summary.fuzz`: how many fuzzed inputs ran out of how many were asked, and why a hunt stopped.

Each model's `per_model` entry carries its own block (`ModelResult.fuzz`, filled by
`harness.runs.live`): `{"asked": N, "ran": n, "stopped": why or None}`. The fuzzer
stops at the first failing input (it shrinks that one), so `--fuzz 200` can run 1
input; the verdict line and the page say so instead of leaving "200" standing:

    {"asked": 400, "ran": 201, "stopped": {"llama-bpe": "at the first failing input fuzz-1a2b (shrunk)"}}

A report without fuzzing has no block.
"""

from __future__ import annotations

from collections.abc import Mapping


def block(asked: int, ran: int, stopped: str | None) -> dict:
    """One model's block."""
    return {"asked": asked, "ran": ran, "stopped": stopped}


def fold(into: dict, counts: Mapping) -> None:
    """A model's block from another report (`merge`) added into its merged counts."""
    other = counts.get("fuzz")
    if not other:
        return
    mine = into.get("fuzz") or block(0, 0, None)
    why = "; ".join(filter(None, [mine.get("stopped"), other.get("stopped")])) or None
    into["fuzz"] = block(int(mine["asked"]) + int(other.get("asked", 0)), int(mine["ran"]) + int(other.get("ran", 0)),
                         why)


def attach(summary: dict, per_model: Mapping[str, Mapping]) -> None:
    """`summary["fuzz"]` from the models' blocks, when any model was fuzzed."""
    blocks = {m: c["fuzz"] for m, c in sorted(per_model.items()) if c.get("fuzz")}
    if not blocks:
        return
    summary["fuzz"] = {"asked": sum(int(b.get("asked", 0)) for b in blocks.values()),
                       "ran": sum(int(b.get("ran", 0)) for b in blocks.values()),
                       "stopped": {m: b["stopped"] for m, b in blocks.items() if b.get("stopped")}}


def line(summary: Mapping) -> str:
    """"; fuzz: 1 of 200 inputs ran (stopped early on llama-bpe: at the first failing input ...)" or ""."""
    total = summary.get("fuzz")
    if not total:
        return ""
    text = f"; fuzz: {total['ran']} of {total['asked']} inputs ran"
    stopped = total.get("stopped") or {}
    if not stopped:
        return text
    shown = "; ".join(f"{m}: {why}" for m, why in list(stopped.items())[:3])
    more = f" and {len(stopped) - 3} more" if len(stopped) > 3 else ""
    return f"{text} (stopped early on {shown}{more})"
