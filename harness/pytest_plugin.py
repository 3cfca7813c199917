"""The pytest plugin: parity with llama.cpp as test items in anyone's suite (docs/pytest-plugin.md).

    pytest --parity-engine 'cmd:./my-tokenizer --serve' --parity-model llama-bpe --parity-model x.gguf

Registered through the `pytest11` entry point of the gguf-parity package, so
it is loaded by every pytest in an environment where gguf-parity is installed;
it does nothing unless `--parity-model` is given (and imports nothing of the
harness until then). Per model it collects:

    <model>::<model>          loading the file on both sides, refusals, flakes not tied to a case
    <model>::vocab::<check>   one item per vocabulary record check (text, score, attr, pieces, ...)
    <model>::<case id>        one item per corpus case (or golden case, with --parity-golden)
    <model>::<fuzz>           with --parity-fuzz N: the hunt; passes saying how many inputs ran
    <model>::<fuzz>::<id>     one item per failing input the hunt found (shrunk): its diff, a reproduce line
    <model>::<long>           with --parity-long-docs N, long documents: fails with the smallest
                              failing window of the first failing one
    <model>::<calls>          many calls of one engine object (--parity-calls N, default 12,000): fails
                              with the first case whose answer changed, and the call it came at

Nothing is judged here. At a model's first item the harness's own per-model
check runs once (`harness.runs.live.check_model` live, `harness.runs.replay.compare_golden`
with goldens), on the cases pytest selected (`-k`, `--lf`); every item then
looks its outcome up in that `ModelResult` (`harness.compare.item_verdicts`). The
options are translated to `python -m harness run`'s own (each value joined to its option, so no
value is read as an option), so both build the same `RunConfig`; a bad one is a usage error (exit 4),
one line. report.json and report.html are written to --parity-report, checked before collection.
A failing item's text names each difference it shows (its signature, docs/differences.md) with the
per-token diff of one finding and its reproduce line, bounded whatever the findings (at most 40 lines
of 200 characters; 12 under --tb=short: `harness.compare.item_verdicts`); the terminal summary lists
the run's differences once, each with its reproduce line.
Item ids escape `:` in a model's name (`node_name`): `::` separates pytest's node names.

A fuzz input exists only once the hunt has found it, and pytest runs only items it
collected; so a model whose `<fuzz>` item is selected is checked at the end of collection,
after -k / -m / --deselect, and each failing input found becomes an item after `<fuzz>`.
Not under `--collect-only`, and not in a pytest-xdist worker (the workers must collect the
same items, and a hunt without a seed need not find the same input twice): there the check
stays at the first item and `<fuzz>` fails listing each failing input.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import traceback
import warnings
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

XDIST_GROUP = "xdist_group"
TB_LINES = {"short": 12, "line": 1}  # lines of a failure text under --tb=short / --tb=line (else item_verdicts')


class ParityFailure(Exception):
    """An item's finding: shown as its message alone (the per-token diff), without a Python traceback."""


class ParityHarnessFault(UserWarning):
    """A llama.cpp worker died and a fresh one answered (a harness fault): the case was still checked."""


