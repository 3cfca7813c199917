"""noxfile.py runs in nox's own environment, without the project's dependencies.

So it must import nothing from the project, and the family lists it spells
out must stay those of `harness.models.families`.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.models.families import FAMILIES, VIEWS, members
from harness.models.shipped import SHIPPED
from harness.selftest.run import MAIN_FAMILIES

NOXFILE = Path(__file__).resolve().parents[2] / "noxfile.py"


def test_noxfile_imports_no_project_module():
    tree = ast.parse(NOXFILE.read_text(encoding="utf-8"))
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module}
    assert not roots & {"harness", "tokenizer", "numpy", "regex", "pandas", "jinja2"}


def test_noxfile_families_are_harness_families():
    nox = pytest.importorskip("nox")  # noqa: F841 - noxfile imports it
    sys.path.insert(0, str(NOXFILE.parent))
    try:
        import noxfile
    finally:
        sys.path.remove(str(NOXFILE.parent))
    assert set(noxfile.SHIPPED_FAMILIES + noxfile.SYNTHETIC_FAMILIES) == set(FAMILIES)
    shipped = {m for family in noxfile.SHIPPED_FAMILIES for m in FAMILIES[family]}
    assert shipped == set(SHIPPED)
    assert set(noxfile.MAIN_SYNTHETIC_FAMILIES) <= set(noxfile.SYNTHETIC_FAMILIES)
    # the self-test measures what the main job runs
    assert MAIN_FAMILIES == noxfile.SHIPPED_FAMILIES + noxfile.MAIN_SYNTHETIC_FAMILIES


def test_nox_lists_sessions_without_project_dependencies(tmp_path):
    # `nox --list` loads noxfile.py; run it with an interpreter that cannot see numpy & co.
    pytest.importorskip("nox")
    code = ("import sys; sys.modules.update(dict.fromkeys(['numpy', 'regex', 'pandas', 'jinja2']));"
            "import nox.__main__ as m; sys.argv = ['nox', '--list', '-f', sys.argv[1]]; m.main()")
    done = subprocess.run([sys.executable, "-c", code, str(NOXFILE)], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for session in ("tests", "parity", "parity-spm", "parity-pre-sweep", "nightly", "mutants"):
        assert f"* {session}" in done.stdout or f"- {session}" in done.stdout, done.stdout


class FakeSession:
    """Records what a nox session function runs, instead of running it."""

    def __init__(self, posargs: list[str]) -> None:
        self.posargs = posargs
        self.env: dict[str, str] = {}
        self.calls: list[tuple[tuple[str, ...], dict]] = []

    def install(self, *args: str) -> None:
        self.calls.append((("install", *args), {}))

    def run(self, *args: str, **kwargs) -> None:
        self.calls.append((args, kwargs))

    def log(self, *args) -> None:
        pass


def test_tests_session_builds_what_its_tests_need_before_a_strict_pytest(monkeypatch):
    pytest.importorskip("nox")
    sys.path.insert(0, str(NOXFILE.parent))
    try:
        import noxfile
    finally:
        sys.path.remove(str(NOXFILE.parent))
    monkeypatch.setattr(noxfile, "llama_wheel", lambda session: Path("llama_cpp_python.whl"))
    monkeypatch.setattr(noxfile, "ensure_chromium", lambda session: None)
    session = FakeSession(["-k", "spm"])
    noxfile.tests.func(session)
    commands = [" ".join(args) for args, _ in session.calls]
    steps = ["python -m harness fetch", "python -m harness synth", "python -m harness chat --build-helper",
             "python -m pytest -k spm"]
    at = [next(i for i, c in enumerate(commands) if c.startswith(step)) for step in steps]
    assert at == sorted(at), commands
    _, pytest_kwargs = session.calls[at[-1]]
    assert pytest_kwargs["env"] == {"GGUF_PARITY_STRICT_SKIPS": "1"}
    from tests.skip_policy import STRICT_ENV
    assert noxfile.STRICT_SKIPS_ENV == STRICT_ENV


class RealSession(FakeSession):
    """A FakeSession whose `convert --real` leaves GGUFs behind, as the converter would."""

    name = "parity-real"

    def run(self, *args: str, **kwargs) -> None:
        super().run(*args, **kwargs)
        if args[3:5] == ("convert", "--real"):
            out = Path(args[args.index("--out-dir") + 1])
            out.mkdir(parents=True, exist_ok=True)
            for name in ("llama3-early", "mistral-spm-v1", "mistral-tekken-240911"):
                (out / f"{name}.gguf").write_bytes(b"GGUF")
                (out / f"{name}.convert.json").write_text(json.dumps({"source": f"/cache/real/{name}"}))

    def error(self, message: str) -> None:
        raise AssertionError(message)

    warn = FakeSession.log


def _noxfile():
    pytest.importorskip("nox")
    sys.path.insert(0, str(NOXFILE.parent))
    try:
        import noxfile
    finally:
        sys.path.remove(str(NOXFILE.parent))
    return noxfile


def parity_real_run(tmp_path, monkeypatch):
    """The parity-real session run on a RealSession: (the noxfile, the session, its commands as lines)."""
    noxfile = _noxfile()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(noxfile, "llama_wheel", lambda session: Path("llama_cpp_python.whl"))
    monkeypatch.setattr(noxfile, "found_nothing", lambda report_dir: True)
    session = RealSession([])
    noxfile.parity_real.func(session)
    return noxfile, session, [" ".join(args) for args, _ in session.calls]


def test_parity_real_fetches_converts_records_then_checks_each_converted_gguf(tmp_path, monkeypatch):
    noxfile, session, commands = parity_real_run(tmp_path, monkeypatch)
    steps = ["python -m harness fetch --real", "python -m harness convert --real --out-dir reports/parity-real/gguf",
             "python -m harness record", "python -m harness compare --golden reports/parity-real/recorded",
             "python -m harness run", "python -m harness merge-reports"]
    at = [next(i for i, c in enumerate(commands) if c.startswith(step)) for step in steps]
    assert at == sorted(at), commands
    gguf = "reports/parity-real/gguf"
    names = ("llama3-early", "mistral-spm-v1", "mistral-tekken-240911")
    models = " ".join(f"--model {gguf}/{name}.gguf" for name in names)
    for step in at[2:4]:
        assert models in commands[step], commands[step]
    # the live run, one per GGUF, three ways: the original as an hf:, spm: or tekken: reference
    runs = [c.replace(f"--jobs {noxfile.JOBS}", "--jobs 2") for c in commands if c.startswith("python -m harness run")]
    assert runs == [
        f"python -m harness run --model {gguf}/llama3-early.gguf --reference hf:/cache/real/llama3-early "
        "--sweep-seconds 60 --timeout 180 --fuzz 20 --seed 0 --jobs 2 --report reports/parity-real/live/llama3-early",
        f"python -m harness run --model {gguf}/mistral-spm-v1.gguf --reference spm:/cache/real/mistral-spm-v1 "
        "--reference-arg add_bos=true --sweep-seconds 60 --timeout 180 --fuzz 20 --seed 0 --jobs 2 "
        "--report reports/parity-real/live/mistral-spm-v1",
        f"python -m harness run --model {gguf}/mistral-tekken-240911.gguf "
        "--reference tekken:/cache/real/mistral-tekken-240911 --sweep-seconds 60 --timeout 180 --fuzz 20 --seed 0 "
        "--jobs 2 --report reports/parity-real/live/mistral-tekken-240911",
    ], runs
    merge = commands[at[5]]
    assert all(f"reports/parity-real/live/{name}" in merge for name in ("llama3-early", "mistral-spm-v1"))
    # a refusal by the converter (exit 1) is a result and does not stop the session
    assert session.calls[at[1]][1]["success_codes"] == [0, 1]


def test_the_main_job_builds_the_chat_helper_before_its_run_so_it_has_a_message_layer(tmp_path, monkeypatch):
    noxfile = _noxfile()
    runs = []
    monkeypatch.setattr(noxfile, "install", lambda session, *extras, **kw: None)
    monkeypatch.setattr(noxfile, "parity_check", lambda session, **kw: runs.append(len(session.calls)) or True)
    session = RealSession([])
    session.name = "parity"
    noxfile.parity.func(session)
    commands = [" ".join(args) for args, _ in session.calls]
    build = next(i for i, c in enumerate(commands) if c.startswith("python -m harness chat --build-helper"))
    assert runs and build < runs[0], commands


def test_parity_real_checks_the_templated_originals_three_ways(tmp_path, monkeypatch):
    noxfile, _, commands = parity_real_run(tmp_path, monkeypatch)
    build = commands.index(f"python -m harness chat --build-helper --jobs {noxfile.JOBS}")
    chat = commands.index("python -m harness chat --real --fuzz 20 --report reports/parity-real/messages")
    first_run = next(i for i, c in enumerate(commands) if c.startswith("python -m harness run"))
    assert build < chat and build < first_run, "each run --reference hf: checks its templates once the helper exists"


def test_the_nightly_runs_the_real_set(tmp_path, monkeypatch):
    noxfile = _noxfile()
    calls = []
    monkeypatch.setattr(noxfile, "real_check",
                        lambda session, out, *, fuzz, seed, shard=None, replay=True, env=None, sweep_seconds=None:
                        calls.append((out, fuzz, replay, env, sweep_seconds)) or True)
    monkeypatch.setattr(noxfile, "parity_parts", lambda session, **kw: [])
    monkeypatch.setattr(noxfile, "merged_found_nothing", lambda session, parts, out, **kw: True)
    monkeypatch.setattr(noxfile, "install", lambda session, *extras, **kw: None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports" / "nightly").mkdir(parents=True)
    (tmp_path / "reports" / "nightly" / "drift.rc").write_text("0\n")
    (tmp_path / "reports" / "nightly" / "selftest.rc").write_text("0\n")
    session = RealSession([])
    session.name = "nightly"
    session.run = lambda *args, **kwargs: "0 differ, 0 llama.cpp crash" if "chat" in args else None
    noxfile.nightly.func(session)
    # the default documents, as parity-real's (doc-large is an engine's long input: the shipped vocabularies')
    short_docs = {"GGUF_PARITY_DOCUMENTS": "default"}
    assert calls == [(Path("reports/nightly/real"), noxfile.NIGHTLY_REAL_FUZZ, False, short_docs,
                      noxfile.NIGHTLY_REAL_SWEEP_SECONDS)]


def test_the_nightly_s_real_set_is_live_only_and_a_shard_checks_its_share(tmp_path, monkeypatch):
    """No record and compare (the live run checks the same cases against llama.cpp itself); shard 2/4 of
    the three converted GGUFs checks the second only, and leaves `chat --real` to shard 1."""
    noxfile = _noxfile()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(noxfile, "found_nothing", lambda report_dir: True)
    session = RealSession([])
    assert noxfile.real_check(session, Path("reports/nightly/real"), fuzz=200, seed=None, shard="2/4", replay=False)
    commands = [" ".join(args) for args, _ in session.calls]
    assert not any(c.startswith(("python -m harness record", "python -m harness compare",
                                 "python -m harness chat --real")) for c in commands), commands
    runs = [c for c in commands if c.startswith("python -m harness run")]
    assert len(runs) == 1 and "--model reports/nightly/real/gguf/mistral-spm-v1.gguf" in runs[0], runs


def nightly_commands(tmp_path, monkeypatch, shard: str | None,
                     parity: list[dict] | None = None) -> tuple[list[str], list]:
    """The nightly session's commands (parity and the real set stubbed) with GGUF_PARITY_SHARD=`shard`;
    `parity` collects the arguments each lane's parity_parts was given."""
    noxfile = _noxfile()
    real = []
    asked = [] if parity is None else parity
    monkeypatch.setattr(noxfile, "SHARD", shard)
    commands = []

    def real_check(session, out, *, fuzz, seed, shard=None, replay=True, env=None, sweep_seconds=None):
        time.sleep(0.2)  # the conversion takes a while; the other lane's stubbed steps take none
        commands.append(f"<real set converted into {session.env['GGUF_PARITY_REAL_GGUF']}>")
        real.append((out, shard))
        return True
    monkeypatch.setattr(noxfile, "real_check", real_check)
    monkeypatch.setattr(noxfile, "parity_parts",
                        lambda session, **kw: asked.append(kw) or commands.append("<parity parts>") or [])
    monkeypatch.setattr(noxfile, "merged_found_nothing", lambda session, parts, out, **kw: True)
    monkeypatch.setattr(noxfile, "install", lambda session, *extras, **kw: None)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "reports" / "nightly" / (f"shard-{shard.replace('/', '-of-')}" if shard else "")

    def run(*args, **kwargs):
        commands.append(" ".join(args))
        out.mkdir(parents=True, exist_ok=True)
        for step in ("drift", "selftest"):  # each step's own rc (the lanes run at once)
            if f"harness {step}" in " ".join(args):
                (out / f"{step}.rc").write_text("0\n")
        return "messages: 0 differ, 0 llama.cpp crash" if "chat" in args else None
    session = RealSession([])
    session.name = "nightly"
    session.run = run
    noxfile.nightly.func(session)
    return commands, real


