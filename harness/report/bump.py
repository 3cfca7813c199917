"""The change report of a pin bump (`bump-pin`): what a new llama-cpp-python changes, per vocabulary, for review.

`report(...)` reads what the procedure left (`harness.runs.bump`): the files it changed in its work
tree (git's numstat), the code-point records before and after (calls whose digest changed), and the
build comparison's builds.json (`harness.report.builds`: each difference with both sides). It
writes bump.json (everything) and bump.md (the review page: the steps with their times, one row per
vocabulary, the other changed files, the differences, and how to adopt or drop the work tree).
Nothing in the checkout is touched: adopting is the reviewer's `git` commands, printed at the end.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..files.atomic import write_text_atomic
from ..files.input_limits import MAX_REPORT_BYTES, read_side_json

KIND = "gguf-parity pin bump"
FILE, PAGE = "bump.json", "bump.md"
SHOWN = 40  # differences listed in bump.md (bump.json and builds.html hold them all)


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = read_side_json(path, "a recorded file", limit=MAX_REPORT_BYTES)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def vocabulary_of(path: str) -> str | None:
    """`llama-bpe` for golden/ggml-vocab-llama-bpe.json, `gpt-2` for golden/code-points/gpt-2.json; None else."""
    parts = path.split("/")
    if parts[0] != "golden" or not parts[-1].endswith(".json") or (len(parts) > 2 and parts[1] == "chat"):
        return None
    return parts[-1].removesuffix(".json").removeprefix("ggml-vocab-")


def code_point_changes(checkout: Path, work_tree: Path) -> dict[str, dict[str, Any]]:
    """Per probe vocabulary: calls whose digest changed between the two records, and the builds each names."""
    out = {}
    for new_path in sorted((work_tree / "golden" / "code-points").glob("*.json")):
        old, new = _json(checkout / "golden" / "code-points" / new_path.name), _json(new_path)
        if old is None or new is None:
            continue
        pairs = list(zip(old.get("digests") or [], new.get("digests") or [], strict=False))
        out[new_path.stem] = {"calls": len(pairs), "changed": sum(a != b for a, b in pairs),
                              "recorded": [old.get("llama_cpp_python"), new.get("llama_cpp_python")]}
    return out


BUILD_KEYS = ('"ggml_commit"', '"ggml_version"', '"llama_cpp_python"')  # the recording build's lines


def recorded_changes(old: str, new: str) -> dict[str, int]:
    """A golden's (or chat golden's) change in its own layout: case lines (one case a line, after the
    `"cases": [` line) changed of how many, and header lines changed besides the recording build's."""
    def split(text: str) -> tuple[list[str], list[str]]:
        lines = text.splitlines()
        at = next((i for i, line in enumerate(lines) if line.strip().startswith('"cases": [')), len(lines))
        return lines[:at], [line.rstrip(",") for line in lines[at + 1:] if line.lstrip().startswith("{")]
    (old_head, old_cases), (new_head, new_cases) = split(old), split(new)
    gone = Counter(old_head) - Counter(new_head)
    head = [line for line in (Counter(new_head) - Counter(old_head)) + gone
            if not line.strip().startswith(BUILD_KEYS)]
    return {"cases": len(new_cases), "cases_changed": sum((Counter(new_cases) - Counter(old_cases)).values()),
            "cases_gone": max(0, len(old_cases) - len(new_cases)), "header_changed": len(head)}


