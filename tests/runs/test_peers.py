"""The peer matrix and the built-in peers' spec handling (harness.runs.matrix, harness.subjects.peers).

A cell says per capability what agreed with llama.cpp, or why the
implementation could not load the vocabulary; nothing unchecked reads as
agreeing. The end-to-end tests run real pairs against llama.cpp.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.runs import matrix as peers
from harness.runs.engine import load_engine
from harness.subjects import llama_release
from harness.subjects import peers as peer_engines
from harness.subjects.capabilities import new_tally

ROOT = Path(__file__).resolve().parents[2]


def _report(out: Path, *, capabilities: dict, engine_errors: list | None = None, notes: list | None = None,
            cases: int = 3) -> None:
    out.mkdir(parents=True, exist_ok=True)
    report = {"summary": {"per_model": {"llama-spm": {"cases": cases, "capabilities": capabilities,
                                                      "notes": notes or []}}},
              "engine_errors": engine_errors or [], "vocab_mismatches": []}
    (out / "report.json").write_text(json.dumps(report), encoding="utf-8")


def _tally(caps: set[str], **checks: tuple[int, int]) -> dict:
    tally = new_tally(caps)
    for check, (agree, checked) in checks.items():
        tally[check].update(status="checked", agree=agree, checked=checked, differ=checked - agree)
    return tally


def test_a_cell_shows_each_checked_figure_and_lists_the_rest_as_not_checked(tmp_path):
    _report(tmp_path, capabilities=_tally({"tokenize", "detokenize", "token_text"},
                                          ids=(188, 226), detokenize=(0, 226), text=(1, 1)))
    cell = peers.read_cell("transformers", "llama-spm", tmp_path, exit_code=1)
    lines = peers.cell_lines(peers.asdict(cell))
    assert cell.status == "ran"
    assert ("bad", "ids 188/226") in lines and ("bad", "detokenize 0/226") in lines and ("ok", "text 1/1") in lines
    not_checked = [text for css, text in lines if text.startswith("not checked")]
    assert not_checked and "score" in not_checked[0] and "pieces" in not_checked[0]
    assert not any(css == "ok" and text.startswith(("score", "attr", "pieces")) for css, text in lines)


def test_a_load_failure_is_the_cell_with_its_reason(tmp_path):
    error = "EngineLoadError: ValueError: GGUF model with architecture command-r is not supported yet."
    _report(tmp_path, capabilities=_tally({"tokenize"}, ids=(0, 226)),
            engine_errors=[{"case_id": "<load>", "error": error}])
    cell = peers.read_cell("transformers", "command-r", tmp_path, exit_code=1)
    assert cell.status == "not loaded"
    assert "command-r is not supported" in cell.reason
    assert peers.cell_lines(peers.asdict(cell))[0] == ("bad", "not loaded")


def test_a_setup_error_names_its_reason_and_no_figures(tmp_path):
    cell = peers.read_cell("transformers", "llama-spm", tmp_path / "none", exit_code=2,
                           stderr="error: --engine transformers needs torch: pip install ...\n")
    assert (cell.status, cell.checks) == ("set-up error", {})
    assert cell.reason.startswith("--engine transformers needs torch")


def test_totals_count_only_vocabularies_where_every_checked_unit_agrees():
    ok = peers.Cell("ours", "a", "ran", checks=_tally({"tokenize"}, ids=(5, 5)))
    differ = peers.Cell("ours", "b", "ran", checks=_tally({"tokenize"}, ids=(4, 5)))
    nothing = peers.Cell("ours", "c", "ran", checks=new_tally({"tokenize"}))  # nothing checked: not agreement
    unloaded = peers.Cell("ours", "d", "not loaded", reason="x")
    total = peers.totals([ok, differ, nothing, unloaded], ["ours"])["ours"]
    assert (total["loaded"], total["all_checked_agree"], total["not_loaded"]) == (3, 1, ["d"])
    assert (total["checks"]["ids"]["agree"], total["checks"]["ids"]["checked"]) == (9, 10)


def test_the_page_links_each_cell_to_its_report(tmp_path):
    cells = [peers.Cell("ours", "llama-spm", "ran", checks=_tally({"tokenize"}, ids=(2, 2)),
                        report="ours/llama-spm/report.html"),
             peers.Cell("transformers", "llama-spm", "not loaded", reason="unsupported <arch>")]
    matrix = peers.build(cells, ["ours", "transformers"], ["llama-spm"], peers.Options())
    json_path, html_path = peers.write(matrix, tmp_path)
    html = html_path.read_text(encoding="utf-8")
    assert 'href="ours/llama-spm/report.html"' in html
    assert "unsupported &lt;arch&gt;" in html and 'data-status="not loaded"' in html
    assert json.loads(json_path.read_text())["rows"]["llama-spm"]["transformers"]["status"] == "not loaded"


def test_the_page_renders_through_the_one_environment_of_every_page():
    """peers.html comes from `harness.report.templating.environment()`: strict about undefined names, one escaping."""
    from harness.report.templating import environment
    cells = [peers.Cell("ours", "llama-spm", "ran", checks=_tally({"tokenize"}, ids=(2, 2)),
                        report="ours/llama-spm/report.html"),
             peers.Cell("transformers", "llama-spm", "not loaded", reason="<script>x</script>")]
    matrix = peers.build(cells, ["ours", "transformers"], ["llama-spm"], peers.Options())
    page = peers.render_html(matrix)
    assert page == environment().get_template("peers.html.j2").render(
        matrix=matrix, cell_lines=peers.cell_lines, checks=list(peers.CHECKS))
    assert "<script>x" not in page and "&lt;script&gt;x&lt;/script&gt;" in page


def test_release_specs_are_checked_before_anything_is_built():
    assert llama_release.version_of("llama.cpp@0.3.16") == "0.3.16"
    for bad in ("llama.cpp@", "llama.cpp@latest", "llama.cpp@0.3", "llama.cpp@0.3.16;rm"):
        with pytest.raises(SetupError, match=r"llama\.cpp@X\.Y\.Z"):
            load_engine(bad)
    assert peer_engines.is_peer("transformers") and peer_engines.is_peer("llama.cpp@1.2.3")
    assert not peer_engines.is_peer("tokenizer:Tokenizer.from_gguf")


def test_transformers_missing_is_a_setup_error_naming_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    with pytest.raises(SetupError, match=r"needs .*torch.*\[transformers\]"):
        load_engine("transformers")


def test_peers_command_refuses_a_bad_vocabulary_with_exit_2(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness", "peers", "--model", "no-such-vocab",
                           "--report", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert "unknown vocabulary 'no-such-vocab'" in done.stderr and "Traceback" not in done.stderr


TOKENIZE_ONLY = '''
from tokenizer import Tokenizer

class Ids:
    capabilities = ("tokenize", "bytes_input")
    def __init__(self, path):
        self.tok = Tokenizer.from_gguf(path)
    def tokenize(self, text, *, add_special, parse_special):
        return self.tok.tokenize(text, add_special=add_special, parse_special=parse_special)

def load(path):
    return Ids(path)

def broken(path):
    raise ValueError("cannot read this vocabulary")
'''


@pytest.mark.oracle
@pytest.mark.vocab
def test_matrix_end_to_end_against_llama_cpp(tmp_path):
    (tmp_path / "ids_only.py").write_text(TOKENIZE_ONLY, encoding="utf-8")
    corpus = tmp_path / "tiny.jsonl"
    corpus.write_text('{"id": "a", "text": "Hello world"}\n{"id": "b", "text": " <s> x"}\n', encoding="utf-8")
    out = tmp_path / "matrix"
    done = subprocess.run([sys.executable, "-m", "harness", "peers", "--engine", "ours", "--engine", "ids_only:load",
                           "--engine", "ids_only:broken", "--model", "llama-spm", "--no-default-corpora",
                           "--corpus", str(corpus), "--report", str(out), "--quiet"],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    row = json.loads((out / "peers.json").read_text())["rows"]["llama-spm"]
    ours, ids_only, broken = row["ours"], row["ids_only:load"], row["ids_only:broken"]
    # the two corpus cases and the one long document `run` composes by default
    assert ours["checks"]["ids"]["agree"] == ours["checks"]["ids"]["checked"] == 3
    assert ours["checks"]["score"]["status"] == "checked"
    assert ids_only["checks"]["ids"]["agree"] == 3
    assert ids_only["checks"]["detokenize"]["status"] == "not offered"
    assert ids_only["checks"]["score"]["status"] == "not offered"
    assert broken["status"] == "not loaded" and "cannot read this vocabulary" in broken["reason"]
    assert (out / ours["report"]).is_file() and (out / ids_only["report"]).is_file()


def test_reuse_reads_a_pair_already_run_without_running_it(tmp_path, monkeypatch):
    out = tmp_path / "ours" / "llama-spm"
    _report(out, capabilities=_tally({"tokenize"}, ids=(3, 3)))
    (out / "pair.json").write_text(json.dumps({"exit_code": 0, "stderr": "", "seconds": 1.5,
                                               "command": "python -m harness run --model llama-spm"}))
    monkeypatch.setattr(peers.subprocess, "run", lambda *a, **k: pytest.fail("ran the pair again"))
    cell = peers.run_pair("ours", "llama-spm", tmp_path, peers.Options(reuse=True))
    assert (cell.status, cell.seconds) == ("ran", 1.5)
    assert cell.checks["ids"]["agree"] == 3


def test_a_load_error_with_llama_cpp_log_shows_the_line_naming_the_error(tmp_path):
    log = ("OracleError: llama.cpp cannot load x.gguf: llama_model_loader: - kv   7: gemma4.feed_forward_length\n"
           "print_info: file type   = F16\n"
           "llama_model_load: error loading model: unknown model architecture: 'gemma4'\n"
           "llama_model_load_from_file_impl: failed to load model\n")
    _report(tmp_path, capabilities=_tally({"tokenize"}, ids=(0, 3)),
            engine_errors=[{"case_id": "<load>", "error": log}])
    cell = peers.read_cell("llama.cpp@0.3.16", "gemma-4", tmp_path, exit_code=1)
    assert cell.reason == "llama_model_load: error loading model: unknown model architecture: 'gemma4'"


# --- --reference: the original tokenizer as every pair's third side --------------------------------

def _reference_block(conversion: tuple[int, int], versus: tuple[int, int], spec: str = "hf:/o/tokenizer.json"):
    def row(agree: int, checked: int) -> dict:
        return {"checked": checked, "agree": agree, "differ": checked - agree, "not_applicable": 1}
    return {"spec": spec, "classes": {"parity": row(*versus), "conversion": row(*conversion),
                                      "engine_vs_original": row(*versus)}}


def test_a_pair_with_an_original_runs_three_ways_and_its_cell_shows_the_original(tmp_path):
    options = peers.Options(references=(("a.gguf", "hf:/o/tokenizer.json"),), reference_args=("add_bos=true",))
    argv = peers.run_argv("ours", "a.gguf", tmp_path, options)
    at = argv.index("--reference")
    assert argv[at:at + 4] == ["--reference", "hf:/o/tokenizer.json", "--reference-arg", "add_bos=true"]
    assert "--reference" not in peers.run_argv("ours", "b.gguf", tmp_path, options)  # a row without one
    _report(tmp_path, capabilities=_tally({"tokenize"}, ids=(3, 3)))
    report = json.loads((tmp_path / "report.json").read_text())
    report["summary"]["per_model"]["llama-spm"]["reference"] = _reference_block((2, 3), (1, 3))
    (tmp_path / "report.json").write_text(json.dumps(report))
    cell = peers.read_cell("transformers", "llama-spm", tmp_path, exit_code=1)
    assert ("bad", "original 1/3 +1 n/a") in peers.cell_lines(peers.asdict(cell))
    assert ("ok", "ids 3/3") in peers.cell_lines(peers.asdict(cell))


def test_the_row_names_the_original_and_llama_cpp_against_it_and_totals_add_up(tmp_path):
    cells = [peers.Cell("ours", "m", "ran", checks=_tally({"tokenize"}, ids=(3, 3)),
                        reference=_reference_block((2, 3), (2, 3))),
             peers.Cell("transformers", "m", "ran", checks=_tally({"tokenize"}, ids=(1, 3)),
                        reference=_reference_block((2, 3), (3, 3))),
             peers.Cell("ours", "plain", "ran", checks=_tally({"tokenize"}, ids=(3, 3)))]
    matrix = peers.build(cells, ["ours", "transformers"], ["m", "plain"], peers.Options())
    assert matrix["originals"] == {"m": {"spec": "hf:/o/tokenizer.json", "from": "ours",
                                         "conversion": {"checked": 3, "agree": 2, "differ": 1, "not_applicable": 1}}}
    assert matrix["totals"]["ours"]["original"] == {"checked": 3, "agree": 2, "differ": 1, "not_applicable": 1}
    assert matrix["totals"]["transformers"]["original"]["agree"] == 3
    line = peers.one_line(matrix)
    assert "ours: 2/2 loaded, 2 agree on every check made, ids 6/6, vs original 2/3" in line  # (with llama.cpp)
    assert line.endswith("m: llama.cpp vs original 2/3")
    html = peers.write(matrix, tmp_path)[1].read_text(encoding="utf-8")
    assert 'data-spec="hf:/o/tokenizer.json"' in html and "llama.cpp vs original 2/3 +1 n/a" in html
    assert html.count("original 3/3") == 2  # the transformers cell and its total


def test_reference_values_name_their_vocabulary_when_there_are_several(tmp_path):
    from harness.commands.peers import reference_pairs
    original = tmp_path / "tokenizer.json"
    original.write_text("{}")
    assert reference_pairs([f"hf:{tmp_path}"], ["a.gguf"]) == (("a.gguf", f"hf:{original}"),)
    assert reference_pairs([f"b.gguf=hf:{original}"], ["a.gguf", "b.gguf"]) == (("b.gguf", f"hf:{original}"),)
    with pytest.raises(SetupError, match="say which"):
        reference_pairs([f"hf:{original}"], ["a.gguf", "b.gguf"])
    with pytest.raises(SetupError, match="expected hf:PATH"):
        reference_pairs(["a.gguf=tok:x"], ["a.gguf"])
    with pytest.raises(SetupError, match="no such file"):
        reference_pairs([f"hf:{tmp_path / 'none'}"], ["a.gguf"])


@pytest.mark.oracle
def test_matrix_with_an_original_end_to_end(tmp_path):
    """A GGUF whose pre name drops ignore_merges (smaug-bpe): ours agrees with llama.cpp, both differ
    from the original on " zebra"; the row says so, the cell too, and the exit status is still 0."""
    from tests import reference_files as rf
    original = rf.bpe_json(tmp_path / "o" / "tokenizer.json", ignore_merges=True)
    gguf = rf.bpe_gguf(original, tmp_path / "smaug.gguf", pre="smaug-bpe")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "the cat"}\n{"id": "b", "text": " zebra"}\n', encoding="utf-8")
    out = tmp_path / "matrix"
    done = subprocess.run([sys.executable, "-m", "harness", "peers", "--engine", "ours", "--model", str(gguf),
                           "--reference", f"hf:{original.parent}", "--no-default-corpora", "--corpus", str(corpus),
                           "--report", str(out), "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    matrix = json.loads((out / "peers.json").read_text())
    [model] = matrix["models"]
    # the two corpus cases and the long document (composed of their texts, checked whatever they did; seed 0)
    assert matrix["originals"][model]["conversion"] == {"checked": 3, "agree": 2, "differ": 1, "not_applicable": 0}
    cell = matrix["rows"][model]["ours"]
    assert cell["checks"]["ids"]["agree"] == cell["checks"]["ids"]["checked"] == 3
    assert cell["reference"]["classes"]["engine_vs_original"]["differ"] == 1
    assert "--reference" in cell["command"]
    assert f"{model}: llama.cpp vs original 2/3" in done.stdout  # agree of checked


@pytest.mark.parametrize("plant", ["fifo", "link-to-dev-null"])
def test_a_matrix_output_that_is_no_file_is_refused_before_any_pair_runs(tmp_path, monkeypatch, plant):
    """issue 47: every output is checked before any work; peers.json a FIFO or peers.html a link to /dev/null."""
    if plant == "fifo":
        os.mkfifo(tmp_path / "peers.json")
    else:
        (tmp_path / "peers.html").symlink_to("/dev/null")
    monkeypatch.setattr(peers.subprocess, "run", lambda *a, **k: pytest.fail("ran a pair"))
    with pytest.raises(SetupError, match=f"--report {tmp_path}/peers"):
        peers.run_matrix(["ours"], ["llama-spm"], tmp_path, peers.Options())
    assert sorted(p.name for p in tmp_path.iterdir()) == (["peers.json"] if plant == "fifo" else ["peers.html"])