class ParityEngineFlake(UserWarning):
    """An engine flake allowed by --parity-allow-flakes: the fresh process's answer was compared."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gguf-parity", "token parity with llama.cpp (gguf-parity, docs/pytest-plugin.md)")
    group.addoption("--parity-model", action="append", default=[], metavar="NAME|PATH",
                    help="a shipped vocabulary name or a .gguf path to check (repeatable); the plugin is "
                         "off without it")
    group.addoption("--parity-engine", default=None, metavar="SPEC",
                    help="the engine under test: cmd:\"COMMAND LINE\" (docs/engine-protocol.md), MODULE:CALLABLE, "
                         "or ours (default), as `python -m harness run --engine`")
    group.addoption("--parity-engine-arg", action="append", default=[], metavar="KEY=VALUE",
                    help="an option for the engine (repeatable)")
    group.addoption("--parity-engine-timeout", type=float, default=None, metavar="SECONDS",
                    help="a request to the engine taking longer is a hang (default 30)")
    group.addoption("--parity-allow-flakes", action="store_true",
                    help="an engine flake passes with a warning instead of failing its item")
    group.addoption("--parity-golden", type=Path, default=None, metavar="DIR",
                    help="replay the golden files in DIR instead of running llama.cpp live")
    group.addoption("--parity-corpus", action="append", default=[], type=Path, metavar="FILE",
                    help="a JSONL or .inp corpus, in addition to the default corpora (repeatable)")
    group.addoption("--parity-no-default-corpora", action="store_true",
                    help="only the --parity-corpus files")
    group.addoption("--parity-fuzz", type=int, default=0, metavar="N",
                    help="fuzzed inputs per model (a <fuzz> item per model, and one item per failing input "
                         "found; live only)")
    group.addoption("--parity-long-docs", type=int, default=None, metavar="N",
                    help="long documents per model (one <long> item per model; live only; default 0: off)")
    group.addoption("--parity-calls", type=int, default=None, metavar="N",
                    help="tokenize calls of one engine object in a row (one <calls> item per model; live only; "
                         "default 12,000, 0: off)")
    group.addoption("--parity-seed", type=int, default=None, metavar="S", help="make the fuzzing reproducible")
    group.addoption("--parity-known-crashes", default=None, metavar="FILE|none",
                    help="known llama.cpp crashes, reported as xfail (default: the project's list)")
    group.addoption("--parity-expected-differences", default=None, metavar="FILE",
                    help="the engine's known differences (TOML or JSON, as `run --expected-differences`): their "
                         "cases xfail, an entry that no longer shows is reported fixed")
    group.addoption("--parity-report", type=Path, default=Path("parity-report"), metavar="DIR",
                    help="where report.json, report.html and the reproduce commands' cases go "
                         "(default parity-report)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{XDIST_GROUP}(name): pytest-xdist's --dist loadgroup keeps a group "
                                       "on one worker (gguf-parity groups a model's items)")
    if config.getoption("parity_model"):  # before collection: a report that cannot be written fails now
        check_report_dir(_report_dir(config))


# --- what is checked -----------------------------------------------------------------------------

@dataclass
class ModelPlan:
    """One model as collected: its name, how it is checked, and which of its items pytest kept."""

    name: str
    arg: str
    case_ids: list[str]
    cases: list[dict] = field(default_factory=list)  # live: the gathered cases
    model: Any = None  # live: the model resolved once (`harness.models.model.Model`), shared with the check
    golden: tuple[Path, Path | None] | None = None  # (golden file, --model PATH or None)
    read: dict | None = None  # the golden file as collection read it (packed), until its replay unpacks it
    selected: set[str] | None = None  # item names left after -k / --lf (None: all)
    fuzz_items: frozenset[str] = frozenset()  # failing fuzz inputs (case ids) given items of their own


class ParityRun:
    """The session's checks: the RunConfig, the engine factory, each model's `ModelResult` once computed."""

    def __init__(self, config: Any, factory: Any, golden_dir: Path | None) -> None:
        self.config = config
        self.factory = factory
        self.golden_dir = golden_dir
        self.results: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        self.known = config.known_crashes.describe()
        self.summary = ""  # the verdict line and the report's path, for the terminal summary

    def result(self, plan: ModelPlan) -> Any:
        """The model's `ModelResult`, checking it at the first call (`ParityFailure` if it cannot be)."""
        self.check(plan)
        if plan.name in self.errors:
            raise ParityFailure(self.errors[plan.name])
        return self.results[plan.name]

    def check(self, plan: ModelPlan) -> None:
        """Check the model unless done: its `ModelResult` in `results`, or why it cannot be in `errors`."""
        if plan.name not in self.results and plan.name not in self.errors:
            self._check(plan)

    def _check(self, plan: ModelPlan) -> None:
        from .errors import SetupError
        try:
            if plan.golden is not None:
                from .runs.replay import compare_golden
                read, plan.read = plan.read, None  # the replay unpacks it: not read a second time, not kept
                self.results[plan.name] = compare_golden(plan.golden[0], self.config, self.factory, plan.golden[1],
                                                         read=read)
                return
            from dataclasses import replace

            from .runs.live import check_model
            chosen = [c for c in plan.cases if plan.selected is None or str(c["id"]) in plan.selected]
            chose = {item: plan.selected is None or item in plan.selected for item in ("<fuzz>", "<long>", "<calls>")}
            config = replace(self.config, fuzz=self.config.fuzz if chose["<fuzz>"] else 0,
                             long_docs=self.config.long_docs if chose["<long>"] else 0,
                             calls=self.config.calls if chose["<calls>"] else 0,
                             # a part of the cases (-k, --lf): an expected difference not seen is not "fixed"
                             case_ids=tuple(str(c["id"]) for c in chosen) if len(chosen) < len(plan.cases) else ())
            self.results[plan.name] = check_model(plan.model, config, self.factory, cases=chosen)
        except SetupError as exc:
            self.errors[plan.name] = f"cannot check {plan.arg}: {exc}"


