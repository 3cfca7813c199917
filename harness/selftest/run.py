"""The mutation self-test: how many realistic bugs each detector catches.

Each mutant (`harness.selftest.mutants`, tests/mutants/*.toml) is applied to a scratch
copy of the project (tokenizer/, harness/ with its corpora, pyproject.toml; golden/
linked read-only), never to the working tree. Every detector then runs as a
subprocess inside that copy, so `import tokenizer` finds the mutant:

- `vectors`: llama.cpp's own .inp/.out test vectors (the field's usual check;
  `harness.selftest.vectors`);
- `golden`: `python -m harness compare --golden golden` (offline replay);
- `live`: `python -m harness run` over the default corpora, no fuzzing;
- `live+fuzz`: `run --fuzz N --seed S`, the main job's live part.

A detector runs the mutant's likely vocabularies one at a time first, and
stops at the first that kills it (any exit status but 0); the rest go in one
run (whose report names the vocabulary that failed). That bounds the cost, as
does skipping the families whose engine never runs the mutated file
(`ENGINE_FILES`: a mutant of engines/spm.py runs on the SPM vocabularies only).
It only tries the vocabularies the main job would run it on (`--scope main`:
the 19 shipped and the `sensitivity` family, `harness.models.synth_sensitivity`,
built first when missing; `--scope nightly` adds the RWKV and PLaMo-2 families).
`live+fuzz` sees every case `live` sees, so a kill by `live` on a vocabulary
is a kill by `live+fuzz` there too: it is recorded as implied, not re-run.
The main job (`./quickstart.sh parity`) is golden + live+fuzz, so it
kills a mutant when either does.

With `--until-main-kill` (`Settings.until_main_kill`) the detectors run in the
order given, and once golden or live+fuzz (or live, which implies it) has killed
a mutant, the rest are not run on it: each is recorded as `skipped` ("not run:
the main job already kills it"), neither a kill nor a survival, and the
per-detector rates count only the mutants a detector ran on.

Before a detector judges its first mutant, its baseline runs on the unmutated
copy: a vocabulary on which the detector already fails cannot judge a mutant
and is left out (and reported). Each baseline runs once, when a mutant first
needs the detector (`Baselines`), so one that no mutant reaches is never run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..environment_vars import BOUNDARIES, HYPOTHESIS_PROFILE
from ..files.atomic import write_text_atomic
from ..models import synth_sensitivity
from ..models.families import members as of_families
from .mutants import Mutant
from .settings import DETECTORS, MAIN_JOB, SKIPPED, Settings, Verdict

MAIN_FAMILIES = ("spm", "bpe", "wpm", "ugm", "sensitivity")   # noxfile: SHIPPED + MAIN_SYNTHETIC_FAMILIES
NIGHTLY_FAMILIES = MAIN_FAMILIES + ("rwkv", "plamo2")   # pre-sweep (91 vocabularies) is too dear per mutant
COPIED = ("tokenizer", "harness", "pyproject.toml")  # harness/ holds the corpora (harness/data/corpora)


def scope_vocabs(scope: str) -> list[str]:
    families = MAIN_FAMILIES if scope == "main" else NIGHTLY_FAMILIES
    return list(of_families(families))


def build_synthetic(vocabs: list[str], say: Callable[[str], None]) -> None:
    """Build the synthetic vocabularies of `vocabs` that are not in the cache yet (as the main job
    does first); one whose shipped source is missing is left out by `detector_vocabs`."""
    from ..errors import SetupError
    from ..models import synth

    for name in vocabs:
        if name in synth.RECIPES and not synth.synthetic_path(name).is_file():
            try:
                synth.write(name)
                say(f"built synthetic vocabulary {name}")
            except SetupError as exc:
                say(f"cannot build {name}: {exc}")


def detector_vocabs(detector: str, vocabs: list[str], root: Path) -> list[str]:
    """The vocabularies a detector runs on: present, with an .inp/.out pair (vectors) or a golden file."""
    from ..errors import SetupError
    from ..golden.files import golden_files
    from ..models.paths import resolve
    from ..models.shipped import short_name

    goldens: set[str] = set()
    if detector == "golden" and (root / "golden").is_dir():
        goldens = {short_name(f.name.removesuffix(".gz").removesuffix(".json")) for f in golden_files(root / "golden")}
    out = []
    for name in vocabs:
        try:
            path = resolve(name)
        except SetupError:
            continue
        if detector == "vectors" and not Path(f"{path}.inp").is_file():
            continue
        if detector == "golden" and name not in goldens:
            continue
        out.append(name)
    return out


# Files only one vocabulary type's engine runs: a mutant there cannot change what the other
# families compute, so they are not run on it. Every other file of tokenizer/ reaches all.
ENGINE_FILES = {
    "tokenizer/engines/spm.py": ("spm",),
    "tokenizer/engines/bpe.py": ("bpe",),
    "tokenizer/pretokenize/splitter.py": ("bpe",),
    "tokenizer/pretokenize/behaviours.py": ("bpe",),
    "tokenizer/engines/wpm.py": ("wpm",),
    "tokenizer/engines/wpm_batch.py": ("wpm",),
    "tokenizer/engines/ugm.py": ("ugm",),
    "tokenizer/engines/ugm_batch.py": ("ugm",),
    "tokenizer/normalize/charsmap.py": ("ugm",),
    "tokenizer/normalize/ugm.py": ("ugm",),
    "tokenizer/engines/rwkv.py": ("rwkv",),
    "tokenizer/engines/plamo2.py": ("plamo2",),
}


def reachable(mutant: Mutant, vocabs: list[str]) -> list[str]:
    """The vocabularies whose engine executes the mutated file (a `sensitivity` vocabulary
    counts as a member of its engine's family, `synth_sensitivity.ENGINES`)."""
    families = ENGINE_FILES.get(mutant.file)
    if families is None:
        return vocabs
    members = set(of_families(families))
    members |= {v for v, engine in synth_sensitivity.ENGINES.items() if engine in families}
    return [v for v in vocabs if v in members]


def ordered(mutant: Mutant | None, vocabs: list[str]) -> list[str]:
    """The mutant's likely vocabularies first, then the rest in scope order."""
    first = [v for v in (mutant.vocabs if mutant else ()) if v in vocabs]
    return first + [v for v in vocabs if v not in first]


# --- scratch copies -------------------------------------------------------------------------

def make_base(root: Path, into: Path) -> Path:
    """A copy of what the detectors need, without caches; golden/ is linked, not copied."""
    base = into / "base"
    base.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in COPIED:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, base / name, ignore=ignore)
        elif src.is_file():
            shutil.copy2(src, base / name)
    if (root / "golden").is_dir():
        (base / "golden").symlink_to((root / "golden").resolve(), target_is_directory=True)
    return base


