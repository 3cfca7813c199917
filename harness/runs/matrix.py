"""The peer matrix: several implementations x several vocabularies, each cell its own diff report.

Every (implementation, vocabulary) pair is one ordinary `python -m harness
run` into `<out>/<implementation>/<vocabulary>/`, so a cell's link is that
pair's full report and its reproduce command is the run's own. The matrix
then reads each pair's report.json: per capability, how many checked units
agree with llama.cpp (`harness.subjects.capabilities`), or why the implementation
could not load the vocabulary. Nothing unchecked is shown as agreeing: a
capability the implementation lacks reads "not offered".

A pair runs in a subprocess of its own: a set-up error for one peer
(transformers not installed) or a harness failure costs that column, not the
matrix.

With an original tokenizer for a vocabulary (`peers --reference`), each of its
pairs runs three ways (`run --reference`): the cell gains `original a/b`, the
implementation against the original (`engine_vs_original`), and the row gains
the original's spec and `llama.cpp vs original a/b` (`conversion`, the same for
every column: it does not involve the implementation; read from the first
column whose pair compared anything).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..environment import child_env
from ..files.atomic import check_output_folder, write_text_atomic
from ..files.input_limits import MAX_REPORT_BYTES, read_side_json
from ..report.templating import environment
from ..subjects.capabilities import CHECKS
from ..subjects.spec import DEFAULT_ENGINE

OURS = "ours"
MATRIX_VERSION = 1
STDERR_LINES = 6
MATRIX_FILES = ("peers.json", "peers.html")


@dataclass(frozen=True)
class Options:
    """What every pair's run gets: fuzz budget, seed, llama.cpp jobs, engine timeout."""

    fuzz: int = 0
    seed: int | None = 0
    jobs: int = 1
    engine_timeout: float | None = None
    timeout: float | None = None  # llama.cpp's per-call limit (run --timeout); big vocabularies on a busy machine
    reuse: bool = False  # read a pair's earlier result (pair.json) instead of running it again
    extra: tuple[str, ...] = ()  # more `run` arguments, e.g. --no-default-corpora --corpus F
    references: tuple[tuple[str, str], ...] = ()  # (vocabulary as given to --model, reference spec)
    reference_args: tuple[str, ...] = ()  # KEY=VALUE for every reference (run --reference-arg)


@dataclass
class Cell:
    """One implementation on one vocabulary."""

    implementation: str
    model: str
    status: str  # ran, not loaded, both refuse, llama.cpp failed, set-up error, harness failed
    reason: str = ""
    checks: dict[str, Any] = field(default_factory=dict)  # harness.subjects.capabilities tally of this pair
    cases: int = 0
    report: str = ""  # report.html, relative to the matrix page
    command: str = ""
    exit_code: int | None = None
    seconds: float = 0.0
    reference: dict[str, Any] = field(default_factory=dict)  # the pair's summary.reference block (three ways)
    build: str = ""  # the implementation's own build, as its report's meta records it (node-llama-cpp's llama.cpp)


def spec_of(name: str) -> str | None:
    """The `--engine` value of an implementation name (`ours` is the default engine)."""
    return None if name in (OURS, DEFAULT_ENGINE) else name


def label_of(name: str) -> str:
    return OURS if spec_of(name) is None else name


def slug(text: str) -> str:
    """A directory name for an implementation or vocabulary label."""
    return re.sub(r"[^A-Za-z0-9._@+-]+", "_", text).strip("_") or "x"


def run_argv(name: str, model: str, out: Path, options: Options) -> list[str]:
    # -P: a model folder as the current directory cannot put its modules before the installed ones
    argv = [sys.executable, "-P", "-m", "harness", "run", "--model", model, "--report", str(out), "--quiet",
            "--fuzz", str(options.fuzz), "--jobs", str(options.jobs)]
    if options.seed is not None:
        argv += ["--seed", str(options.seed)]
    if options.timeout is not None:
        argv += ["--timeout", f"{options.timeout:g}"]
    spec = spec_of(name)
    if spec is not None:
        argv += ["--engine", spec]
        if options.engine_timeout is not None:
            argv += ["--engine-timeout", f"{options.engine_timeout:g}"]
    reference = dict(options.references).get(model)
    if reference is not None:
        argv += ["--reference", reference]
        for pair in options.reference_args:
            argv += ["--reference-arg", pair]
    return argv + list(options.extra)