# run's option for each of the plugin's: the argv below is run's, its errors name the plugin's options
RUN_OPTIONS = {"--model": "--parity-model", "--corpus": "--parity-corpus", "--engine-arg": "--parity-engine-arg",
               "--engine": "--parity-engine", "--engine-timeout": "--parity-engine-timeout", "--seed": "--parity-seed",
               "--long-docs": "--parity-long-docs", "--calls": "--parity-calls", "--fuzz": "--parity-fuzz",
               "--known-crashes": "--parity-known-crashes", "--no-default-corpora": "--parity-no-default-corpora",
               "--allow-flakes": "--parity-allow-flakes", "--report": "--parity-report",
               "--expected-differences": "--parity-expected-differences"}


def _run_argv(options: Any, report_dir: Path) -> list[str]:
    """The plugin's options as `python -m harness run` arguments: both then build the same RunConfig.

    Every value is joined to its option (`--model=VALUE`), so no value is read as an option,
    whatever it starts with (`--parity-model=--engine=x` is a model named `--engine=x`).
    """
    pairs = [("--model", model) for model in options.parity_model]
    pairs += [("--corpus", str(corpus)) for corpus in options.parity_corpus]
    pairs += [("--engine-arg", pair) for pair in options.parity_engine_arg]
    engine = options.parity_engine
    if engine and engine != "ours":
        pairs.append(("--engine", engine))
    optional = {"--engine-timeout": options.parity_engine_timeout, "--seed": options.parity_seed,
                "--calls": options.parity_calls, "--known-crashes": options.parity_known_crashes or None,
                "--expected-differences": options.parity_expected_differences}
    pairs += [(name, str(value)) for name, value in optional.items() if value is not None]
    # --long-docs: opt-in here, a suite picks the cases its engine meets
    pairs += [("--long-docs", str(options.parity_long_docs or 0)), ("--fuzz", str(options.parity_fuzz)),
              ("--report", str(report_dir))]
    flags = {"--no-default-corpora": options.parity_no_default_corpora,
             "--allow-flakes": options.parity_allow_flakes}
    return [f"{name}={value}" for name, value in pairs] + [f for f, on in flags.items() if on] + ["--quiet"]


def _plugin_words(message: str) -> str:
    """An error of run's parser (`argument --engine-arg: ...`) naming the plugin's option instead of run's."""
    return re.sub(r"^argument (--[a-z-]+)", lambda m: f"argument {RUN_OPTIONS.get(m[1], m[1])}", message)


class _RunParser(argparse.ArgumentParser):
    """run's own parser, whose errors are pytest usage errors: argparse would exit the process."""

    def error(self, message: str) -> NoReturn:
        raise pytest.UsageError(f"gguf-parity: {_plugin_words(message)}")


def _report_dir(config: pytest.Config) -> Path:
    """--parity-report; a pytest-xdist worker writes into its own sub-folder."""
    base = Path(config.getoption("parity_report"))
    worker = getattr(config, "workerinput", {}).get("workerid")
    return (base / worker if worker else base).absolute()


