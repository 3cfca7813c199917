"""A model folder is data, never code: no file of a hostile folder runs, for any command that opens one.

The hostile folders are the ones a hostile round found running their Python: a
`config.json` naming an architecture whose converter path loads the tokenizer with
`trust_remote_code=True` (`QWenLMHeadModel`, `ChatGLMModel`), a `tokenizer_config.json`
whose `auto_map` points at the folder's `tokenization_x.py`, a `tokenizer.model`,
with and without a `tokenizer.json`, and modules named like the libraries the harness
imports (`tokenizers.py`, `jinja2.py`), for a run started inside the folder. Every
Python file of the folder writes a marker file when it runs; no command may leave one.

`convert` and `inspect --reference hf:` run llama.cpp's converter in a venv the tests
session does not build; here they run the real driver (`harness/models/convert_driver.py`)
on a stand-in converter that does what transformers does with `trust_remote_code=True`:
it loads what `auto_map` names through `transformers.dynamic_module_utils.
get_class_from_dynamic_module`, and imports `tokenization_x` by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.models import convert
from tests import reference_files as rf

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURES = ("QWenLMHeadModel", "ChatGLMModel")
SHADOWS = ("tokenization_x", "configuration_x", "tokenizers", "jinja2")

# transformers' one loader of a folder's code, as the stand-in converter's library
LOADER = '''
import runpy
from pathlib import Path

def get_class_from_dynamic_module(class_reference, pretrained_model_name_or_path, *args, **kwargs):
    module = class_reference.split("--")[-1].split(".")[0]
    return runpy.run_path(str(Path(pretrained_model_name_or_path) / f"{module}.py"))
'''
# transformers.models.auto.tokenization_auto: it imports the loader by name, as transformers' own does
AUTO = '''
import json
from pathlib import Path
from transformers.dynamic_module_utils import get_class_from_dynamic_module

def load_remote_code(folder):
    """What trust_remote_code=True does: every class auto_map names, loaded from the folder."""
    for name in ("config.json", "tokenizer_config.json"):
        path = Path(folder) / name
        auto_map = json.loads(path.read_text()).get("auto_map") if path.is_file() else None
        for refs in (auto_map or {}).values():
            for ref in refs if isinstance(refs, list) else [refs]:
                if ref:
                    get_class_from_dynamic_module(ref, folder)

class AutoTokenizer:
    @staticmethod
    def from_pretrained(folder, **kwargs):
        if kwargs.get("trust_remote_code"):
            load_remote_code(folder)
        return "tokenizer"
'''
BASE = '''
import logging
logger = logging.getLogger("hf-to-gguf")

class TextModel:
    def get_vocab_base_pre(self, tokenizer):
        logger.debug("chkhsh: abababababababababababababababababababababababababababababababab")
        return "qwen2"
'''
MAIN = '''
import json
import sys
from pathlib import Path
from transformers import AutoTokenizer

def main():
    folder = sys.argv[1]
    architecture = json.loads((Path(folder) / "config.json").read_text())["architectures"][0]
    if architecture in ("QWenLMHeadModel", "ChatGLMModel"):  # _set_vocab_qwen, ChatGLMModel.set_vocab
        AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    sys.path.insert(0, folder)  # and the module search path: a converter that imports from the folder
    try:
        import tokenization_x  # noqa: F401
    except ImportError:
        pass
    raise ValueError("the stand-in converter writes no GGUF")
'''


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """The converter's sources replaced by the stand-in, run by this interpreter through the real driver."""
    root = tmp_path / "llama.cpp"
    (root / "conversion").mkdir(parents=True)
    auto = root / "transformers" / "models" / "auto"
    auto.mkdir(parents=True)
    for package in (root / "conversion", auto.parent, auto):
        (package / "__init__.py").write_text("")
    (root / "transformers" / "__init__.py").write_text("from .models.auto.tokenization_auto import AutoTokenizer\n")
    (root / "conversion" / "base.py").write_text(BASE)
    (auto / "tokenization_auto.py").write_text(AUTO)
    (root / "transformers" / "dynamic_module_utils.py").write_text(LOADER)
    (root / "convert_hf_to_gguf.py").write_text(MAIN)
    monkeypatch.setattr(convert, "sources_dir", lambda: root)
    monkeypatch.setattr(convert, "ensure_venv", lambda **kw: Path(sys.executable))
    return root


