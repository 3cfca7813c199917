"""`--shard K/N`: a deterministic partition of a command's work, and the checks `merge-reports` makes.

A command lists its work as `Unit`s in a stable order: `run` and `compare` one
per (model, case id), plus one `MODEL` unit per model (its load outcome and
vocabulary-record checks) and, for `run --fuzz`, one `FUZZ` unit per model
weighing the fuzz budget; `selftest` one per mutant; `chat` one per template.
`cut(units, n)` cuts that list into `n` contiguous slices of about equal
cumulative weight (cases, not vocabularies, are balanced), so every unit lands in
exactly one shard whatever `n` is. Each cut splits at most one model, so the
models' load cost is paid at most `n - 1` extra times in all, never once per
shard. A slice keeps the unsharded order, so `merge-reports` concatenates the
shards' lists back into the unsharded report.

A model's `MODEL` unit comes first in its list and goes with its first case
(`_with_next`): the shard owning it records
everything about the model as a whole (the vocabulary checks, a load failure, a
"not checked" reason); any other shard holding some of its cases keeps only
their case-level results (`case_part`).

Fuzzing is not split: Hypothesis generates each input from what came before, so
the union of `n` smaller hunts is not the one hunt of the unsharded run. The
shard owning a model's `FUZZ` unit runs the model's whole fuzz budget, which is
exactly the unsharded hunt (same seed, same inputs).

The partition's identity (`Partition.digest`: the command kind and the full
weighed unit list) goes into report.json's `meta.shard` with K and N;
`check_complete` refuses a set of reports whose shards overlap or miss one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice

from ..errors import SetupError

MODEL = "<model>"          # a model's own checks: load outcome, vocabulary record
# The notes a model's load outcome writes (harness.runs.live, harness.runs.outcomes); every other note is
# about cases or the fuzz hunt and stays with the shard that ran them.
MODEL_NOTES = ("llama.cpp crashed loading", "engine failed to load", "both refuse the file")
FUZZ = "<fuzz>"            # a model's fuzz hunt, run whole by one shard
SHOWN_MISSING = 10         # missing shards named in merge-reports' refusal; the rest are counted


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`K/N` with 1 <= K <= N; a `SetupError` otherwise."""
        parts = str(text).strip().split("/")
        try:
            index, count = (int(p) for p in parts)
        except ValueError:
            raise SetupError(f"--shard {text!r}: expected K/N, e.g. 2/3") from None
        if count < 1 or not 1 <= index <= count:
            raise SetupError(f"--shard {text}: K must be between 1 and N (N >= 1)")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def from_text(text: str | None) -> Shard | None:
    """`--shard` parsed; None when it is not given.

    The commands never read `$GGUF_PARITY_SHARD` themselves (a CI job that sets it
    would shard every harness call, the test suite's too): noxfile.py turns it into
    `--shard` for its parity sessions.
    """
    return None if text is None else Shard.parse(text)


def add_option(parser) -> None:
    parser.add_argument("--shard", metavar="K/N", default=None,
                        help="only shard K of N of the work, e.g. 2/3 (docs/sharding.md)")


@dataclass(frozen=True)
class Unit:
    """One indivisible piece of work: `item` of `group` (a case of a model), with its weight in cases."""

    group: str
    item: str
    weight: int = 1


