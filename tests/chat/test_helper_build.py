"""harness.chat.helper_build: two builds of the chat helper at once into one empty cache both succeed, and the
compile and link run once.

The compiler here is a stand-in `g++` on PATH that writes its `-o` file slowly (and logs each call), and
llama.cpp's sources a stand-in folder, so the locking and the part names are tested in seconds, not the
helper's 1.6-minute compile (a real build runs in the chat tests when the cache has none).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_GXX = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "g++ (stand-in) 1.0"; exit 0; fi
echo "$$ $*" >> "$GXX_LOG"
out=""
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; fi; shift; done
printf 'part one ' > "$out"
sleep 0.05
printf 'part two' >> "$out"
"""

CHILD = """
import sys
from pathlib import Path
from harness.chat import helper_build as hb
hb.llama_lib_dir = lambda: Path(sys.argv[1])
hb.extract_sources = lambda sdist, target: target.mkdir(parents=True, exist_ok=True)
print(hb.build(sdist=Path(sys.argv[2]), jobs=4, log=lambda line: None))
"""


def test_two_builds_at_once_both_succeed_and_build_once(tmp_path):
    """issue 47: two chat-helper builds at once: one exited 2 (`....part: No such file or directory`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "g++").write_text(FAKE_GXX)
    (bin_dir / "g++").chmod(0o755)
    log = tmp_path / "gxx.log"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GXX_LOG": str(log),
           "GGUF_PARITY_CACHE": str(tmp_path / "cache")}
    runs = [subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(tmp_path / "sdist.tar.gz")],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    done = [(run.wait(timeout=120), *run.communicate()) for run in runs]
    assert [code for code, *_ in done] == [0, 0], done
    binary = Path(done[0][1].strip())
    assert done[0][1] == done[1][1] and binary.read_text() == "part one part two"
    calls = log.read_text().splitlines()
    from harness.chat.helper_build import SOURCES
    assert len(calls) == len(SOURCES) + 2, calls  # every source, main.cpp and the link: once each
    leftovers = [p for p in (tmp_path / "cache").rglob("*") if p.name.endswith((".part", ".tmp"))]
    assert leftovers == []


REAL_CHILD = """
import sys
from harness.chat import helper_build
print(helper_build.build(jobs=1, log=lambda line: print(line, file=sys.stderr)))
"""


@pytest.mark.nightly
def test_two_real_builds_at_once_into_an_empty_cache(tmp_path):
    """The real thing: pip's sdist, g++, llama.cpp's 35 sources; one builds (about 3 CPU-minutes), one waits."""
    env = {**os.environ, "GGUF_PARITY_CACHE": str(tmp_path / "cache")}
    runs = [subprocess.Popen([sys.executable, "-c", REAL_CHILD], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    done = [(run.wait(timeout=1800), *run.communicate()) for run in runs]
    assert [code for code, *_ in done] == [0, 0], done
    assert done[0][1] == done[1][1] and Path(done[0][1].strip()).is_file()
    assert sum("compiling" in err for _, _, err in done) == 1  # the second found the first one's binary
