"""report.json's `summary.fuzz`: how many fuzzed inputs ran of how many were asked, how many distinct
differences the fuzz found, its seed, and why a hunt stopped short of its budget, if it did.

Each model's `per_model` entry carries its own block (`ModelResult.fuzz`, filled by
`harness.runs.live`): `{"asked": N, "ran": n, "stopped": why or None, "differences": d, "seed": s}`.
The fuzzer spends its whole budget (it shrinks the first input of each new difference and counts the
rest, `harness.inputs.fuzz.hunt`), so `ran` is `asked` unless Hypothesis ran out of distinct inputs or
the run was stopped; the verdict line and the page say so:

    {"asked": 400, "ran": 400, "differences": 3, "seeds": [0], "stopped": {}}
    "; fuzz: 400 of 400 inputs ran, 3 distinct differences (seed 0)"

A report without fuzzing has no block.
"""

from __future__ import annotations

from collections.abc import Mapping


def block(asked: int, ran: int, stopped: str | None, *, differences: int = 0, seed: int | None = None) -> dict:
    """One model's block."""
    return {"asked": asked, "ran": ran, "stopped": stopped, "differences": differences, "seed": seed}


def fold(into: dict, counts: Mapping) -> None:
    """A model's block from another report (`merge`) added into its merged counts."""
    other = counts.get("fuzz")
    if not other:
        return
    mine = into.get("fuzz") or block(0, 0, None)
    why = "; ".join(filter(None, [mine.get("stopped"), other.get("stopped")])) or None
    into["fuzz"] = block(int(mine["asked"]) + int(other.get("asked", 0)), int(mine["ran"]) + int(other.get("ran", 0)),
                         why, differences=int(mine.get("differences") or 0) + int(other.get("differences") or 0),
                         seed=mine.get("seed") if mine.get("seed") is not None else other.get("seed"))


def attach(summary: dict, per_model: Mapping[str, Mapping]) -> None:
    """`summary["fuzz"]` from the models' blocks, when any model was fuzzed."""
    blocks = {m: c["fuzz"] for m, c in sorted(per_model.items()) if c.get("fuzz")}
    if not blocks:
        return
    seeds = sorted({int(b["seed"]) for b in blocks.values() if b.get("seed") is not None})
    summary["fuzz"] = {"asked": sum(int(b.get("asked", 0)) for b in blocks.values()),
                       "ran": sum(int(b.get("ran", 0)) for b in blocks.values()),
                       "differences": sum(int(b.get("differences") or 0) for b in blocks.values()),
                       "seeds": seeds,
                       "stopped": {m: b["stopped"] for m, b in blocks.items() if b.get("stopped")}}


def line(summary: Mapping) -> str:
    """"; fuzz: 200 of 200 inputs ran, 2 distinct differences (seed 0)" or "" (stopped early: which model, why)."""
    total = summary.get("fuzz")
    if not total:
        return ""
    text = f"; fuzz: {total['ran']} of {total['asked']} inputs ran"
    if "differences" in total:  # a report from before the fuzz counted its differences has none
        found = int(total["differences"])
        text += f", {found} distinct difference{'' if found == 1 else 's'}"
    seeds = total.get("seeds") or []
    if seeds:
        text += f" (seed {seeds[0]})" if len(seeds) == 1 else f" (seeds {', '.join(map(str, seeds[:3]))})"
    stopped = total.get("stopped") or {}
    if not stopped:
        return text
    shown = "; ".join(f"{m}: {why}" for m, why in list(stopped.items())[:3])
    more = f" and {len(stopped) - 3} more" if len(stopped) > 3 else ""
    return f"{text} (stopped early on {shown}{more})"
