"""What changes between two llama.cpp builds: the pinned one against another (`python -m harness builds`).

The other build is an engine (`llama.cpp@VERSION`, a llama-cpp-python release in its venv;
`node-llama-cpp@VERSION`, the llama.cpp node-llama-cpp ships prebuilt; or any engine spec that
wraps a llama.cpp), and the pinned llama.cpp is the reference every check already has, so each
step is an ordinary command of the harness, in a subprocess of its own (a failed step costs that
step, never the comparison):

1. the code-point probes (`harness.runs.build_code_points`): every call of every probe vocabulary
   against the pinned build's records, a differing call narrowed to its code points;
2. the goldens: `compare --golden DIR --engine OTHER` (every golden case against the pinned
   build's recorded answers) into `<report>/golden/`;
3. the live corpora: `run --engine OTHER` on the selection (the main job's 22 vocabularies by
   default; no long phases, documents left to the goldens), each probe vocabulary with its
   differing code points as extra cases, into `<report>/live/<part>/`;
4. `merge-reports` of 2 and 3 into `<report>/report.json`: every difference signed, both sides'
   ids and pieces, as any report (the nightly's ledger folds it);
5. the chat templates (the command's, `harness.chat.golden_compare`: the chat layer sits above this
   one): the other build's chat goldens (`--chat-golden DIR`, which `bump-pin` records with that
   build's chat helper) against the pinned ones; without them the chat path is not compared.

`harness.report.builds` writes the result, builds.json and builds.html: both builds, the table
per vocabulary, and every difference with its text, flags, both sides' ids and pieces.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..environment import child_env
from ..environment_vars import DOCUMENTS
from ..errors import SetupError
from ..files.atomic import write_text_atomic
from ..golden import every_code_point as cpts
from ..subjects import llama_release, node_llama
from ..subjects.spec import is_ours
from . import build_code_points

MAIN_FAMILIES = ("spm", "bpe", "wpm", "ugm", "sensitivity")  # the main job's vocabularies (noxfile.py's parity)
STDERR_TAIL = 4000
BUILD_PROBE = "import json; from harness.oracle.llama import build_info; print(json.dumps(build_info()))"

Log = Callable[[str], None]


@dataclass(frozen=True)
class Plan:
    """What one comparison was asked: the other build, the steps and their inputs, where it goes."""

    against: str
    report: Path
    models: tuple[str, ...]                # the live run's vocabularies (names or paths)
    golden: Path | None                    # None: no golden step
    probe_vocabs: tuple[str, ...] = ()     # code-point probe vocabularies (empty: no code-point step)
    records: Path = cpts.RECORDS
    fuzz: int = 0
    seed: int | None = 0
    jobs: int = 1
    timeout: float | None = None
    engine_timeout: float | None = None
    extra: tuple[str, ...] = field(default=())   # the selection's corpus options for `run`


def check_against(spec: str) -> str:
    """`spec` if it can be another build; `SetupError` for our own engine (it is not a llama.cpp build)."""
    if not spec or is_ours(spec):
        raise SetupError(f"--against {spec or '(none)'}: expected another llama.cpp build: llama.cpp@VERSION "
                         "(a llama-cpp-python release), node-llama-cpp@VERSION, or an engine spec wrapping one")
    if llama_release.is_release_spec(spec):
        llama_release.version_of(spec)
    elif node_llama.is_spec(spec):
        node_llama.version_of(spec)
    return spec


def prepare(spec: str, log: Log) -> None:
    """The other build installed or built once, before any step starts it."""
    if llama_release.is_release_spec(spec):
        llama_release.ensure(llama_release.version_of(spec), log)
    elif node_llama.is_spec(spec):
        node_llama.ensure(node_llama.version_of(spec), log)


def other_build(spec: str) -> dict[str, Any]:
    """The other build as it says of itself: node-llama-cpp's install record (the llama.cpp it carries),
    a release's `build_info` (asked of its venv), or the spec alone."""
    if node_llama.is_spec(spec):
        record = node_llama.build(node_llama.version_of(spec))
        return {"spec": spec, **record, "description": node_llama.describe(record)}
    if llama_release.is_release_spec(spec):
        version = llama_release.version_of(spec)
        python = str(llama_release.venv_python(version))
        try:
            done = subprocess.run([python, "-c", BUILD_PROBE], capture_output=True, text=True, timeout=120,
                                  env=child_env(), stdin=subprocess.DEVNULL, check=False)
            info = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            info = {}
        return {"spec": spec, **info, "description": describe_llama(info) if info else spec}
    return {"spec": spec, "description": spec}


def pinned_build() -> dict[str, Any]:
    from .meta import BuildProbe
    probe = BuildProbe()
    try:
        info = probe.result()
    finally:
        probe.close()
    return {**info, "description": describe_llama(info)}


def describe_llama(info: dict[str, Any]) -> str:
    """`llama-cpp-python 0.3.35, ggml 0.9.5 (3a1b2c4)`: a llama-cpp-python build in one line."""
    if info.get("error"):
        return f"unknown ({info['error']})"
    return f"llama-cpp-python {info.get('llama_cpp_python', '?')}, ggml {info.get('ggml_version', '?')} " \
           f"({info.get('ggml_commit', '?')})"