def _start(config: pytest.Config) -> tuple[ParityRun, list[ModelPlan]]:
    """The session's run and its models; `pytest.UsageError` (one line) for bad options."""
    options = config.option
    try:
        from .cli import input_errors, one_line
        from .commands import run as run_command
        from .runs.config import live_config
        from .runs.engine import load_engine
    except ImportError as exc:
        raise pytest.UsageError(f"--parity-model needs the harness: pip install 'gguf-parity[harness]' ({exc})") \
            from None
    if options.parity_golden is not None and options.parity_fuzz:
        raise pytest.UsageError("--parity-fuzz needs llama.cpp live: it cannot be used with --parity-golden")
    parser = _RunParser(prog="pytest --parity-*", add_help=False)
    run_command.add_arguments(parser)
    try:
        args = parser.parse_args(_run_argv(options, _report_dir(config)))
        run_config = live_config(args)
        factory = load_engine(run_config.engine, args=dict(run_config.engine_args),
                              timeout=run_config.engine_timeout)
        golden = options.parity_golden.absolute() if options.parity_golden is not None else None
        plans = _golden_plans(golden, run_config) if golden is not None else _live_plans(run_config)
    except input_errors() as exc:  # bad input or set-up (run's exit 2): one line, never a traceback
        raise pytest.UsageError(f"gguf-parity: {one_line(exc)}") from None
    return ParityRun(run_config, factory, golden), _named(plans)


def _named(plans: list[ModelPlan]) -> list[ModelPlan]:
    """The plans with node names pytest cannot misread (`node_name`); two models of one name are a usage error:
    their items, and their results, would be one model's."""
    seen: dict[str, str] = {}
    for plan in plans:
        plan.name = node_name(plan.name)
        if plan.name in seen:
            raise pytest.UsageError(f"gguf-parity: --parity-model {plan.arg!r} and {seen[plan.name]!r} have the same "
                                    f"name {plan.name!r}: give each model once, under names that differ")
        seen[plan.name] = plan.arg
    return plans


def node_name(name: str) -> str:
    """A model's name as a pytest node name, still readable: `::` separates node names, so every `:` is
    written `%3A` (and `%` itself `%25`); characters that do not print (a newline, a byte that is not
    UTF-8) are `%XX` of their bytes; an empty name is `(unnamed)`."""
    out = []
    for ch in name:
        if ch in "%:" or not ch.isprintable():
            data = bytes([ord(ch) - 0xDC00]) if 0xDC80 <= ord(ch) <= 0xDCFF else ch.encode("utf-8", "surrogatepass")
            out.append("".join(f"%{b:02X}" for b in data))
        else:
            out.append(ch)
    return "".join(out) or "(unnamed)"


def check_report_dir(folder: Path) -> None:
    """`--parity-report` checked before anything is collected: a folder, or one that can be made, where
    report.json and report.html can be written; `pytest.UsageError` (one line) otherwise."""
    from .errors import SetupError
    from .files.atomic import check_output_path, kind_of
    try:
        mode = folder.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise pytest.UsageError(f"--parity-report {folder}: cannot be used ({exc.strerror})") from None
    if mode is not None and not stat.S_ISDIR(mode):
        raise pytest.UsageError(f"--parity-report {folder}: is {kind_of(mode)}, not a folder")
    try:
        for name in ("report.json", "report.html"):
            check_output_path(folder / name, "--parity-report")
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"--parity-report {folder}: {existing} is not writable")


def _live_plans(run_config: Any) -> list[ModelPlan]:
    from .models.model import open_model
    from .runs.live import gather_cases
    plans = []
    for arg in run_config.models:
        model = open_model(arg)
        cases = gather_cases(model, run_config)
        model.forget_metadata()  # read again by its check: every model is collected before the first is checked
        plans.append(ModelPlan(model.name, arg, [str(c["id"]) for c in cases], cases, model=model))
    return plans