def mutant_copy(base: Path, mutant: Mutant | None, into: Path, *, name: str = "baseline") -> Path:
    """A fresh copy of `base` with `mutant` applied (None: the unmutated baseline, in `into / name`)."""
    where = into / (mutant.id if mutant else name)
    shutil.copytree(base, where, symlinks=True)
    if mutant is not None:
        target = where / mutant.file
        target.write_text(mutant.apply_to(target.read_text(encoding="utf-8")), encoding="utf-8")
    return where


# --- running one detector -------------------------------------------------------------------

def command(detector: str, vocabs: list[str], report: Path, s: Settings) -> list[str]:
    py = [sys.executable, "-m"]
    if detector == "vectors":
        return [*py, "harness.selftest.vectors", *vocabs]
    models = [arg for v in vocabs for arg in ("--model", v)]
    if detector == "golden":
        return [*py, "harness", "compare", "--golden", "golden", *models, "--quiet", "--report", str(report)]
    fuzz = ["--fuzz", str(s.fuzz), "--seed", str(s.seed)] if detector == "live+fuzz" else []
    return [*py, "harness", "run", *models, *fuzz, "--jobs", "1", "--quiet", "--no-messages", "--report", str(report)]


def run_one(detector: str, vocabs: list[str], workdir: Path, s: Settings) -> tuple[str, str, str | None]:
    """(outcome, last output line, killing vocabulary) of one detector run on `vocabs` inside `workdir`."""
    report = workdir / "reports" / detector.replace("+", "-") / "-".join(vocabs)[:80]
    env = {**os.environ, "PYTHONPATH": str(workdir), "PYTHONDONTWRITEBYTECODE": "1"}
    for setting in (HYPOTHESIS_PROFILE.name, BOUNDARIES.name):  # the main job's own settings,
        env.pop(setting, None)                                   # even inside the nightly
    budget = s.timeout * len(vocabs)  # --timeout is per vocabulary
    try:
        proc = subprocess.run(command(detector, vocabs, report, s), cwd=workdir, env=env,
                              capture_output=True, text=True, timeout=budget, errors="replace")
    except subprocess.TimeoutExpired:
        return "timeout", f"no answer within {budget:.0f} s", vocabs[0] if len(vocabs) == 1 else None
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip() and not ln.startswith("report:")]
    last = lines[-1].strip() if lines else ""
    if proc.returncode == 0:
        return "survived", last, None
    if proc.returncode == 1 and detector != "vectors" and not _engine_side(report):
        # only llama.cpp failed (e.g. a load timeout on a loaded machine): says nothing of the mutant
        return "timeout", f"inconclusive, llama.cpp side only: {last}"[:300], None
    return "killed", f"exit {proc.returncode}: {last}"[:300], _culprit(detector, vocabs, report, last)


