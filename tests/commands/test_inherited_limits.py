"""A memory limit the harness inherits (`ulimit -v`, a CI container, `prlimit --as=N`) is never raised.

Every child caps its own memory (a llama.cpp worker at 4 GiB, the reference and engine children,
the chat helper, the transformers child, the converter). Under a lower inherited hard limit,
raising it fails (`ValueError: not allowed to raise maximum limit`), and that failure was
recorded as llama.cpp crashing on load: `run --model llama-spm` under `prlimit --as=3000000000`
exited 1 with "1 oracle crashes" (issue 47). Now each cap is the lower of the wanted one and the
inherited one, and a cap that cannot be set at all is a set-up error naming it (exit 2).

The inherited limit is set in each test's subprocess before it starts (`preexec_fn`), as
`prlimit` would.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from harness.environment import lowered
from harness.errors import SetupError
from harness.models import convert
from tests.reference_files import bpe_json, tekken_json

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
INF = resource.RLIM_INFINITY


def inherit(limit: int):
    """A `preexec_fn` giving the child an address-space limit of `limit` bytes, soft and hard."""
    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return set_limit


def under(limit: int, argv: list[str], *, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, preexec_fn=inherit(limit), capture_output=True, text=True, timeout=timeout,
                          cwd=kwargs.pop("cwd", ROOT), **kwargs)


@pytest.mark.parametrize(("wanted", "soft", "hard", "expected"), [
    (4 * GIB, INF, INF, 4 * GIB),               # nothing inherited: the cap as wanted
    (4 * GIB, 3 * GIB, 3 * GIB, 3 * GIB),       # a lower inherited limit stays
    (4 * GIB, 2 * GIB, 3 * GIB, 2 * GIB),       # a lower soft limit too
    (1 * GIB, 3 * GIB, 3 * GIB, 1 * GIB),       # a cap below the inherited one lowers it
])
def test_the_cap_is_the_lower_of_the_wanted_and_the_inherited_limit(wanted, soft, hard, expected):
    assert lowered(wanted, soft, hard, INF) == expected


def test_a_child_keeps_an_inherited_lower_limit():
    code = "from harness.environment import lower_limit; print(lower_limit('AS', 4 << 30))"
    done = under(3_000_000_000, [sys.executable, "-c", code])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3000000000"


def test_run_under_an_inherited_limit_agrees_instead_of_a_false_llama_cpp_crash(require_vocab, tmp_path):
    """Today's main: exit 1, "1 oracle crashes" (the worker's setrlimit raised on load)."""
    require_vocab("llama-spm")
    done = under(3_000_000_000, [sys.executable, "-m", "harness", "run", "--model", "llama-spm",
                                 "--no-default-corpora", "--corpus", "harness/data/corpora/edge.jsonl",
                                 "--long-docs", "0",
                                 "--calls", "0", "--no-messages", "--quiet", "--report", str(tmp_path / "r")])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 oracle crashes" in done.stdout and "all match" in done.stdout


def test_a_limit_that_cannot_be_set_is_a_setup_error_naming_it(require_vocab):
    """A cap the kernel refuses is ours to fix, never llama.cpp's crash on load (here setrlimit is made
    to fail as it did under a lower hard limit)."""
    code = ("import resource, sys\n"
            "def refuse(*args):\n    raise ValueError('not allowed to raise maximum limit')\n"
            "resource.setrlimit = refuse\n"
            "from harness.oracle.worker_child import main\n"
            "sys.exit(main(['--serve', sys.argv[1], '--memory-limit', str(4 << 30)]))")
    done = subprocess.run([sys.executable, "-c", code, str(require_vocab("llama-spm"))], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    message = json.loads(done.stdout.splitlines()[0])
    assert "RLIMIT_AS" in message["setup_error"] and "not allowed to raise" in message["setup_error"], message


def test_an_engine_or_reference_child_keeps_an_inherited_limit():
    done = under(3_000_000_000, [sys.executable, "-m", "harness.children.python_child", "--check",
                                 "--engine", "tokenizer:Tokenizer.from_gguf", "--memory-limit", str(4 * GIB)])
    assert done.returncode == 0, done.stderr


def test_the_tekken_reference_child_keeps_an_inherited_limit(tmp_path):
    pytest.importorskip("mistral_common", reason="could not import 'mistral_common'")
    tekken = tekken_json(tmp_path / "tekken.json")
    done = under(3_000_000_000, [sys.executable, "-m", "harness.references.tekken", str(tekken), str(4 * GIB)])
    assert done.returncode == 0, done.stderr
    assert "<s>" in json.loads(done.stdout)


def test_the_converter_driver_keeps_an_inherited_limit(tmp_path):
    """`convert` under a 6 GB limit failed outright (the driver asked 8 GiB: a traceback, no result)."""
    llama_cpp = tmp_path / "llama.cpp"
    (llama_cpp / "conversion").mkdir(parents=True)
    (llama_cpp / "conversion" / "__init__.py").write_text("")
    (llama_cpp / "conversion" / "base.py").write_text("class TextModel:\n    def get_vocab_base_pre(self, t):\n"
                                                       "        return 'default'\n")
    (llama_cpp / "convert_hf_to_gguf.py").write_text("def main():\n    pass\n")
    out = tmp_path / "result.json"
    env = {"GGUF_PARITY_CHILD_MEMORY": str(8 * GIB), "PATH": "/usr/bin:/bin"}
    done = under(6_000_000_000, [sys.executable, str(convert.DRIVER), "convert", str(llama_cpp), str(out)],
                 env=env, cwd=tmp_path)
    assert done.returncode == 0 and out.is_file(), done.stderr
    result = json.loads(out.read_text())
    assert result["memory_limit"] == 6_000_000_000 and result["error"] is None, result


def test_the_chat_helper_keeps_an_inherited_limit():
    from harness.chat import helper_build
    try:
        built = helper_build.helper_path().is_file()
    except SetupError:
        built = False
    if not built:
        pytest.skip("chat helper not built: python -m harness chat --build-helper")
    code = ("from harness.chat.oracle import ChatOracle, request\n"
            "with ChatOracle(memory=1 << 30) as o:\n"
            "    a = o.ask(request(template='{{ \"ok\" }}', messages=[{'role': 'user', 'content': 'hi'}],"
            " add_generation_prompt=True))\n"
            "print(a.status, a.text)")
    done = under(900_000_000, [sys.executable, "-c", code])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "b'ok'"], done.stdout


def test_the_transformers_child_keeps_an_inherited_limit(tmp_path):
    pytest.importorskip("transformers", reason="could not import 'transformers'")
    folder = tmp_path / "original"
    bpe_json(folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": "{{ messages[0]['content'] }}", "tokenizer_class": "PreTrainedTokenizerFast"}))
    code = ("import sys; from pathlib import Path; from harness.chat.transformers_side import OriginalChat\n"
            "with OriginalChat(Path(sys.argv[1])) as o:\n"
            "    a = o.ask({'messages': [{'role': 'user', 'content': 'hi'}], 'add_generation_prompt': True})\n"
            "print(a.status, a.text)")
    done = under(int(1.5 * GIB), [sys.executable, "-c", code, str(folder)])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "b'hi'"], done.stdout



@pytest.mark.parametrize(("error", "message"), [
    ({"type": "LimitError", "message": "cannot set the memory limit RLIMIT_AS to 1 bytes"},
     "the converter: cannot set the memory limit RLIMIT_AS"),
    ({"type": "MemoryError", "message": ""},
     "over its limit of 6,000,000,000 bytes (twice --memory-limit, lowered by an inherited limit)"),
])
def test_the_converters_limit_is_a_setup_error_naming_the_cap_in_force(tmp_path, monkeypatch, error, message):
    """The driver's answer (its result JSON) under an inherited limit, as the harness reports it."""
    result = {"mode": "convert", "decisions": [], "error": error, "memory_limit": 6_000_000_000}
    fake = tmp_path / "python"  # stands in for the converter venv's interpreter: writes the result file
    fake.write_text(f"#!/bin/sh\ncat > \"$4\" <<'END'\n{json.dumps(result)}\nEND\n")
    fake.chmod(0o755)
    monkeypatch.setattr(convert, "ensure_venv", lambda **kw: fake)
    monkeypatch.setattr(convert, "sources_dir", lambda: tmp_path)
    monkeypatch.setattr(convert, "converter_memory", lambda: 8 * GIB)
    with pytest.raises(SetupError, match=re.escape(message)):
        convert.run_driver("convert", [])