def sentencepiece_model() -> bytes:
    def piece(text: bytes) -> bytes:
        body = b"\x0a" + bytes([len(text)]) + text + b"\x15\x00\x00\x00\x00"
        return b"\x0a" + bytes([len(body)]) + body
    return piece(b"<unk>") + piece(b"a") + piece(b"b")


def hostile(root: Path, markers: Path, *, architecture: str, tokenizer_json: bool) -> Path:
    """A folder whose every Python file writes `markers/<module>` when it runs."""
    root.mkdir(parents=True)
    markers.mkdir(exist_ok=True)
    for module in SHADOWS:
        (root / f"{module}.py").write_text(f"open({str(markers / module)!r}, 'w').write('ran')\n")
    (root / "config.json").write_text(json.dumps({
        "architectures": [architecture], "model_type": "qwen",
        "auto_map": {"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "configuration_x.X"}}))
    (root / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "XTokenizer", "auto_map": {"AutoTokenizer": ["tokenization_x.XTokenizer", None]}}))
    (root / "tokenizer.model").write_bytes(sentencepiece_model())
    if tokenizer_json:
        rf.bpe_json(root / "tokenizer.json")
    return root


def ran(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir()) if markers.is_dir() else []


FOLDERS = [pytest.param(arch, with_json, id=f"{arch}-{'with' if with_json else 'without'}-tokenizer.json")
           for arch in ARCHITECTURES for with_json in (True, False)]


@pytest.mark.parametrize("architecture, tokenizer_json", FOLDERS)
def test_convert_runs_no_file_of_the_folder(tmp_path, stand_in, capsys, architecture, tokenizer_json):
    """The converter loads these with trust_remote_code=True: the tokenizer needs custom code, exit 2."""
    markers = tmp_path / "markers"
    folder = hostile(tmp_path / "model", markers, architecture=architecture, tokenizer_json=tokenizer_json)
    code = cli.main(["convert", str(folder), "--out", str(tmp_path / "x.gguf")])
    printed = capsys.readouterr()
    assert ran(markers) == []
    assert "left out of the converter's copy" in printed.out and "tokenization_x.py" in printed.out
    assert code == 2 and printed.err.count("\n") == 1, printed
    assert f"{folder}: the tokenizer needs custom code" in printed.err and "tokenization_x.XTokenizer" in printed.err


def test_convert_goes_on_without_the_code_where_the_converter_does_not_ask_for_it(tmp_path, stand_in, capsys):
    """Baichuan's path reads tokenizer.model itself: the folder's code is left out, the conversion goes on."""
    markers = tmp_path / "markers"
    folder = hostile(tmp_path / "model", markers, architecture="BaichuanForCausalLM", tokenizer_json=False)
    code = cli.main(["convert", str(folder), "--out", str(tmp_path / "x.gguf")])
    printed = capsys.readouterr()
    assert ran(markers) == []
    assert code == 1 and printed.err == "", printed  # the stand-in converter's own refusal: a result
    assert "refused: ValueError: the stand-in converter writes no GGUF" in printed.out
    assert "supplied config.json (the folder's own without auto_map" in printed.out


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_inspect_reference_refuses_a_tokenizer_that_is_only_code(tmp_path, stand_in, capsys, architecture):
    """`hf:` on a folder whose auto_map names a tokenizer and that has no tokenizer.json: exit 2, nothing run."""
    from harness.models.gguf_writer import write

    gguf = tmp_path / "v.gguf"
    write(gguf, {"general.architecture": "qwen2", "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
                 "tokenizer.ggml.tokens": ["a", "b"]})
    markers = tmp_path / "markers"
    folder = hostile(tmp_path / "model", markers, architecture=architecture, tokenizer_json=False)
    code = cli.main(["inspect", str(gguf), "--reference", f"hf:{folder}"])
    printed = capsys.readouterr()
    assert ran(markers) == []
    assert code == 2 and "needs custom code" in printed.err and printed.err.count("\n") == 1, printed


def test_the_drivers_own_wall_refuses_a_folders_code_whatever_the_converter_asks(tmp_path, stand_in):
    """A converter handed the original folder itself (code and auto_map in place) still runs none of it."""
    markers = tmp_path / "markers"
    folder = hostile(tmp_path / "model", markers, architecture="QWenLMHeadModel", tokenizer_json=True)
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, str(convert.DRIVER), "convert", str(stand_in), str(out), str(folder),
                           "--vocab-only", "--outfile", str(tmp_path / "x.gguf")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert ran(markers) == []
    assert result["error"]["type"] == convert.CUSTOM_CODE
    assert "configuration_x.XConfig" in result["error"]["message"]


def three_way_in_folder(tmp_path: Path, command: list[str]) -> tuple[subprocess.CompletedProcess, Path]:
    """`command` started inside a hostile folder, with its tokenizer.json as the reference."""
    markers = tmp_path / "markers"
    folder = hostile(tmp_path / "model", markers, architecture="QWenLMHeadModel", tokenizer_json=True)
    gguf = rf.bpe_gguf(folder / "tokenizer.json", tmp_path / "tiny.gguf")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "c0", "text": "the cat sat"}) + "\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # -P: the harness's own process does not take the folder's modules either (docs/references.md)
    done = subprocess.run([sys.executable, "-P", "-m", "harness", *command, "--model", str(gguf), "--reference",
                           "hf:.", "--no-default-corpora", "--corpus", str(corpus), "--fuzz", "0"],
                          capture_output=True, text=True, cwd=folder, env=env, timeout=600)
    return done, markers


