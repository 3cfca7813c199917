"""The parts `merge-reports` is given: each read within bounds, checked against its kind's schema, its counts
held to its entries; the same part twice, and two runs of the same work, refused.

A part comes from anywhere (a CI artifact, another machine, a hand edit): it is data, and
nothing in it is believed (docs/sharding.md, "What a part must be"). Before anything of it is merged:

- it is read as a regular file of at most `MAX_PART_BYTES` (a FIFO, a device or `/dev/zero`
  is refused before a byte is read) and parsed with the depth limit of every JSON the harness
  reads (`harness.files.input_limits`);
- it is checked against its kind's definition in `harness/data/merge_parts.schema.json`:
  every field the merge or its pages read has its type, and every count is a JSON integer
  from 0 to 10^9 (a float, NaN, an infinity, a negative or an absurd number is refused);
- its counts are held to what it carries (`check_counts`): a report.json's per-model counts
  of each list are the entries it lists of that model, its failing cases at least the cases
  its findings name and at most its cases, each capability row adds up; a chat part's cases
  are its matches, findings and crashes; a drift part's summary is the one its goldens give.
  A part whose counts disagree is refused, never added: negative counts cannot cancel
  another part's findings, and a part cannot hide its own;
- the same part twice (the same file by two paths or through a link, or the same bytes) is
  refused (`check_distinct`), and so are parts of different llama.cpp builds;
- two report.json parts that checked the same model the same way (both live, or both
  replaying goldens) are refused unless they are shards of one `--shard` partition
  (`check_overlap`): merge-reports folds the shards or sessions of one run; two runs of
  the same cases are compared (`tools/report_identity.py`), not added. Drift parts that
  replayed the same golden are held to the same rule; a self-test's mutants are
  (`harness.selftest.report.merge`). Chat parts do not list their templates: only their
  partitions and identities are checked.

Each refusal is a `SetupError` (exit 2): one line naming the part and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import stat
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import islice
from pathlib import Path
from typing import Any

from ..compare.result import FINDINGS, LISTS, SIDE_LISTS
from ..errors import SetupError
from ..files.atomic import kind_of
from ..files.input_limits import loads, read_capped
from ..subjects.capabilities import CASE_CHECKS

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "data" / "merge_parts.schema.json"
MAX_PART_BYTES = 256 << 20  # one part; a whole nightly's report.json is a few MB
KINDS = {"report.json": "report", "messages.json": "messages", "selftest.json": "selftest", "drift.json": "drift"}
# the lists whose entries name a failing case (`ModelResult.add`): a known crash sets its case aside, and a
# vocabulary mismatch is about the model
FAILING = tuple(kind for kind in FINDINGS if kind != "vocab_mismatches")


@dataclass(frozen=True)
class Part:
    """One part as read: the name it was given by, its file, its content, and what identifies it."""

    name: str
    file: Path
    data: dict[str, Any]
    digest: str                    # sha256 of its bytes
    identity: tuple[int, int]      # (device, inode) of the file, links followed


def read(path: Path, kind: str) -> Part:
    """The part at `path` (a folder holding `kind`, or the file), checked against `kind`'s schema and counts."""
    file = path / kind if path.is_dir() else path
    try:
        info = file.stat()
    except OSError as exc:
        raise SetupError(f"cannot read {file}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SetupError(f"{file}: is {kind_of(info.st_mode)}, not a {kind} file")
    raw = read_capped(file, MAX_PART_BYTES, f"a {kind} part")  # InputTooLarge: over the limit, or no bound
    try:
        data = loads(raw, str(file))
    except ValueError as exc:  # not JSON, not UTF-8, nested too deep: the message names the file
        raise SetupError(str(exc)) from None
    if not isinstance(data, dict):
        raise SetupError(f"{file}: not a gguf-parity {kind} (the top level is a {_json_type(data)}, not an object)")
    if kind == "report.json" and not (isinstance(data.get("summary"), dict) and "per_model" in data["summary"]):
        raise SetupError(f"{file} is not a gguf-parity report.json (no summary.per_model)")
    if kind == "report.json" and data.get("version", 1) != 1:
        raise SetupError(f"{file}: report version {_shown(data.get('version'))}; this gguf-parity merges version 1")
    validate(data, kind, str(file))
    check_counts(data, kind, str(file))
    return Part(str(path), file, data, hashlib.sha256(raw).hexdigest(), (info.st_dev, info.st_ino))


# --- the schema -----------------------------------------------------------------------------

@cache
def _validator(kind: str) -> Any:
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many({
        "integer": lambda _, value: type(value) is int,  # JSON's 1.0 and true are no counts
        "number": lambda _, value: type(value) is int or (type(value) is float and math.isfinite(value))})
    strict = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)
    return strict({**schema, "$ref": f"#/$defs/{KINDS[kind]}"})