def test_a_nightly_shard_runs_only_its_part_of_every_long_step(tmp_path, monkeypatch):
    """GGUF_PARITY_SHARD=2/4: drift, chat, the self-test, the real set and pytest --nightly get shard 2/4
    and write into reports/nightly/shard-2-of-4/."""
    commands, real = nightly_commands(tmp_path, monkeypatch, "2/4")
    part = "reports/nightly/shard-2-of-4"
    step = {name: next(c for c in commands if name in c)
            for name in ("harness drift", "harness chat --fuzz", "harness selftest", "-m pytest --nightly -m nightly "
                         "--shard 2/4 --deselect", "-m pytest --nightly -m nightly --shard 2/4 tests/")}
    step["-m pytest"] = step.pop("-m pytest --nightly -m nightly --shard 2/4 --deselect")
    assert all("--shard 2/4" in c for c in step.values()), step
    assert f"--report {part}/drift > {part}/drift.txt" in step["harness drift"]
    assert f"--report {part}/chat" in step["harness chat --fuzz"]
    assert f"--report {part}/selftest" in step["harness selftest"]
    assert "--until-main-kill --detector golden --detector live+fuzz" in step["harness selftest"]
    assert "--deselect tests/selftest/test_mutants.py::test_no_mutant_survives_every_detector" in step["-m pytest"]
    assert real == [(Path(f"{part}/real"), "2/4")]
    commands, real = nightly_commands(tmp_path, monkeypatch, None)
    assert not any("--shard" in c for c in commands) and real == [(Path("reports/nightly/real"), None)]


