"""harness.chat.helper_build: the chat helper's cache key is the llama.cpp build, not the venv it is installed in.

Before, the key hashed the venv's path to libllama (the binary's rpath named it), so every clone with its
own venv compiled the helper again (about 40 s of a Quickstart) though its llama-cpp-python was the same
cached wheel. Here two "venvs" are two folders holding the same library bytes: the second finds the first
one's helper and compiles nothing, even once the first is deleted; other bytes are another build. The
compiler is a stand-in `g++` that logs each call (as in tests/chat/test_helper_build.py), so this takes
seconds; the real helper's own libraries are checked when the cache holds it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.chat import helper_build as hb

FAKE_GXX = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "g++ (stand-in) 1.0"; exit 0; fi
echo "$*" >> "$GXX_LOG"
out=""
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; fi; shift; done
printf 'built' > "$out"
"""


def venv_lib(root: Path, *, flavour: bytes = b"") -> Path:
    """A venv's llama_cpp/lib: stand-in libraries, the same bytes in every venv unless `flavour`."""
    lib = root / "lib" / "python3.11" / "site-packages" / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    for name in hb.LIBRARIES:
        (lib / name).write_bytes(b"ELF stand-in " + name.encode() + flavour)
    return lib


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """An empty cache, a logging stand-in g++ first on PATH, no sources to extract; returns the log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "g++").write_text(FAKE_GXX)
    (bin_dir / "g++").chmod(0o755)
    log = tmp_path / "gxx.log"
    log.write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("GXX_LOG", str(log))
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(hb, "extract_sources", lambda sdist, target: target.mkdir(parents=True, exist_ok=True))
    return log


def test_the_key_is_the_build_not_the_venv_path(tmp_path, stand_in, monkeypatch):
    first, second = venv_lib(tmp_path / "clone-a" / ".nox" / "parity"), venv_lib(tmp_path / "clone-b" / ".venv")
    other = venv_lib(tmp_path / "clone-c" / ".venv", flavour=b" built with other flags")
    keys = {}
    for name, lib in (("first", first), ("second", second), ("other", other)):
        monkeypatch.setenv("GGUF_PARITY_LLAMA_LIB", str(lib))
        keys[name] = hb.build_key()
    assert keys["first"] == keys["second"]
    assert keys["other"] != keys["first"]


def test_a_second_venv_reuses_the_helper_without_compiling(tmp_path, stand_in, monkeypatch):
    first = venv_lib(tmp_path / "clone-a" / ".nox" / "parity")
    monkeypatch.setenv("GGUF_PARITY_LLAMA_LIB", str(first))
    built = hb.build(sdist=tmp_path / "sdist.tar.gz", jobs=2, log=lambda line: None)
    calls = stand_in.read_text().splitlines()
    assert len(calls) == len(hb.SOURCES) + 2  # every source, main.cpp, the link
    link = calls[-1]
    assert "-Wl,-rpath,$ORIGIN/lib" in link and str(first) not in link  # the binary names no venv
    assert sorted(p.name for p in (built.parent / "lib").iterdir()) == sorted(hb.LIBRARIES)

    shutil.rmtree(tmp_path / "clone-a")  # the first clone and its venv are gone
    second = venv_lib(tmp_path / "clone-b" / ".venv")
    monkeypatch.setenv("GGUF_PARITY_LLAMA_LIB", str(second))
    assert hb.helper_path() == built and built.is_file()
    assert hb.build(sdist=tmp_path / "sdist.tar.gz", jobs=2, log=lambda line: None) == built
    assert stand_in.read_text().splitlines() == calls  # nothing compiled, nothing linked
    assert all((built.parent / "lib" / name).read_bytes() == (second / name).read_bytes() for name in hb.LIBRARIES)


@pytest.mark.oracle
def test_the_cached_helper_runs_on_its_own_copy_of_the_build():
    """The real helper, when the cache holds it for this venv's build: its libraries are its own copies."""
    binary = hb.helper_path()
    if not binary.is_file():
        pytest.skip("no chat helper built for this llama.cpp build (python -m harness chat --build-helper)")
    lib = hb.llama_lib_dir()
    for name in hb.LIBRARIES:
        assert (binary.parent / "lib" / name).read_bytes() == (lib / name).read_bytes()
    ldd = shutil.which("ldd")
    if ldd:
        out = subprocess.run([ldd, str(binary)], capture_output=True, text=True, check=True).stdout
        assert f"libllama.so.0 => {binary.parent / 'lib' / 'libllama.so.0'}" in out, out