@pytest.mark.oracle
def test_run_reference_started_inside_the_folder_imports_nothing_from_it(tmp_path):
    done, markers = three_way_in_folder(tmp_path, ["run", "--jobs", "1", "--quiet", "--report", str(tmp_path / "r")])
    assert ran(markers) == []
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.oracle
def test_peers_reference_started_inside_the_folder_imports_nothing_from_it(tmp_path):
    done, markers = three_way_in_folder(tmp_path, ["peers", "--engine", "ours", "--report", str(tmp_path / "p")])
    assert ran(markers) == []
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_installed_copy_gives_its_children_no_current_directory_on_the_module_path(tmp_path, monkeypatch):
    """Installed (no pyproject.toml beside the package), a child's PYTHONPATH gains nothing: not the cwd."""
    from harness import environment

    installed = tmp_path / "site-packages" / "harness" / "environment.py"
    monkeypatch.setattr(environment, "__file__", str(installed))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "")
    assert str(tmp_path) not in environment.child_env()["PYTHONPATH"].split(os.pathsep)


# --- a model folder is read inside the folder (issue 46: "a symlink in a model folder exfiltrates any file") ---

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY----- planted secret\n"
WHY = {"relative": "outside the folder", "absolute": "outside the folder", "chain": "outside the folder",
       "fifo": "a FIFO, not a regular file", "link-to-fifo": "outside the folder",
       "dangling": "a link that leads nowhere", "directory": "a directory, not a regular file"}
LINKS = tuple(WHY)
DATA_NAMES = ("chat_template.jinja", "tokenizer_config.json", "tokenizer.model", "tokenizer.json", "config.json")


@pytest.fixture
def recording_converter(tmp_path, monkeypatch):
    """No venv: each driver run records the work folder it was given (every file's bytes and whether it was a
    link) and answers that no GGUF was written."""
    monkeypatch.setattr(convert, "sources_dir", lambda: tmp_path / "no-converter")
    monkeypatch.setattr(convert, "ensure_venv", lambda **kw: Path(sys.executable))
    runs: list[dict[str, tuple[bool, bytes]]] = []

    def run_driver(mode, args, *, timeout=900, folder_code=None):
        work = Path(args[0])
        runs.append({p.name: (p.is_symlink(), p.read_bytes()) for p in work.iterdir()})
        raise convert.SetupError("the recording converter stops here")

    monkeypatch.setattr(convert, "run_driver", run_driver)
    return runs


def spm_folder(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "tokenizer.model").write_bytes(sentencepiece_model())
    return root


def planted(folder: Path, name: str, secret: Path, how: str) -> Path:
    """`folder/name` made as `how` says, pointing at (or standing for) `secret`."""
    path = folder / name
    path.unlink(missing_ok=True)
    if how == "relative":
        path.symlink_to(os.path.relpath(secret, folder))
    elif how == "absolute":
        path.symlink_to(secret)
    elif how == "chain":
        (folder / "hop2").symlink_to(secret)
        (folder / "hop1").symlink_to("hop2")
        path.symlink_to("hop1")
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "link-to-fifo":
        os.mkfifo(secret.with_name("pipe"))
        path.symlink_to(secret.with_name("pipe"))
    elif how == "dangling":
        path.symlink_to(folder / "nothing-here")
    elif how == "directory":
        path.mkdir()
    return path