def test_the_real_set_s_shards_hold_each_converted_gguf_once():
    noxfile = _noxfile()
    models = [Path(f"m{i}.gguf") for i in range(10)]
    parts = [noxfile.real_share(models, f"{k}/4") for k in range(1, 5)]
    assert sorted(m for part in parts for m in part) == models and all(parts)
    assert noxfile.real_share(models, None) == models and noxfile.real_share(models[:2], "3/4") == []


def test_the_nightly_gives_its_long_phases_to_the_shipped_vocabularies_and_the_synthetic_engines(tmp_path,
                                                                                              monkeypatch):
    """The sweeps of pre-tokenizer names, model names and the sensitivity family run the main job's long
    phases; the shipped vocabularies, RWKV and PLaMo-2 run's nightly ones (no long arguments given)."""
    noxfile = _noxfile()
    asked: list[dict] = []
    nightly_commands(tmp_path, monkeypatch, None, parity=asked)
    first, second = sorted(asked, key=lambda kw: kw["selection"] is None)  # the lane with the golden replay first
    parts = {name: (set(chosen[1::2]), long, *env) for kw in asked for name, chosen, _, long, *env in kw["live"]}
    assert parts == {"live": (set(noxfile.SHIPPED_FAMILIES), ()), "live-synthetic": ({"rwkv", "plamo2"}, ()),
                     "live-sweeps": ({"pre-behaviours", "model-names", "sensitivity"}, noxfile.MAIN_LONG,
                                     {"GGUF_PARITY_DOCUMENTS": "mixed"}),
                     "live-aliases": ({"pre-aliases"}, noxfile.MAIN_LONG,
                                      {"GGUF_PARITY_DOCUMENTS": "mixed", "GGUF_PARITY_BOUNDARIES": "slice"})}
    assert set(first["selection"][1::2]) == set(noxfile.SHIPPED_FAMILIES + noxfile.SYNTHETIC_FAMILIES)
    assert second["selection"] is None  # one golden replay, in the first lane
    assert set(members(["pre-behaviours", "pre-aliases"])) == set(FAMILIES["pre-sweep"])