def _engine_side(report: Path) -> bool:
    """Whether a report holds a finding about our engine (a mismatch, an engine error, a vocabulary
    mismatch), not only llama.cpp crashes. A mutant changes our engine alone, so only those kill it."""
    try:
        summary = json.loads((report / "report.json").read_text(encoding="utf-8"))["summary"]
    except (OSError, ValueError, KeyError):
        return True  # no report: the run died before writing one, which the mutant may have caused
    return any(summary.get(k) for k in ("mismatches", "engine_errors", "vocab_mismatches"))


def _culprit(detector: str, vocabs: list[str], report: Path, last: str) -> str | None:
    """Which of `vocabs` failed: the vectors line names it; a report's per-model summary does."""
    if len(vocabs) == 1:
        return vocabs[0]
    if detector == "vectors":
        return next((v for v in vocabs if last.startswith((f"vectors: {v} ", f"vectors: {v}:"))),
                    None)
    try:
        per_model = json.loads((report / "report.json").read_text(encoding="utf-8"))["summary"]["per_model"]
    except (OSError, ValueError, KeyError):
        return None
    keys = ("failing_cases", "vocab_mismatches", "engine_errors", "oracle_crashes")
    return next((v for v in vocabs if any(per_model.get(v, {}).get(k) for k in keys)), None)


def detect(detector: str, vocabs: list[str], workdir: Path, s: Settings, *, alone: int) -> Verdict:
    """The first `alone` of `vocabs` one at a time (cheap early kills), then the rest in one run."""
    start = time.monotonic()
    if not vocabs:  # nothing this detector may judge it on: say so, never "survived"
        return Verdict("not-run", detail="no usable vocabulary for this detector")
    verdict = Verdict("survived")
    steps = [[v] for v in vocabs[:alone]] + ([vocabs[alone:]] if vocabs[alone:] else [])
    if detector == "vectors":
        steps = [vocabs] if vocabs else []  # one process stops at the first failing vocabulary anyway
    for step in steps:
        verdict.tried += step
        outcome, detail, culprit = run_one(detector, step, workdir, s)
        if outcome == "timeout":
            verdict.outcome, verdict.detail = outcome, detail  # inconclusive; later steps may still kill
            continue
        if outcome == "killed":
            verdict.outcome, verdict.vocab, verdict.detail = outcome, culprit, detail
            break
    verdict.seconds = round(time.monotonic() - start, 1)
    return verdict


