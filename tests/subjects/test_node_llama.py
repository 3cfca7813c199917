"""`--engine node-llama-cpp@VERSION`: node-llama-cpp's prebuilt llama.cpp as a peer (docs/peers.md).

The install's failures (no Node, an old Node, no npm, npm failing or hanging, a bad version) are
each one line and exit 2, and leave nothing that looks installed: fake `node` and `npm` programs on
PATH, no registry. The peer itself needs Node.js and the package: installed once into the user cache
(`~/.cache/gguf-parity/venvs/node-llama-cpp-VERSION`, about 10 s the first time), skipped where Node
or npm is absent; then one vocabulary on a few cases, through `peers` (one `run` per pair), shows what
it offers, what it does not, and the llama.cpp build it carries.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.subjects import node_llama, peers

ROOT = Path(__file__).resolve().parents[2]
VERSION = "3.21.1"
SPEC = f"node-llama-cpp@{VERSION}"


def _programs(folder: Path, **scripts: str) -> Path:
    """`folder` holding each shell script under its name (node, npm), executable."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in scripts.items():
        path = folder / name
        path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
        path.chmod(0o755)
    return folder


@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    """PATH holding only fake programs (see `_programs`), and an empty cache for the package."""
    monkeypatch.setenv("GGUF_PARITY_VENVS", str(tmp_path / "venvs"))

    def use(**scripts: str) -> Path:
        folder = _programs(tmp_path / "bin", **scripts)
        monkeypatch.setenv("PATH", str(folder))
        return folder
    return use


@pytest.mark.parametrize("spec", ["node-llama-cpp@latest", "node-llama-cpp@^3.21.1", "node-llama-cpp@3.21",
                                  "node-llama-cpp@", "node-llama-cpp@3.21.1 --registry=x"])
def test_only_an_exact_version_is_accepted(spec):
    with pytest.raises(SetupError, match="an exact npm version"):
        node_llama.version_of(spec)


def test_no_node_is_one_line(fake_tools):
    fake_tools()
    with pytest.raises(SetupError, match=r"needs Node\.js 20 or later: no `node` on PATH"):
        peers.child_argv(SPEC)


def test_an_old_node_is_one_line(fake_tools):
    fake_tools(node="echo v18.19.1")
    with pytest.raises(SetupError, match=r"needs Node\.js 20 or later: .*node is v18\.19\.1"):
        node_llama.ensure(VERSION)


def test_no_npm_is_one_line(fake_tools):
    fake_tools(node="echo v20.11.0")
    with pytest.raises(SetupError, match="needs npm: no `npm` on PATH"):
        node_llama.ensure(VERSION)


def test_a_failed_install_is_one_line_and_leaves_nothing(fake_tools, tmp_path):
    # npm writes part of the package, then fails as the registry makes it fail
    fake_tools(node="echo v20.11.0", npm='/bin/mkdir -p "$3/node_modules/node-llama-cpp" && '
                                          'echo "{}" > "$3/node_modules/node-llama-cpp/package.json" && '
                                          "echo 'npm error 404 No match found for version 3.21.1' >&2; exit 1")
    with pytest.raises(SetupError, match=r"npm install node-llama-cpp@3\.21\.1 failed \(exit 1\): "
                                         r"npm error 404 No match found"):
        node_llama.ensure(VERSION)
    assert not node_llama.is_ready(VERSION)
    assert sorted(p.name for p in (tmp_path / "venvs").iterdir()) == ["node-llama-cpp-3.21.1.lock"]


def test_an_install_that_hangs_is_stopped(fake_tools, tmp_path, monkeypatch):
    fake_tools(node="echo v20.11.0", npm="exec /bin/sleep 60")
    monkeypatch.setattr(node_llama, "NPM_TIMEOUT", 1.0)
    with pytest.raises(SetupError, match=r"took over 1 s \(stopped\)"):
        node_llama.ensure(VERSION)
    assert sorted(p.name for p in (tmp_path / "venvs").iterdir()) == ["node-llama-cpp-3.21.1.lock"]


def test_engine_args_are_refused(fake_tools, monkeypatch):
    monkeypatch.setattr(peers, "child_argv", lambda spec: ["node", "child.mjs", "dir"])
    with pytest.raises(SetupError, match="takes no --engine-arg"):
        peers.peer_factory(SPEC, args={"add_bos": "true"}, timeout=30)


@pytest.mark.vocab
def test_the_command_line_says_no_node_in_one_line(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--model", "llama-spm", "--engine", SPEC,
                           "--report", str(tmp_path / "report"), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PATH": str(empty), "HOME": str(Path.home())})
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "no `node` on PATH" in lines[0], done.stderr


# --- the peer itself: Node.js and the package -------------------------------------------------------

@pytest.fixture(scope="module")
def installed() -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (apt-get install nodejs)")
    if not node_llama.is_ready(VERSION) and shutil.which("npm") is None:
        pytest.skip("npm is not installed (it comes with Node.js)")
    return node_llama.ensure(VERSION, log=lambda _: None)


CASES = [{"id": "hello", "text": "Hello world"},
         {"id": "specials", "text": "<s>Hello</s> world"},  # a BOS in the text: remove_special drops it
         {"id": "space", "text": " x  y"},
         {"id": "replacement", "text": "\ufffd"},  # a JS string cannot say if this U+FFFD was one
         {"id": "invalid", "bytes": "ff41"}]


@pytest.mark.oracle
@pytest.mark.vocab
def test_the_peer_offers_what_its_api_answers_exactly(installed, tmp_path):
    corpus = tmp_path / "cases.jsonl"
    corpus.write_text("".join(json.dumps(c) + "\n" for c in CASES), encoding="utf-8")
    out = tmp_path / "peers"
    done = subprocess.run([sys.executable, "-m", "harness", "peers", "--engine", SPEC, "--model", "llama-spm",
                           "--no-default-corpora", "--corpus", str(corpus), "--report", str(out), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    matrix = json.loads((out / "peers.json").read_text(encoding="utf-8"))
    cell = matrix["rows"]["llama-spm"][SPEC]
    assert cell["status"] == "ran", cell
    checks = cell["checks"]
    # BOS composed, <s> parsed, the U+FFFD case (and the long document a run adds, where it counts it)
    assert checks["ids"]["agree"] == checks["ids"]["checked"] >= 4 and checks["ids"]["errors"] == 0
    assert checks["ids"]["not_applicable"] == 1  # invalid UTF-8: no bytes_input
    detokenize = checks["detokenize"]  # the U+FFFD case is an error, never a pass
    assert detokenize["errors"] == 1 and detokenize["agree"] == detokenize["checked"] - 1 == checks["ids"]["agree"] - 1
    for check in ("attr", "eog", "control"):
        assert checks[check]["status"] == "checked" and checks[check]["agree"] == 1, check
    for check in ("pieces", "text", "score", "vocab_info", "specials"):
        assert checks[check]["status"] == "not offered", check

    report = json.loads((out / SPEC / "llama-spm" / "report.json").read_text(encoding="utf-8"))
    build = report["meta"]["engine_build"]
    assert build["version"] == VERSION and build["llama_cpp"]["repo"] == "ggml-org/llama.cpp"
    assert build["llama_cpp"]["release"] in build["description"]
    (error,) = {e["error"].split(":")[0] for e in report["engine_errors"]}
    assert error == "NotExact" and {e["case_id"] for e in report["engine_errors"]} == {"replacement"}
    assert matrix["meta"]["builds"][SPEC] == build["description"]
    assert build["description"] in (out / "peers.html").read_text(encoding="utf-8")