@pytest.mark.parametrize("how", LINKS)
@pytest.mark.parametrize("name", DATA_NAMES)
def test_convert_refuses_a_data_file_that_is_a_link_out_of_the_folder_or_not_a_regular_file(
        tmp_path, recording_converter, capsys, name, how):
    """The hostile round: chat_template.jinja -> a secret outside, and `convert` exited 0 with its bytes in the
    GGUF. Now: exit 2, one line naming the file, and the converter never runs (nothing of the secret copied)."""
    secret = tmp_path / "outside" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    folder = spm_folder(tmp_path / "model")
    path = planted(folder, name, secret, how)
    code = cli.main(["convert", str(folder), "--out", str(tmp_path / "x.gguf")])
    err = capsys.readouterr().err
    assert recording_converter == [], "the converter was given the folder"
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {path}: "), err
    assert WHY[how] in err and SECRET.decode() not in err


def test_convert_copies_a_link_inside_the_folder_as_a_file_and_a_hard_link_as_the_file_it_is(
        tmp_path, recording_converter, capsys):
    folder = spm_folder(tmp_path / "model")
    (folder / "templates").mkdir()
    (folder / "templates" / "chat.jinja").write_text("{{ messages }}")
    (folder / "chat_template.jinja").symlink_to(Path("templates") / "chat.jinja")
    outside = tmp_path / "config.json"
    outside.write_text('{"architectures": ["LlamaForCausalLM"]}')
    os.link(outside, folder / "config.json")  # a hard link is a regular file of the folder: read as one
    assert cli.main(["convert", str(folder), "--out", str(tmp_path / "x.gguf")]) == 2
    assert "the recording converter stops here" in capsys.readouterr().err
    [work] = recording_converter
    assert work["chat_template.jinja"] == (False, b"{{ messages }}")  # a copy, not a link
    assert work["config.json"] == (False, outside.read_bytes())
    assert not any(is_link for is_link, _ in work.values())


def test_convert_reads_a_hugging_face_cache_snapshot(tmp_path, recording_converter, capsys):
    """Every file of a snapshot is a link to ../../blobs/HASH: inside the repository's cache, so read."""
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "1a2b").write_bytes(sentencepiece_model())
    snapshot = repo / "snapshots" / "c0ffee"
    snapshot.mkdir(parents=True)
    (snapshot / "tokenizer.model").symlink_to(Path("..") / ".." / "blobs" / "1a2b")
    assert cli.main(["convert", str(snapshot), "--out", str(tmp_path / "x.gguf")]) == 2
    assert "the recording converter stops here" in capsys.readouterr().err
    assert recording_converter[0]["tokenizer.model"] == (False, sentencepiece_model())


def test_a_fifo_or_a_5_gb_sparse_tokenizer_json_is_refused_at_once(tmp_path, recording_converter, capsys):
    """What held in the third round stays tested: neither blocks nor takes memory."""
    import time

    folder = spm_folder(tmp_path / "fifo")
    os.mkfifo(folder / "tokenizer.json")
    began = time.monotonic()
    assert cli.main(["convert", str(folder), "--out", str(tmp_path / "x.gguf")]) == 2
    assert "tokenizer.json: a FIFO, not a regular file" in capsys.readouterr().err
    folder = spm_folder(tmp_path / "sparse")
    with (folder / "tokenizer.json").open("wb") as fh:
        fh.truncate(5 << 30)
    assert cli.main(["convert", str(folder), "--out", str(tmp_path / "x.gguf")]) == 2
    assert "5,368,709,120 bytes, over the limit" in capsys.readouterr().err
    assert time.monotonic() - began < 10 and recording_converter == []


@pytest.mark.parametrize("files", [5_000, pytest.param(100_000, marks=pytest.mark.nightly)])
def test_a_folder_of_many_files_is_listed_in_a_line_of_bounded_length(tmp_path, recording_converter, capsys, files):
    """The hostile round's 100,000 files (nightly: making them takes about 15 s here)."""
    folder = spm_folder(tmp_path / "many")
    for n in range(files):
        (folder / f"shard-{n:06d}.bin").touch()
    assert cli.main(["convert", str(folder), "--out", str(tmp_path / "x.gguf")]) == 2
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("left out")]
    assert line.endswith(f"and {files - convert.SHOWN_LEFT_OUT:,} more") and len(line) < 1000
    assert sorted(recording_converter[0]) == ["config.json", "tokenizer.model"]