def judge(mutant: Mutant, base: Path, scratch: Path, usable: Baselines, s: Settings) -> dict[str, Verdict]:
    """Every selected detector on one mutant (its own copy, removed afterwards), in the order of
    `s.detectors`; with `s.until_main_kill`, none after the main job has killed it."""
    workdir = mutant_copy(base, mutant, scratch)
    try:
        verdicts: dict[str, Verdict] = {}
        reused = prior_verdicts(s.prior, mutant.id)
        for detector in s.detectors:
            if detector in reused:
                verdicts[detector] = reused[detector]
                continue
            if s.until_main_kill and main_kill(verdicts):
                verdicts[detector] = Verdict("skipped", detail=f"{SKIPPED} ({main_kill(verdicts)})")
                continue
            live = verdicts.get("live")
            if detector == "live+fuzz" and live is not None and live.killed:
                verdicts[detector] = Verdict(live.outcome, live.vocab, [live.vocab or ""], 0.0,
                                             "implied: live killed it on the same cases", implied=True)
                continue
            likely = len([v for v in mutant.vocabs if v in usable[detector]])
            vocabs = ordered(mutant, reachable(mutant, usable[detector]))
            if s.likely_only or mutant.blind_spot:  # a documented blind spot: its own vocabularies only
                vocabs = [v for v in vocabs if v in mutant.vocabs]
            verdicts[detector] = detect(detector, vocabs, workdir, s,
                                        alone=min(likely, 3))
        return verdicts
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main_kill(verdicts: dict[str, Verdict]) -> str | None:
    """The main-job detector (golden, live+fuzz) that has killed the mutant, if one has."""
    return next((d for d in MAIN_JOB if d in verdicts and verdicts[d].killed), None)


def baseline(detector: str, base: Path, scratch: Path, candidates: list[str], s: Settings,
             say: Callable[[str], None]) -> tuple[list[str], dict[str, str]]:
    """One detector on the unmutated copy, per vocabulary: (usable vocabularies, failures)."""
    workdir = mutant_copy(base, None, scratch, name=f"baseline-{detector.replace('+', '-')}")
    usable: list[str] = []
    failures: dict[str, str] = {}
    try:
        outcome, _, _ = run_one(detector, candidates, workdir, s)
        alone = [[v] for v in candidates] if outcome != "survived" else []
        usable = [] if alone else list(candidates)
        for (vocab,) in alone:  # something fails: find out where, one vocabulary at a time
            outcome, detail, _ = run_one(detector, [vocab], workdir, s)
            if outcome == "survived":
                usable.append(vocab)
            else:
                failures[vocab] = detail
                say(f"baseline: {detector} already fails on {vocab} ({detail}); left out")
        say(f"baseline: {detector} passes on {len(usable)} of {len(candidates)} vocabularies")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return usable, failures


class Baselines:
    """Each detector's usable vocabularies, `baselines[detector]`: its baseline is run when a mutant
    first needs the detector, and once (a lock per detector: mutants are judged in threads), so a
    detector no mutant reaches (`--until-main-kill`) costs nothing. Without `run_them`
    (`--no-baseline`) every candidate is usable."""

    def __init__(self, base: Path, scratch: Path, candidates: dict[str, list[str]], s: Settings,
                 say: Callable[[str], None], *, run_them: bool) -> None:
        self.base, self.scratch, self.candidates, self.s, self.say = base, scratch, candidates, s, say
        self.run_them = run_them
        self.usable: dict[str, list[str]] = {}
        self.failures: dict[str, dict[str, str]] = {}
        self.runs = 0   # baselines run so far
        self._locks = {d: threading.Lock() for d in candidates}

    def __getitem__(self, detector: str) -> list[str]:
        if detector in self.usable:
            return self.usable[detector]
        with self._locks[detector]:
            if detector not in self.usable:
                if self.run_them:
                    self.runs += 1
                    usable, self.failures[detector] = baseline(detector, self.base, self.scratch,
                                                               self.candidates[detector], self.s, self.say)
                else:
                    usable, self.failures[detector] = list(self.candidates[detector]), {}
                self.usable[detector] = usable   # last: a reader without the lock sees it complete
        return self.usable[detector]

    def known(self, order: tuple[str, ...]) -> tuple[dict[str, list[str]], dict[str, dict[str, str]]]:
        """(usable, failures) of the detectors settled so far, in `order`."""
        return ({d: self.usable[d] for d in order if d in self.usable},
                {d: self.failures[d] for d in order if d in self.failures})