def cut(units: Sequence[Unit], count: int) -> list[int]:
    """The shard (1-based) of each unit: contiguous slices of about `total / count` weight each.

    A unit goes to the shard its cumulative weight's midpoint falls in, so
    the assignment depends only on the list and `count`.
    """
    total = sum(max(u.weight, 0) for u in units) or 1
    out, before = [], 0
    for unit in units:
        weight = max(unit.weight, 0)
        middle = 2 * before + weight  # twice the midpoint, in integers
        out.append(min(count, middle * count // (2 * total) + 1))
        before += weight
    return out


@dataclass
class Partition:
    """The units of one shard, and the identity of the whole partition."""

    kind: str
    shard: Shard
    units: int
    weight: int
    digest: str
    owned: dict[str, set[str]] = field(default_factory=dict)  # group -> items of this shard
    owned_weight: int = 0

    def groups(self) -> set[str]:
        return set(self.owned)

    def owns(self, group: str, item: str = MODEL) -> bool:
        return item in self.owned.get(group, ())

    def items(self, group: str) -> set[str]:
        return self.owned.get(group, set())

    def meta(self) -> dict:
        """What report.json's `meta.shard` records (`check_complete` reads it back)."""
        return {"index": self.shard.index, "count": self.shard.count, "kind": self.kind,
                "partition": self.digest, "units": self.units, "weight": self.weight,
                "owned_units": sum(len(v) for v in self.owned.values()), "owned_weight": self.owned_weight}


def partition(kind: str, units: Sequence[Unit], shard: Shard) -> Partition:
    """Shard `shard` of `units` (already in their stable order)."""
    keys = [(u.group, u.item) for u in units]
    if len(set(keys)) != len(keys):
        raise SetupError(f"{kind}: the work list repeats a unit, so it cannot be sharded")
    text = json.dumps([kind, [[u.group, u.item, u.weight] for u in units]], ensure_ascii=False)
    part = Partition(kind=kind, shard=shard, units=len(units), weight=sum(u.weight for u in units),
                     digest=hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16])
    for unit, index in zip(units, _with_next(units, cut(units, shard.count)), strict=True):
        if index == shard.index:
            part.owned.setdefault(unit.group, set()).add(unit.item)
            part.owned_weight += unit.weight
    return part


def _with_next(units: Sequence[Unit], shards: list[int]) -> list[int]:
    """A `MODEL` unit goes with the unit after it when that one is of the same group.

    So the shard that records the model as a whole always checks some of its cases
    too: one holding the vocabulary checks alone would have 0 cases, and call the
    model "not checked".
    """
    out = list(shards)
    for i in range(len(units) - 1):
        if units[i].item == MODEL and units[i + 1].group == units[i].group:
            out[i] = out[i + 1]
    return out


def case_part(result) -> None:
    """Keep only `result`'s case-level outcome (a `harness.compare.result.ModelResult`): another shard owns the model.

    Dropped: findings about the model (`<load>`, `<vocab>`, vocabulary mismatches),
    its "not checked" or refusal reason, its load-outcome notes (`MODEL_NOTES`), and
    the vocabulary rows of its capability tally (reset as new).
    """
    from ..report.build import LISTS
    from ..subjects import capabilities as capmod
    # Findings about the model go; the side lists (engine flakes, harness faults) stay whole:
    # each is an event of this shard's own run, whatever case id it names.
    for kind in LISTS:  # every findings list a report carries, those added later too
        entries = getattr(result, kind)
        entries[:] = [e for e in entries if e.get("case_id") is not None and not str(e["case_id"]).startswith("<")]
    result.vocab_mismatches.clear()
    result.not_checked = result.expected_refusal = None
    result.notes[:] = [n for n in result.notes if not n.startswith(MODEL_NOTES)]
    for check in capmod.VOCAB_CHECKS:
        row = result.capabilities.get(check)
        if row is not None:
            fresh = "not checked" if row["status"] == "checked" else row["status"]
            result.capabilities[check] = {**row, **dict.fromkeys(capmod.COUNTS, 0), "status": fresh}


# --- merge-reports --------------------------------------------------------------------------

def order(reports: Sequence[dict], names: Sequence[str]) -> list[int]:
    """Indices of `reports` in merge order; a `SetupError` (one line) when the shards do not add up.

    Reports of one partition (same `meta.shard.partition`) must be shards 1..N
    of the same N, each once. They are put in shard order at the place of the
    first of them; unsharded reports keep their place. The records are checked here too
    (the merge's schema checks them first): whole numbers, 1 <= K <= N.
    """
    groups: dict[str, list[int]] = {}
    slots: list[str | int] = []
    for i, report in enumerate(reports):
        info = (report.get("meta") or {}).get("shard")
        if not info:
            slots.append(i)
            continue
        _check_record(info, names[i])
        if info["partition"] not in groups:
            slots.append(info["partition"])
        groups.setdefault(info["partition"], []).append(i)
    for digest, members in groups.items():
        check_complete(digest, [reports[i]["meta"]["shard"] for i in members], [names[i] for i in members])
    out: list[int] = []
    for slot in slots:
        if isinstance(slot, int):
            out.append(slot)
        else:
            out += sorted(groups[slot], key=lambda i: reports[i]["meta"]["shard"]["index"])
    return out


def _check_record(info: object, name: str) -> None:
    """A `meta.shard` record: a partition name, whole numbers K and N with 1 <= K <= N; else one line."""
    if not isinstance(info, dict) or not {"partition", "index", "count"} <= info.keys():
        raise SetupError(f"{name}: meta.shard is not a shard record (partition, index, count)")
    index, count = info["index"], info["count"]
    if not isinstance(info["partition"], str) or type(index) is not int or type(count) is not int:
        raise SetupError(f"{name}: meta.shard: partition must be a string, index and count whole numbers")
    if not 1 <= index <= count:
        raise SetupError(f"{name}: meta.shard: shard {index}/{count}: K must be between 1 and N (N >= 1)")


def check_complete(digest: str, infos: Sequence[dict], names: Sequence[str]) -> None:
    """Shards 1..N of partition `digest`, each once; else a one-line `SetupError`.

    Bounded by the parts given, not by the N they claim: a part claiming 10^12 shards costs
    what a part claiming 3 does (the first missing ones are named, the rest counted).
    """
    kind = infos[0].get("kind", "?")
    counts = sorted({int(i["count"]) for i in infos})
    if len(counts) != 1:
        raise SetupError(f"{kind} partition {digest}: shards of different N ({_list(counts)}) in "
                         f"{', '.join(names)}")
    count = counts[0]
    seen: dict[int, str] = {}
    for info, name in zip(infos, names, strict=True):
        index = int(info["index"])
        if index in seen:
            raise SetupError(f"{kind} partition {digest}: overlapping shards: {index}/{count} is in both "
                             f"{seen[index]} and {name}")
        seen[index] = name
    if len(seen) < count:
        first = list(islice((k for k in range(1, count + 1) if k not in seen), SHOWN_MISSING))
        more = count - len(seen) - len(first)
        have = _list(f"{k}/{count}" for k in sorted(seen))
        raise SetupError(f"{kind} partition {digest}: missing shard(s) {_list(f'{k}/{count}' for k in first)}"
                         f"{f' and {more:,} more' if more else ''} (have {have})")


def _list(items: Iterable[object]) -> str:
    return ", ".join(map(str, items))


def merged_meta(reports: Sequence[dict]) -> list[dict]:
    """The partitions folded by a merge (for the merged report's meta)."""
    seen: dict[str, dict] = {}
    for report in reports:
        info = (report.get("meta") or {}).get("shard")
        if info:
            seen.setdefault(info["partition"], {"partition": info["partition"], "kind": info.get("kind"),
                                                "count": info["count"], "units": info.get("units")})
    return list(seen.values())