def _golden_plans(golden_dir: Path, run_config: Any) -> list[ModelPlan]:
    from .models.shipped import short_name
    from .runs.replay import case_ids, chosen_goldens, read_packed
    plans = []
    for golden_file, given in chosen_goldens(golden_dir, run_config):
        golden = read_packed(golden_file)
        name = short_name(golden["gguf"]["file"])
        plans.append(ModelPlan(name, str(given or name), case_ids(golden_file, golden), golden=(golden_file, given),
                               read=golden))
    return plans


# --- collection ------------------------------------------------------------------------------------

RUN_KEY = pytest.StashKey[ParityRun]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> Generator[None, object, object]:
    """The parity items, made before -k / -m deselect (so that they select them too); after it, the hunts."""
    if not config.getoption("parity_model"):
        return (yield)
    run, plans = _start(config)
    config.stash[RUN_KEY] = run
    for plan in plans:
        collector = ParityModel.from_parent(session, name=plan.name, nodeid=plan.name, run=run, plan=plan)
        items.extend(session.genitems(collector))
    kept = yield  # the other implementations: -k, -m, --deselect
    if not config.option.collectonly and not hasattr(config, "workerinput"):
        _note_selection(items)
        _fuzz_items(run, items)
    return kept


def _fuzz_items(run: ParityRun, items: list[pytest.Item]) -> None:
    """Check each model whose `<fuzz>` item was kept now, and put an item for each failing input after `<fuzz>`."""
    from .compare.item_verdicts import fuzz_inputs
    hunts = [(i, item) for i, item in enumerate(items) if isinstance(item, ParityItem) and item.kind == "fuzz"]
    for _, item in hunts:  # in the items' order, which is the report's
        try:
            run.check(item.plan)
        except Exception:  # noqa: BLE001 - a harness bug: the model's items fail with it, the session goes on
            run.errors[item.plan.name] = f"checking {item.plan.arg} failed:\n{traceback.format_exc()}"
    for i, item in reversed(hunts):  # from the end, so that the earlier positions stay right
        result = run.results.get(item.plan.name)
        found = fuzz_inputs(result) if result is not None else []
        model = item.parent
        if isinstance(model, ParityModel):  # always: its collector made it
            items[i + 1:i + 1] = [ParityItem.from_parent(model, name=f"<fuzz>::{case_id}", kind="fuzz_input",
                                                         key=case_id) for case_id in found]
            item.plan.fuzz_items = frozenset(found)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note which items of each model survived selection: the check then runs only those cases."""
    if RUN_KEY not in session.config.stash or hasattr(session.config, "workerinput"):
        return  # an xdist worker runs a share of the items it collected: it checks whole models
    _note_selection(session.items)


def _note_selection(items: list[pytest.Item]) -> None:
    """Each model's `selected`: the names of its items in `items`."""
    kept: dict[str, set[str]] = {}
    for item in items:
        if isinstance(item, ParityItem):
            kept.setdefault(item.plan.name, set()).add(item.key or f"<{item.kind}>")
    for item in items:
        if isinstance(item, ParityItem):
            item.plan.selected = kept[item.plan.name]