def run(mutants: list[Mutant], s: Settings, *, out_json: Path | None = None,
        say: Callable[[str], None] = print) -> dict[str, Any]:
    """Judge every mutant; returns (and, after each mutant, writes to `out_json`) the results."""
    from .report import build

    vocabs = scope_vocabs(s.scope)
    reused_usable = {d: v for d, v in s.prior.get("vocabularies", {}).items() if d in s.detectors}
    fresh = Settings(**{**s.__dict__, "detectors": tuple(d for d in s.detectors if d not in reused_usable)})
    if s.likely_only:  # the baseline need only cover what the mutants will run on
        wanted = {v for m in mutants for v in m.vocabs}
        vocabs = [v for v in vocabs if v in wanted]
    build_synthetic(vocabs, say)
    candidates = {d: detector_vocabs(d, vocabs, s.root) for d in fresh.detectors}
    started = time.monotonic()
    results: dict[str, dict[str, Verdict]] = {}
    with tempfile.TemporaryDirectory(prefix="gguf-parity-selftest-") as tmp:
        scratch = Path(tmp)
        base = make_base(s.root, scratch)
        # no mutant (a `--shard` part with none): no baseline to judge it by
        baselines = Baselines(base, scratch, candidates, fresh, say, run_them=s.baseline and bool(mutants))
        baselines.usable.update(reused_usable)
        baselines.failures.update({d: f for d, f in s.prior.get("baseline_failures", {}).items()
                                   if d in reused_usable})

        def one(mutant: Mutant) -> tuple[Mutant, dict[str, Verdict]]:
            return mutant, judge(mutant, base, scratch, baselines, s)

        with ThreadPoolExecutor(max_workers=max(1, s.jobs)) as pool:
            for done, (mutant, verdicts) in enumerate(pool.map(one, mutants), 1):
                results[mutant.id] = verdicts
                say(progress_line(done, len(mutants), mutant, verdicts))
                if out_json is not None:
                    report = build(mutants, results, s, *baselines.known(s.detectors), time.monotonic() - started)
                    write_json(out_json, report)
        if not mutants:  # nothing needed a baseline: the report lists the candidates
            baselines.usable.update({d: candidates[d] for d in fresh.detectors})
    return build(mutants, results, s, *baselines.known(s.detectors), time.monotonic() - started)


def prior_verdicts(prior: dict[str, Any], mutant_id: str) -> dict[str, Verdict]:
    """The verdicts an earlier selftest.json holds for one mutant (the main-job column is recomputed)."""
    fields = Verdict.__dataclass_fields__
    for row in prior.get("mutants", []):
        if row["id"] == mutant_id:
            return {d: Verdict(**{k: v for k, v in cell.items() if k in fields})
                    for d, cell in row["results"].items()
                    if d in DETECTORS and cell["outcome"] in ("killed", "survived")}  # others: run again
    return {}


def load_prior(path: Path, s: Settings) -> dict[str, Any]:
    """An earlier selftest.json whose settings match `s` (scope, fuzz, seed), else a `ValueError`."""
    prior: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    old = prior.get("settings", {})
    for key in ("scope", "fuzz", "seed"):
        if old.get(key) != getattr(s, key):
            raise ValueError(f"{path}: it was run with {key}={old.get(key)!r}, this run has {getattr(s, key)!r}")
    return prior


def progress_line(done: int, total: int, mutant: Mutant, verdicts: dict[str, Verdict]) -> str:
    parts = []
    for detector, v in verdicts.items():
        mark = f"{v.outcome} ({v.vocab})" if v.killed else "not run" if v.outcome == "skipped" else v.outcome
        parts.append(f"{detector} {mark}")
    seconds = sum(v.seconds for v in verdicts.values())
    return f"[{done}/{total}] {mutant.id}: " + ", ".join(parts) + f"  {seconds:.0f} s"


def write_json(path: Path, report: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(report, indent=1), "the self-test's selftest.json")