def validate(data: dict[str, Any], kind: str, where: str) -> None:
    """`SetupError` naming the field unless `data` matches `kind`'s definition."""
    import jsonschema

    error = jsonschema.exceptions.best_match(islice(_validator(kind).iter_errors(data), 100))
    if error is not None:
        raise SetupError(f"{where}: {field(error.absolute_path)}: {_shown(error.message, 200)}")


def field(path: Iterable[Any]) -> str:
    """A JSON path as one readable line: `summary.per_model["a b"].cases`, `mismatches[3].model`."""
    return "".join(map(step, path)).removeprefix(".") or "(top level)"


def step(key: Any) -> str:
    """One step of a JSON path: `.name`, `[3]`, or `["a name with spaces"]` (cut, escaped: one line)."""
    if isinstance(key, int):
        return f"[{key}]"
    if re.fullmatch(r"[A-Za-z_][\w-]{0,63}", key):
        return f".{key}"
    return f"[{json.dumps(key[:60])}]"


def _shown(value: object, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[:limit]}..."


def _json_type(value: object) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "null")


# --- counts held to the entries -------------------------------------------------------------------

def check_counts(data: dict[str, Any], kind: str, where: str) -> None:
    """`SetupError` when a part's counts disagree with the entries it carries (the module docstring)."""
    if kind == "report.json":
        _check_report(data, where)
        if data.get("messages"):
            _check_messages(data["messages"], f"{where}: messages")
    elif kind == "messages.json":
        _check_messages(data, where)
    elif kind == "selftest.json" and "main job" in data["columns"]:  # its verdict reads each row's main-job cell
        for i, row in enumerate(data["mutants"]):
            if "main job" not in row["results"]:
                raise SetupError(f"{where}: mutants[{i}].results: no cell for the column 'main job'")
    elif kind == "drift.json":
        from ..golden import drift
        summary = drift.result("", data["goldens"])["summary"]
        for key, value in data["summary"].items():
            if key in summary and summary[key] != value:
                raise SetupError(f"{where}: summary.{key} is {value}, but its goldens give {summary[key]}: "
                                 "a part whose counts disagree with its entries is not merged")


def _check_report(data: dict[str, Any], where: str) -> None:
    from ..report.build import COUNTS  # pandas: loaded by the merge, not by `merge-reports --help`

    per_model = data["summary"]["per_model"]
    listed: Counter[tuple[str, str]] = Counter()
    failing: dict[str, set[str]] = {m: set() for m in per_model}
    known: Counter[str] = Counter()  # known crash entries on a case: a merged part may list one case twice
    for kind in LISTS + SIDE_LISTS:
        for i, entry in enumerate(data.get(kind) or []):
            model = entry["model"]
            if model not in per_model:
                raise SetupError(f"{where}: {kind}[{i}].model: {_shown(model)} is not a model of summary.per_model")
            listed[kind, model] += 1
            case_id = entry.get("case_id")
            if case_id is None or str(case_id).startswith("<"):
                continue
            if kind in FAILING:
                failing[model].add(str(case_id))
            elif kind == "known_oracle_crashes":
                known[model] += 1
    for model, counts in per_model.items():
        at = f"{where}: summary.per_model{step(model)}"
        cut = counts.get("listed") or {}  # report.json cut these lists (harness.report.differences)
        for kind in LISTS + SIDE_LISTS:
            if kind in cut and cut[kind] == listed[kind, model] <= counts.get(kind, 0):
                continue
            if counts.get(kind, 0) != listed[kind, model]:
                raise SetupError(f"{at}.{kind} is {counts.get(kind, 0)}, but the part lists {listed[kind, model]} "
                                 f"{kind} entries of it: a part whose counts disagree with its entries is not merged")
        _check_bounds(counts, len(failing[model]), known[model], at)
    for key in COUNTS:  # the part's totals, when it has them, are its models' sums
        total = sum(int(c.get(key, 0)) for c in per_model.values())
        if key in data["summary"] and data["summary"][key] != total:
            raise SetupError(f"{where}: summary.{key} is {_shown(data['summary'][key])}, but its models add up "
                             f"to {total}: a part whose counts disagree with its entries is not merged")


def _check_bounds(counts: dict[str, Any], named: int, known: int, at: str) -> None:
    """A model's counts within what its entries and its cases allow."""
    cases = counts["cases"]
    failing = counts.get("failing_cases", 0)
    if not named <= failing <= cases:
        raise SetupError(f"{at}.failing_cases is {failing}: its findings name {named} failing case(s) and it has "
                         f"{cases} case(s): a part whose counts disagree with its entries is not merged")
    for key, most in (("known_crash_cases", min(known, cases)), ("not_applicable", cases)):
        if counts.get(key, 0) > most:
            raise SetupError(f"{at}.{key} is {counts[key]}, more than the {most} its entries and cases allow")
    for check, row in (counts.get("capabilities") or {}).items():
        where = f"{at}.capabilities{step(check)}"
        judged = row.get("agree", 0) + row.get("differ", 0) + row.get("errors", 0)
        if row.get("checked", 0) != judged:
            raise SetupError(f"{where}.checked is {row.get('checked', 0)}, but agree + differ + errors is {judged}")
        if check in CASE_CHECKS and judged + row.get("not_applicable", 0) > cases:
            raise SetupError(f"{where}: {judged + row.get('not_applicable', 0)} cases counted, more than the "
                             f"model's {cases}")