def test_a_pre_sweep_alias_behaves_as_a_vocabulary_the_nightly_checks_in_full():
    """pre-aliases holds only names llama.cpp's load() resolves like a pre-behaviours one, on the same base."""
    from harness.models.synth import pre_base
    from tokenizer.pretokenize.names import resolve

    def behaviour(name):
        spec = resolve(name.removeprefix("pre-"), model="gpt2")
        return (pre_base(name.removeprefix("pre-")), spec.pre_type, dict(spec.overrides), spec.no_default_bos,
                spec.merges_optional, spec.force_add_bos)
    full = {repr(behaviour(n)) for n in VIEWS["pre-behaviours"]}
    assert len(full) == len(VIEWS["pre-behaviours"])  # no two alike among those checked in full
    assert VIEWS["pre-aliases"] and all(repr(behaviour(n)) in full for n in VIEWS["pre-aliases"])
    llama3 = {"pre-llama3", "pre-llama-v3", "pre-llama-bpe", "pre-falcon3"}  # one load() branch with falcon-h1
    assert llama3 <= set(VIEWS["pre-aliases"]) and "pre-falcon-h1" in VIEWS["pre-behaviours"]  # the first by name


def test_the_whole_suite_runs_in_xdist_workers_and_given_arguments_go_as_written(monkeypatch):
    noxfile = _noxfile()
    monkeypatch.setattr(noxfile, "llama_wheel", lambda session: Path("llama_cpp_python.whl"))
    monkeypatch.setattr(noxfile, "ensure_chromium", lambda session: None)
    api = "tests/tokenizer/test_api.py"
    for posargs, expected in (([], ("-n", "auto")), ([api, "-x"], (api, "-x"))):
        session = FakeSession(posargs)
        noxfile.tests.func(session)
        [pytest_call] = [args for args, _ in session.calls if args[:3] == ("python", "-m", "pytest")]
        assert pytest_call[3:] == expected