def run_pair(name: str, model: str, root: Path, options: Options) -> Cell:
    """Run one pair into `root/<impl>/<model>/` and read its verdict."""
    label = label_of(name)
    out = root / slug(label) / slug(Path(model).name.removesuffix(".gguf").removeprefix("ggml-vocab-"))
    argv = run_argv(name, model, out, options)
    record = out / "pair.json"
    if options.reuse and record.is_file():
        pair = read_side_json(record, "a pair's record")
    else:
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, env=child_env(), stdin=subprocess.DEVNULL,
                              check=False)
        pair = {"exit_code": done.returncode, "stderr": done.stderr[-4000:],
                "seconds": round(time.monotonic() - started, 1), "command": shlex.join(["python", *argv[1:]])}
        write_text_atomic(record, json.dumps(pair, indent=1) + "\n", "a pair's record")
    cell = read_cell(label, model, out, exit_code=pair["exit_code"], stderr=pair["stderr"])
    cell.seconds, cell.command = pair["seconds"], pair["command"]
    if (out / "report.html").is_file():
        cell.report = str((out / "report.html").relative_to(root))
    return cell


def read_cell(label: str, model: str, out: Path, *, exit_code: int, stderr: str = "") -> Cell:
    """The cell of a finished pair run: its report's tally, or why there is none."""
    path = out / "report.json"
    lines = [line for line in stderr.splitlines() if line.strip()]
    if exit_code == 2 or not path.is_file():
        status = "set-up error" if exit_code == 2 else "harness failed"
        reason = (lines[-1] if lines else f"exit status {exit_code}").removeprefix("error: ")
        return Cell(label, model, status, reason=reason, exit_code=exit_code)
    report = read_side_json(path, "a pair's report", limit=MAX_REPORT_BYTES)
    per_model = report["summary"]["per_model"]
    name = next(iter(per_model), model)
    counts = per_model.get(name, {})
    cell = Cell(label, name, "ran", checks=counts.get("capabilities") or {}, cases=int(counts.get("cases", 0)),
                exit_code=exit_code, reference=counts.get("reference") or {}, build=_build_of(report))
    load_errors = [e for e in report.get("engine_errors", []) if e.get("case_id") == "<load>"]
    notes = counts.get("notes", [])
    if load_errors:
        cell.status, cell.reason = "not loaded", _first_line(load_errors[0].get("error", ""))
    elif any(note.startswith("both refuse") for note in notes):
        cell.status, cell.reason = "both refuse", next(n for n in notes if n.startswith("both refuse"))
    elif any(note.startswith("llama.cpp crashed loading") for note in notes):
        cell.status, cell.reason = "llama.cpp failed", "llama.cpp crashed loading the vocabulary"
    elif any(e.get("field") == "load" for e in report.get("vocab_mismatches", [])):
        cell.status, cell.reason = "llama.cpp refuses", "llama.cpp refuses the file, the implementation loads it"
    return cell


def _build_of(report: dict[str, Any]) -> str:
    """The one-line description of the engine's own build in a pair's report ("" when it records none)."""
    build = (report.get("meta") or {}).get("engine_build")
    return str(build.get("description") or "")[:240] if isinstance(build, dict) else ""


def _first_line(text: str, limit: int = 240) -> str:
    """The telling line of a load error: the last one naming an error (llama.cpp logs first), else the first."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    telling = [line for line in lines[1:] if "error" in line.lower()]
    return (telling[-1] if telling else lines[0] if lines else "")[:limit]


def run_matrix(names: list[str], models: list[str], root: Path, options: Options, *,
               parallel: int = 1, progress: Callable[[Cell], None] | None = None) -> dict[str, Any]:
    """Every pair, `parallel` at a time; the matrix as a JSON-ready dict.

    The report folder is checked first (`check_output_folder`: peers.json or peers.html a FIFO or a
    device is refused before any pair runs); every file is written through `harness.files.atomic`.
    """
    check_output_folder(root, "--report", files=MATRIX_FILES)
    root.mkdir(parents=True, exist_ok=True)
    pairs = [(name, model) for model in models for name in names]
    started = time.monotonic()

    def one(pair: tuple[str, str]) -> Cell:
        cell = run_pair(pair[0], pair[1], root, options)
        if progress:
            progress(cell)
        return cell

    with ThreadPoolExecutor(max_workers=max(parallel, 1)) as pool:
        cells = list(pool.map(one, pairs))
    return build(cells, [label_of(n) for n in names], models, options, seconds=time.monotonic() - started)


def build(cells: list[Cell], implementations: list[str], models: list[str], options: Options, *,
          seconds: float = 0.0) -> dict[str, Any]:
    """The matrix dict: rows by vocabulary, one cell per implementation, and per-column totals."""
    from ..report import build as reporting
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for cell in cells:
        rows.setdefault(cell.model, {})[cell.implementation] = asdict(cell)
    builds = {c.implementation: c.build for c in cells if c.build}  # a column's own llama.cpp (node-llama-cpp)
    return {"version": MATRIX_VERSION, "implementations": implementations,
            "models": list(rows), "rows": rows, "originals": originals(cells, implementations),
            "totals": totals(cells, implementations),
            "meta": {"options": asdict(options), "seconds": round(seconds, 1), "builds": builds,
                     **reporting.versions()}}


def originals(cells: list[Cell], implementations: list[str]) -> dict[str, dict[str, Any]]:
    """Per vocabulary run three ways: the original's spec and llama.cpp against it (`conversion`), from the
    first column (in `implementations` order) whose pair compared anything with the original."""
    out: dict[str, dict[str, Any]] = {}
    order = {label: i for i, label in enumerate(implementations)}
    for cell in sorted(cells, key=lambda c: order.get(c.implementation, len(order))):
        block = cell.reference
        if cell.model in out or not block:
            continue
        conversion = (block.get("classes") or {}).get("conversion") or {}
        if conversion.get("checked"):
            out[cell.model] = {"spec": block.get("spec", ""), "conversion": conversion,
                               "from": cell.implementation}
    return out


def totals(cells: list[Cell], implementations: list[str]) -> dict[str, dict[str, Any]]:
    """Per implementation: vocabularies loaded / fully agreeing, and each check's summed figures."""
    out = {}
    for label in implementations:
        mine = [c for c in cells if c.implementation == label]
        ran = [c for c in mine if c.status == "ran"]
        agree = [c for c in ran if _all_agree(c.checks)]
        out[label] = {"vocabularies": len(mine), "loaded": len(ran), "all_checked_agree": len(agree),
                      "not_loaded": [c.model for c in mine if c.status != "ran"],
                      "checks": _sum_checks(c.checks for c in ran)}
        against = [_versus_original(c) for c in ran if _versus_original(c)]
        if against:
            out[label]["original"] = {key: sum(row[key] for row in against)
                                      for key in ("checked", "agree", "differ", "not_applicable")}
    return out