def file_changes(checkout: Path, work_tree: Path, files: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """`recorded_changes` of every golden and chat golden the procedure changed, by path."""
    out = {}
    for entry in files:
        path = entry["path"]
        if path.startswith("golden/") and path.endswith(".json") and "/code-points/" not in path:
            old, new = checkout / path, work_tree / path
            out[path] = recorded_changes(old.read_text(encoding="utf-8") if old.is_file() else "",
                                         new.read_text(encoding="utf-8") if new.is_file() else "")
    return out


def rows(files: list[dict[str, Any]], points: dict[str, dict[str, Any]], builds: dict[str, Any],
         changes: dict[str, dict[str, int]] | None = None) -> list[dict]:
    """One row per vocabulary: its golden's lines and cases changed, its code-point calls changed, the
    comparison's counts."""
    table: dict[str, dict[str, Any]] = {}

    def row(name: str) -> dict[str, Any]:
        return table.setdefault(name, {"vocabulary": name, "golden_added": 0, "golden_removed": 0,
                                       "cases_changed": None, "header_changed": None,
                                       "code_point_calls_changed": None, "differences": None, "not_answered": None})
    for entry in files:
        name = vocabulary_of(entry["path"])
        if name is not None and "/code-points/" not in entry["path"]:
            row(name)["golden_added"] += entry.get("added") or 0
            row(name)["golden_removed"] += entry.get("removed") or 0
            change = (changes or {}).get(entry["path"])
            if change is not None:
                row(name)["cases_changed"] = f"{change['cases_changed']}/{change['cases']}"
                row(name)["header_changed"] = change["header_changed"]
    for name, change in points.items():
        row(name)["code_point_calls_changed"] = f"{change['changed']}/{change['calls']}"
    for compared in builds.get("vocabularies") or []:
        r = row(str(compared.get("model")))
        r["differences"], r["not_answered"] = compared.get("differences"), compared.get("not_answered")
    return sorted(table.values(), key=lambda r: r["vocabulary"])


def report(*, bump: dict[str, Any], steps: list[dict[str, Any]], files: list[dict[str, Any]],
           points: dict[str, dict[str, Any]], builds_dir: Path,
           changes: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """bump.json's content: the steps, the files changed, per vocabulary what changed, the comparison."""
    builds = _json(builds_dir / "builds.json") or {}
    changes = changes or {}
    failed = [s["step"] for s in steps if s.get("exit_code") not in (0, 1)]
    changed = [f for f in files if f["path"] != "harness/data/pin.txt"]
    counts = builds.get("counts") or {}
    data = {"kind": KIND, **bump, "steps": steps, "seconds": round(sum(s.get("seconds") or 0 for s in steps), 1),
            "files": files, "vocabularies": rows(files, points, builds, changes), "code_points": points,
            "chat_goldens": {path: change for path, change in changes.items() if path.startswith("golden/chat/")
                             and (change["cases_changed"] or change["header_changed"] or change["cases_gone"])},
            "builds": {"verdict": builds.get("verdict"), "counts": counts, "builds": builds.get("builds"),
                       "page": str(builds_dir / "builds.html"), "differences": builds.get("differences") or [],
                       "chat": {k: v for k, v in (builds.get("chat") or {}).items() if k != "findings"}},
            "failed_steps": failed}
    data["changes"] = bool(changed) or bool(counts.get("differences") or counts.get("code_point_calls_differ")
                                            or counts.get("chat_differ"))
    return data


def exit_status(data: dict[str, Any]) -> int:
    """2 when a step failed, 1 when the new build changes anything, else 0."""
    return 2 if data["failed_steps"] else 1 if data["changes"] else 0


def markdown(data: dict[str, Any]) -> str:
    """bump.md: the review page."""
    out = [f"# Pin bump: llama-cpp-python {data['from']} -> {data['to']}", "",
           f"Work tree: `{data['work_tree']}` (the checkout is untouched). Total time: {data['seconds']:g} s.", "",
           "## Steps", "", "| step | exit | time (s) |", "|---|---|---|"]
    out += [f"| {s['step']} | {s.get('exit_code')} | {s.get('seconds')} |" for s in data["steps"]]
    out += ["", "## Per vocabulary", "",
            "Golden: its lines added and removed, its cases whose line changed, its header lines changed besides "
            "the recording build's; code-point calls whose digest changed; the comparison's differences.", "",
            "| vocabulary | golden lines +/- | cases changed | header changed | code-point calls changed | "
            "differences | not answered |", "|---|---|---|---|---|---|---|"]
    out += [f"| {r['vocabulary']} | +{r['golden_added']} -{r['golden_removed']} | {_cell(r['cases_changed'])} | "
            f"{_cell(r['header_changed'])} | {r['code_point_calls_changed'] or '-'} | {_cell(r['differences'])} | "
            f"{_cell(r['not_answered'])} |" for r in data["vocabularies"]]
    chat = data.get("chat_goldens") or {}
    recorded = sum(f["path"].startswith("golden/chat/") for f in data["files"])
    out += ["", f"## Chat goldens changed beyond the recording build ({len(chat)} of {recorded} recorded again)", ""]
    out += [f"- `{path}`: {c['cases_changed']}/{c['cases']} cases, {c['header_changed']} header line(s)"
            for path, c in sorted(chat.items())]
    others = [f for f in data["files"] if vocabulary_of(f["path"]) is None and not f["path"].startswith("golden/chat/")]
    out += ["", "## Other files changed", ""] + [f"- `{f['path']}` (+{f['added']} -{f['removed']})" for f in others]
    builds = data["builds"]
    out += ["", "## The two builds compared", "", f"{builds.get('verdict')}", "", f"Page: `{builds['page']}`", ""]
    for d in builds["differences"][:SHOWN]:
        pinned, other = d.get("pinned") or {}, d.get("other") or {}
        shown = d["input"].get("text") if d["input"].get("text") is not None else f"bytes {d['input'].get('bytes')}"
        out.append(f"- `{d['id']}` {d['model']}: {d['title']} ({d['cases']} case(s)); input "
                   f"{json.dumps(str(shown)[:80], ensure_ascii=False)}, {d['flag_pair']}: pinned "
                   f"{_ids(pinned)} `{pinned.get('piece')}`, new {_ids(other)} `{other.get('piece')}`")
    if data["failed_steps"]:
        out += ["", "## Not done", ""] + [f"- {s['step']}: `{s['command']}`: {s['tail'][-400:]!r}"
                                          for s in data["steps"] if s["step"] in data["failed_steps"]]
    out += ["", "## Adopting it", "", f"    git -C {data['work_tree']} diff --stat HEAD",
            f"    git -C {data['work_tree']} commit -am 'pin: llama-cpp-python {data['to']}'  # then merge it",
            f"    git worktree remove --force {data['work_tree']}  # or drop it", ""]
    return "\n".join(out)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _ids(side: dict[str, Any]) -> str:
    ids = (side.get("ids") or {}).get("ids")
    return "-" if ids is None else " ".join(map(str, ids[:16]))


def write(data: dict[str, Any], out: Path) -> tuple[Path, Path]:
    return (write_text_atomic(Path(out) / FILE, json.dumps(data, indent=1, ensure_ascii=False) + "\n", "bump.json"),
            write_text_atomic(Path(out) / PAGE, markdown(data), "bump.md"))