def test_the_three_way_line_gives_the_decode_counts_apart(tmp_path):
    """parity-real's log line per entry: each id class, then decode with explained and differ apart."""
    noxfile = _noxfile()
    summary = {"reference": {"classes": {"conversion": {"checked": 4, "agree": 3, "differ": 1, "not_applicable": 2}},
                             "decode": {"agree": 10, "explained:leading_space": 3,
                                        "explained:clean_up_tokenization_spaces": 2, "differ": 1,
                                        "not_applicable": 4}}}
    (tmp_path / "report.json").write_text(json.dumps({"summary": summary}))
    assert noxfile.three_way_line(tmp_path) == ("conversion 3/4 agree (2 not applicable), "
                                                "decode 10/16 agree (5 explained, 1 differ, 4 not applicable)")


def test_the_coverage_session_runs_the_main_job_under_coverage_then_reports(tmp_path, monkeypatch):
    noxfile = _noxfile()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(noxfile, "llama_wheel", lambda session: Path("llama_cpp_python.whl"))
    monkeypatch.setattr(noxfile, "found_nothing", lambda report_dir: True)
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "ggml-vocab-x.json").write_text("{}")
    (tmp_path / "reports" / "coverage").mkdir(parents=True)
    (tmp_path / "reports" / "coverage" / "coverage.txt").write_text("TOTAL 61%\n")
    session = FakeSession([])
    session.name = "coverage"
    noxfile.coverage.func(session)
    commands = [" ".join(args) for args, _ in session.calls]
    under = "python -m coverage run --parallel-mode --source tokenizer -m harness"
    families = "--family spm --family bpe --family wpm --family ugm --family sensitivity"
    steps = [f"{under} compare --golden golden {families} --quiet --report reports/coverage/golden",
             f"{under} run {families} --fuzz 20 --seed 0", "python -m coverage combine",
             "sh -c python -m coverage report", "python -m coverage json"]
    at = [next(i for i, c in enumerate(commands) if c.startswith(step)) for step in steps]
    assert at == sorted(at), commands
    assert session.env["COVERAGE_FILE"].endswith("reports/coverage/.coverage")