def _versus_original(cell: Cell | dict[str, Any]) -> dict[str, int]:
    """The cell's engine_vs_original counts, or {} when its pair ran without a reference."""
    block = cell.reference if isinstance(cell, Cell) else cell.get("reference") or {}
    return dict((block.get("classes") or {}).get("engine_vs_original") or {})


def _all_agree(checks: dict[str, Any]) -> bool:
    done = [row for row in checks.values() if row.get("status") == "checked"]
    return bool(done) and all(row["agree"] == row["checked"] for row in done)


def _sum_checks(tallies: Iterable[dict[str, Any]]) -> dict[str, Any]:
    from ..subjects.capabilities import add_tallies
    return add_tallies(tallies)


# --- output -----------------------------------------------------------------------------------

def cell_lines(cell: dict[str, Any]) -> list[tuple[str, str]]:
    """(css class, text) lines a cell shows: each checked figure, then what was not offered."""
    if cell["status"] != "ran":
        return [("bad", cell["status"]), ("why", cell["reason"])]
    lines, missing = [], []
    for check in CHECKS:
        row = cell["checks"].get(check)
        if not row or row.get("status") != "checked":
            missing.append(check)
            continue
        text = f"{check} {row['agree']}/{row['checked']}"
        if row.get("errors"):
            text += f" ({row['errors']} err)"
        if row.get("not_applicable"):
            text += f" +{row['not_applicable']} n/a"
        lines.append(("ok" if row["agree"] == row["checked"] else "bad", text))
    versus = _versus_original(cell)
    if versus:
        text = f"original {versus['agree']}/{versus['checked']}"
        if versus.get("not_applicable"):
            text += f" +{versus['not_applicable']} n/a"
        lines.append(("ok" if versus["checked"] and versus["agree"] == versus["checked"] else "bad", text))
    if missing:
        lines.append(("why", "not checked: " + ", ".join(missing)))
    return lines


def render_html(matrix: dict[str, Any]) -> str:
    return environment().get_template("peers.html.j2").render(matrix=matrix, cell_lines=cell_lines, checks=list(CHECKS))


def write(matrix: dict[str, Any], root: Path) -> tuple[Path, Path]:
    json_path, html_path = root / "peers.json", root / "peers.html"
    write_text_atomic(json_path, json.dumps(matrix, indent=1, ensure_ascii=False) + "\n", "--report")
    write_text_atomic(html_path, render_html(matrix), "--report")
    return json_path, html_path


def one_line(matrix: dict[str, Any]) -> str:
    """Per implementation: loaded vocabularies, fully agreeing ones, and the ids figure."""
    parts = []
    for label, total in matrix["totals"].items():
        ids = total["checks"].get("ids", {})
        figure = f"ids {ids.get('agree', 0)}/{ids.get('checked', 0)}" if ids.get("status") == "checked" else "ids -"
        if "original" in total:
            figure += f", vs original {total['original']['agree']}/{total['original']['checked']}"
        parts.append(f"{label}: {total['loaded']}/{total['vocabularies']} loaded, "
                     f"{total['all_checked_agree']} agree on every check made, {figure}")
    for model, row in matrix.get("originals", {}).items():
        conversion = row["conversion"]
        parts.append(f"{model}: llama.cpp vs original {conversion['agree']}/{conversion['checked']}")
    return "; ".join(parts)