class ParityModel(pytest.Collector):
    """One model's items: `<model>`, the vocabulary checks, its cases, and `<fuzz>` when fuzzing."""

    def __init__(self, *, run: ParityRun, plan: ModelPlan, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run, self.plan = run, plan

    def collect(self) -> list[pytest.Item]:
        from .subjects.capabilities import VOCAB_CHECKS
        specs = [("<model>", "model", ""), *((f"vocab::{c}", "vocab", c) for c in VOCAB_CHECKS),
                 *((cid, "case", cid) for cid in self.plan.case_ids)]
        if self.run.config.fuzz:
            specs.append(("<fuzz>", "fuzz", ""))
        if self.run.config.long_docs and self.run.golden_dir is None:
            specs.append(("<long>", "long", ""))
        if self.run.config.calls and self.run.golden_dir is None:
            specs.append(("<calls>", "calls", ""))
        return [ParityItem.from_parent(self, name=name, kind=kind, key=key) for name, kind, key in specs]


class ParityItem(pytest.Item):
    """One case, vocabulary check or model-level outcome, judged by the harness (`harness.compare.item_verdicts`)."""

    def __init__(self, *, kind: str, key: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind, self.key = kind, key
        self.add_marker(pytest.mark.xdist_group(self.plan.name))

    @property
    def plan(self) -> ModelPlan:
        return self.parent.plan  # type: ignore[union-attr]

    def runtest(self) -> None:
        from .compare import item_verdicts as verdicts
        run: ParityRun = self.parent.run  # type: ignore[union-attr]
        result = run.result(self.plan)
        verdict = {"case": lambda: verdicts.case_verdict(result, self.key, known=run.known),
                   "vocab": lambda: verdicts.vocab_verdict(result, self.key),
                   "model": lambda: verdicts.model_verdict(result, known=run.known),
                   "fuzz": lambda: verdicts.fuzz_verdict(result, itemized=self.plan.fuzz_items),
                   "fuzz_input": lambda: verdicts.fuzz_input_verdict(result, self.key),
                   "long": lambda: verdicts.phase_verdict(result, "long"),
                   "calls": lambda: verdicts.phase_verdict(result, "calls")}[self.kind]()
        for text in verdict.warnings:
            warnings.warn(ParityHarnessFault(f"{self.nodeid}: {text}"), stacklevel=1)
        if verdict.outcome == "pass" and verdict.message:  # JUnit XML: a <property> of the testcase
            self.user_properties.append(("gguf-parity", verdict.message))
        if verdict.outcome == "flake" and run.config.allow_flakes:
            warnings.warn(ParityEngineFlake(f"{self.nodeid}: {verdict.message}"), stacklevel=1)
        elif verdict.outcome in ("fail", "flake"):
            raise ParityFailure(verdict.message)
        elif verdict.outcome == "xfail":
            pytest.xfail(verdict.message)
        elif verdict.outcome == "skip":
            pytest.skip(verdict.message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """A finding's text alone: already bounded (`harness.compare.item_verdicts.bounded`), and cut further
        under `--tb=short` or `--tb=line`, as pytest cuts a traceback."""
        if isinstance(excinfo.value, ParityFailure):
            lines = TB_LINES.get(str(self.config.getoption("tbstyle", "auto")))
            if lines is None:
                return str(excinfo.value)
            from .compare.item_verdicts import bounded
            return bounded(str(excinfo.value), lines)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.path, None, self.nodeid


# --- the report ---------------------------------------------------------------------------------------

def pytest_sessionfinish(session: pytest.Session) -> None:
    """report.json and report.html of the models checked, as `python -m harness run` writes them."""
    run = session.config.stash.get(RUN_KEY, None)
    if run is None or not run.results:
        return
    from .compare import expected
    from .report import build as reporting
    from .report import differences
    meta = {"command": "pytest (gguf-parity plugin)", "engine": run.config.engine or "tokenizer:Tokenizer.from_gguf",
            "engine_args": dict(run.config.engine_args), "fuzz": run.config.fuzz, "seed": run.config.seed,
            "known_crashes": run.config.known_crashes.source, "allow_flakes": run.config.allow_flakes,
            **({"expected_differences": run.config.expected.describe()} if run.config.expected else {}),
            **({"golden": str(run.golden_dir)} if run.golden_dir else {}), **reporting.versions()}
    report = reporting.build(run.results.values(), meta=meta, known_crashes=run.known)
    run.config.report_dir.mkdir(parents=True, exist_ok=True)
    _, html = reporting.write(report, run.config.report_dir)
    listed = differences.terminal_lines(report)  # each difference once, with its reproduce line
    listed += expected.terminal_lines(report)  # --parity-expected-differences: the entries that no longer show
    run.summary = "\n".join([f"gguf-parity: {reporting.one_line(report)}", *listed, f"gguf-parity report: {html}"])


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    run = config.stash.get(RUN_KEY, None)
    if run is not None and run.summary:
        terminalreporter.write_line(run.summary)