# --- the steps --------------------------------------------------------------------------------------------

def harness_step(args: list[str], *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`python -m harness ARGS` in a subprocess: its exit status, time, command and the tail of its stderr."""
    argv = [sys.executable, "-P", "-m", "harness", *args]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env={**child_env(), **(env or {})},
                          stdin=subprocess.DEVNULL, check=False)
    return {"command": shlex.join(["python", *argv[2:]]), "exit_code": done.returncode,
            "seconds": round(time.monotonic() - started, 1), "stderr": done.stderr[-STDERR_TAIL:]}


def engine_args(plan: Plan) -> list[str]:
    out = ["--engine", plan.against]
    if plan.engine_timeout is not None:
        out += ["--engine-timeout", f"{plan.engine_timeout:g}"]
    return out


def code_point_step(plan: Plan, log: Log) -> dict[str, Any]:
    """Every probe vocabulary screened; the differing code points written as each one's cases."""
    from .engine import load_engine
    started = time.monotonic()
    factory = load_engine(plan.against, timeout=plan.engine_timeout or 60.0)
    results = []
    for name in plan.probe_vocabs:
        log(f"code points: {cpts.short(name)} ...")
        result = build_code_points.screen(factory, name, records=plan.records, timeout=plan.timeout or 600.0,
                                          log=log)
        cases = build_code_points.cases(result)
        if cases:
            corpus = plan.report / "code-points" / f"{result['vocabulary']}.jsonl"
            write_text_atomic(corpus, "".join(json.dumps(c) + "\n" for c in cases), "code-point cases")
            result["corpus"] = str(corpus)
        result["cases"] = len(cases)
        results.append(result)
    return {"seconds": round(time.monotonic() - started, 1), "vocabularies": results}


def live_parts(plan: Plan, code_points: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(part name, `run` arguments): the selection in one run (with the plan's corpus options), each probe
    vocabulary with code-point cases in a run of its own: with the selection's options when the selection
    holds it, else its code-point cases alone."""
    corpora = {r["vocabulary"]: r["corpus"] for r in code_points.get("vocabularies", []) if r.get("corpus")}
    short = {Path(m).name.removesuffix(".gguf").removeprefix("ggml-vocab-"): m for m in plan.models}
    parts = []
    rest = [m for name, m in short.items() if name not in corpora]
    if rest:
        parts.append(("main", [a for m in rest for a in ("--model", m)] + list(plan.extra)))
    for name, corpus in corpora.items():
        options = list(plan.extra) if name in short else ["--no-default-corpora"]
        parts.append((name, ["--model", short.get(name, name), "--corpus", corpus, *options]))
    return parts


def live_step(plan: Plan, part: str, selection: list[str]) -> dict[str, Any]:
    args = ["run", *selection, *engine_args(plan), "--fuzz", str(plan.fuzz), "--long-docs", "0", "--calls", "0",
            "--no-messages", "--jobs", str(plan.jobs), "--quiet", "--report", str(plan.report / "live" / part)]
    if plan.seed is not None:
        args += ["--seed", str(plan.seed)]
    if plan.timeout is not None:
        args += ["--timeout", f"{plan.timeout:g}"]
    return {"part": part, **harness_step(args, env={DOCUMENTS.name: "off"})}


def golden_step(plan: Plan) -> dict[str, Any]:
    assert plan.golden is not None
    return harness_step(["compare", "--golden", str(plan.golden), *engine_args(plan), "--quiet",
                         "--report", str(plan.report / "golden")])


def merge_step(plan: Plan, parts: list[Path]) -> dict[str, Any]:
    written = [p for p in parts if (p / "report.json").is_file()]
    if not written:
        return {"exit_code": None, "why": "no step wrote a report"}
    return harness_step(["merge-reports", *map(str, written), "--out", str(plan.report)])


def run(plan: Plan, log: Log) -> dict[str, Any]:
    """Every step of the comparison, in order; what each did (its result, command, time, exit status)."""
    prepare(plan.against, log)
    steps: dict[str, Any] = {"builds": {"pinned": pinned_build(), "other": other_build(plan.against)}}
    steps["code_points"] = code_point_step(plan, log) if plan.probe_vocabs else {"vocabularies": []}
    parts: list[Path] = []
    if plan.golden is not None:
        log(f"goldens: compare --golden {plan.golden} --engine {plan.against} ...")
        steps["golden"] = golden_step(plan)
        parts.append(plan.report / "golden")
    steps["live"] = []
    for part, selection in live_parts(plan, steps["code_points"]):
        log(f"live: run {' '.join(selection)} --engine {plan.against} ...")
        steps["live"].append(live_step(plan, part, selection))
        parts.append(plan.report / "live" / part)
    steps["merge"] = merge_step(plan, parts)
    steps["parts"] = [str(p) for p in parts]
    return steps