def _check_messages(data: dict[str, Any], where: str) -> None:
    """A chat check's counts: every case is a match, a finding or a llama.cpp crash (`harness.chat.run`)."""
    cases, matched = data.get("cases", 0), data.get("matched", 0)
    found, crashes = len(data.get("findings") or []), len(data.get("oracle_crashes") or [])
    if data.get("three_way"):
        return  # the three-way blocks count their own cases (merge-reports refuses such a part)
    if cases != matched + found + crashes:
        raise SetupError(f"{where}: cases is {cases}, but it holds {matched} matched, {found} findings and "
                         f"{crashes} llama.cpp crashes: a part whose counts disagree with its entries is not merged")
    recognised = data.get("legacy_recognised", 0)
    for key, most in (("oracle_errors", cases), ("legacy_recognised", cases), ("legacy_differs", recognised)):
        if data.get(key, 0) > most:
            raise SetupError(f"{where}: {key} is {data[key]}, more than the {most} its cases allow")


# --- the parts together ---------------------------------------------------------------------------

def check_distinct(parts: Sequence[Part]) -> None:
    """The same part twice (one file by two paths or a link, or a copy of its bytes) is refused."""
    seen: dict[object, Part] = {}
    for part in parts:
        for key, how in ((part.identity, "the same file"), (part.digest, "the same content")):
            if key in seen:
                raise SetupError(f"{seen[key].name} and {part.name} are the same part ({how}): each part is "
                                 "merged once")
            seen[key] = part


def check_builds(parts: Sequence[Part]) -> None:
    """report.json parts of different llama.cpp builds (`meta.llama_cpp_python`) are not one run's."""
    builds: dict[str, str] = {}
    for part in parts:
        version = (part.data.get("meta") or {}).get("llama_cpp_python")
        if version is not None:
            builds.setdefault(version, part.name)
    if len(builds) > 1:
        (one, a), (two, b) = list(builds.items())[:2]
        raise SetupError(f"{a} was run with llama-cpp-python {one} and {b} with {two}: a merge holds one "
                         "llama.cpp; merge each build's parts on their own")


def check_overlap(parts: Sequence[Part]) -> None:
    """Two report.json parts that checked one model the same way, not as shards of one partition, are refused."""
    owner: dict[tuple[str, str], tuple[str | None, str]] = {}
    for part in parts:
        meta = part.data.get("meta") or {}
        partition = (meta.get("shard") or {}).get("partition")
        for way in check_ways(meta):
            for model in part.data["summary"]["per_model"]:
                first = owner.setdefault((way, model), (partition, part.name))
                if first[1] != part.name and (partition is None or first[0] != partition):
                    raise SetupError(_twice(first[1], part.name, f"{way} results for model {_shown(model)}"))


def check_drift_overlap(parts: Sequence[Part]) -> None:
    """Two drift parts that replayed one golden file, not as shards of one partition, are refused."""
    owner: dict[str, tuple[str | None, str]] = {}
    for part in parts:
        partition = (part.data.get("shard") or {}).get("partition")
        for item in part.data["goldens"]:
            first = owner.setdefault(item["file"], (partition, part.name))
            if first[1] != part.name and (partition is None or first[0] != partition):
                raise SetupError(_twice(first[1], part.name, f"drift results for golden {_shown(item['file'])}"))


def _twice(a: str, b: str, what: str) -> str:
    return (f"{a} and {b} both hold {what}, and are not shards of one --shard partition: merge-reports folds the "
            "shards or sessions of one run; two runs of the same cases are compared, not added "
            "(python tools/report_identity.py A/report.json B/report.json)")


def check_ways(meta: dict[str, Any]) -> set[str]:
    """How a report checked its models: "live" (run, the pytest plugin) or "golden replay" (compare, the
    plugin with --parity-golden); a merged report, each way of its parts; another command, its own line."""
    if str(meta.get("command")) == "merge-reports":
        return {way for source in meta.get("sources") or [] for way in check_ways(source)}
    shard = meta.get("shard") or {}
    words = str(shard.get("kind") or meta.get("command") or "").split()
    if words[:1] == ["pytest"]:
        return {"golden replay" if meta.get("golden") else "live"}
    command = words[words.index("harness") + 1] if "harness" in words[:-1] else words[0] if words else ""
    way = {"run": "live", "compare": "golden replay"}.get(command)
    return {way or f"'{_shown(' '.join(words))}'"}