def test_the_nightly_s_lanes_all_finish_before_the_first_failure_is_raised():
    import time
    noxfile = _noxfile()
    done = []

    def failing() -> None:
        raise RuntimeError("a step failed")

    def slow() -> None:
        time.sleep(0.2)
        done.append("slow")
    with pytest.raises(RuntimeError, match="a step failed"):
        noxfile.in_lanes(failing, slow)
    assert done == ["slow"]


def test_the_nightly_s_tests_read_the_real_set_where_it_converts_it_and_wait_for_it(tmp_path, monkeypatch):
    """The nightly tests on the real set's GGUFs (tests/references, tests/inputs/test_derived_cases.py) skipped
    when they looked in <cache>/real-gguf: they now read reports/nightly/real/gguf, once the real set's step
    has converted it."""
    commands, _ = nightly_commands(tmp_path, monkeypatch, None)
    [converted] = [i for i, c in enumerate(commands) if c.startswith("<real set converted")]
    assert commands[converted] == f"<real set converted into {tmp_path / 'reports/nightly/real/gguf'}>"
    assert converted < next(i for i, c in enumerate(commands) if "-m pytest --nightly" in c and "--deselect" in c)


def test_the_nightly_tests_run_once_in_two_parts(tmp_path, monkeypatch):
    """The every-code-point probes in one lane, every other nightly test but the session's twins in the other."""
    commands, _ = nightly_commands(tmp_path, monkeypatch, None)
    probes = "tests/tokenizer/test_unicode.py::test_every_code_point_against_llama_cpp"
    parts = [c.split() for c in commands if "-m pytest --nightly -m nightly" in c]
    small, big = sorted(parts, key=len)
    assert small[-1] == probes and "--deselect" not in small
    assert big.count("--deselect") == 6 and big[-2:] == ["--deselect", probes]


def test_real_gguf_dir_is_the_folder_the_environment_names(monkeypatch, tmp_path):
    from harness.models import real_set
    monkeypatch.delenv(real_set.REAL_GGUF_ENV, raising=False)
    assert real_set.real_gguf_dir() == real_set.cache_dir() / "real-gguf"
    monkeypatch.setenv(real_set.REAL_GGUF_ENV, str(tmp_path))
    assert real_set.real_gguf_dir() == tmp_path


def test_the_nightly_builds_the_chat_helper_before_its_live_runs(tmp_path, monkeypatch):
    """`run` checks the shipped vocabularies' chat templates only when the helper exists."""
    commands, _ = nightly_commands(tmp_path, monkeypatch, None)
    build = commands.index("python -m harness chat --build-helper --jobs " + _noxfile().JOBS)
    assert build < commands.index("<parity parts>")
