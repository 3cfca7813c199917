"""Build the chat helper: llama.cpp's own chat formatting as a small executable, once.

The helper (`harness/chat/helper/main.cpp`, ours) links llama.cpp's `common/` chat code
(`chat.cpp`, the Jinja engine `common/jinja/`, the specialized parsers, the
autoparser) compiled from the pinned llama-cpp-python sdist, against the `libllama`
of the installed llama-cpp-python wheel. llama.cpp's sources are never committed:
they are extracted from the sdist at build time into a temporary folder and every file
is checked against `harness/data/chat_sources.sha256`.

The binary is cached as `<cache>/chat-helper/<key>/gguf-parity-chat`, where the key is
the build, never where it is installed: our main.cpp, the source manifest, the compiler
flags and version, and the bytes of the llama.cpp libraries it runs on (`LIBRARIES`, the
pinned version as compiled from the sdist with the wheel's flags). Those libraries are
copied beside the binary (`<key>/lib/`, found through an `$ORIGIN` rpath), so every venv
and every clone whose llama-cpp-python is the same build (the cached wheel) reuses one
helper, and deleting the venv that built it breaks nothing; before, the key hashed the
venv's path to libllama and each clone compiled its own (about 40 s). Changing any of
those builds a new helper, nothing else does. llama.cpp's objects are kept in
`<cache>/chat-helper/objects-<key>/` (keyed without main.cpp), so a change to main.cpp
recompiles only main.cpp (a few seconds). No network is used except pip's download of
the sdist when pip's cache does not hold it.

Two runs may build at once (two nox sessions, two `chat` runs on an empty cache): the build
of one key holds that entry's lock (`harness.files.atomic.locked`), so the second waits and
then finds the binary; every object and the binary are written by the compiler into a private
folder and renamed into place (`harness.files.atomic.building`), so no two compilers ever
share a file name, and a build killed half-way leaves no half-written object behind.

What it costs: 195 CPU-seconds in all (g++ 12), so about 1.6 minutes on an idle 2-core
machine with one job per CPU (the default), plus pip's download of the sdist. The 35
sources in `SOURCES` are every one the helper needs: linked as an archive, each is pulled
in by a symbol that chat.cpp, common.cpp or main.cpp uses, and leaving any one out fails
the link. `-O1` stays: `-O0` compiled in 24% less CPU time but rendered the chat goldens
2.3x slower, more than the saving on a single replay; a precompiled nlohmann/json.hpp
saved nothing measurable (the 83 MB .gch costs about what parsing the header does).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from ..environment_vars import LLAMA_LIB
from ..errors import SetupError
from ..files.atomic import building, locked, write_text_atomic
from ..models.fetch import download_sdist, extract, read_manifest, sha256_file
from ..models.shipped import LLAMA_CPP_PYTHON_VERSION, cache_dir

MAIN = Path(__file__).parent / "helper" / "main.cpp"
MANIFEST = Path(__file__).parents[1] / "data" / "chat_sources.sha256"
BINARY = "gguf-parity-chat"
_ROOT = "vendor/llama.cpp/"
# The folders of llama.cpp we need: common (sources + headers), the public headers, nlohmann.
_DIRS = ("common/", "include/", "ggml/include/", "vendor/nlohmann/")
_PARSERS = ("parsers", "cohere2moe", "deepseek", "functionary-v3-2", "gemma4", "gigachat-v3", "gpt-oss",
            "kimi-k2", "kimi-k3", "ling3", "lfm2", "minicpm5", "minimax-m3", "ministral3",
            "muse-glimmer", "qwen3-coder")
SOURCES = (
    *(f"common/jinja/{n}.cpp" for n in ("lexer", "parser", "runtime", "value", "string", "caps")),
    *(f"common/{n}.cpp" for n in ("chat", "chat-auto-parser-generator", "chat-auto-parser-helpers",
                                  "chat-diff-analyzer", "chat-peg-parser", "peg-parser", "json",
                                  "json-schema-to-grammar", "json-schema", "log", "unicode", "common",
                                  "trie")),
    *(f"common/parsers/{n}.cpp" for n in _PARSERS),
)
FLAGS = ("-std=c++17", "-O1", "-DNDEBUG", "-ffunction-sections", "-fdata-sections")
# The installed llama.cpp build the helper runs on, by soname: linked (the first three) or loaded by them.
LIBRARIES = ("libllama.so.0", "libggml.so.0", "libggml-base.so.0", "libggml-cpu.so.0")
LINKED = LIBRARIES[:3]
_INCLUDES = ("common", "include", "ggml/include", "vendor")


def _wanted(member: str) -> str | None:
    rel = PurePosixPath(*PurePosixPath(member).parts[1:]).as_posix()
    if not rel.startswith(_ROOT):
        return None
    rel = rel[len(_ROOT):]
    return rel if rel.startswith(_DIRS) else None


def llama_lib_dir() -> Path:
    """The installed llama-cpp-python's lib folder (libllama.so), without importing it.

    `$GGUF_PARITY_LLAMA_LIB` overrides it (a folder holding the same version's libllama).
    """
    named = LLAMA_LIB.get()
    if named:
        return named
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise SetupError("llama-cpp-python is not installed: the chat helper links its libllama")
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    if not any(lib.glob("libllama.*")):
        raise SetupError(f"no libllama in {lib}")
    return lib


def _compiler_version() -> str:
    try:
        return subprocess.run(["g++", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SetupError(f"the chat helper needs g++: {exc}") from exc


def _key(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def objects_key() -> str:
    """llama.cpp's objects depend on its sources, the flags and the compiler, not on our main.cpp."""
    return _key(MANIFEST.read_bytes(), " ".join(FLAGS).encode(), _compiler_version().encode(),
                LLAMA_CPP_PYTHON_VERSION.encode())


def build_key() -> str:
    """Our main.cpp, llama.cpp's objects and the llama.cpp build it runs on (`build_identity`)."""
    return _key(MAIN.read_bytes(), objects_key().encode(), build_identity(llama_lib_dir()).encode())


def build_identity(lib: Path) -> str:
    """The llama.cpp build in `lib`: the sha256 of each of its `LIBRARIES` (their names and bytes), not its path.

    The same wheel installed in two venvs gives the same identity; a rebuild with other flags or
    another version gives another. About 6 MB read: 41 ms measured on a loaded 2-core machine.
    """
    h = hashlib.sha256()
    for path in libraries(lib):
        h.update(path.name.encode() + b"\0" + sha256_file(path).encode() + b"\n")
    return h.hexdigest()


def libraries(lib: Path) -> list[Path]:
    """The `LIBRARIES` present in `lib` (a missing one fails the link, naming it)."""
    return [lib / name for name in LIBRARIES if (lib / name).is_file()]


def helper_path() -> Path:
    return cache_dir() / "chat-helper" / build_key() / BINARY


def objects_dir() -> Path:
    return cache_dir() / "chat-helper" / f"objects-{objects_key()}"


def extract_sources(sdist: Path, target: Path) -> None:
    """Extract llama.cpp's chat sources and check them against the manifest."""
    extract(sdist, target, select=_wanted)
    manifest = read_manifest(MANIFEST)
    bad = [name for name, digest in sorted(manifest.items())
           if not (target / name).is_file() or sha256_file(target / name) != digest]
    if bad:
        raise SetupError(f"{len(bad)} llama.cpp source file(s) failed {MANIFEST.name}: {', '.join(bad[:5])}")


def _compile(src_root: Path, obj_dir: Path, source: str) -> Path:
    obj = obj_dir / (source.replace("/", "_") + ".o")
    if obj.is_file():
        return obj
    with building(obj, "the chat helper's object") as part:
        cmd = ["g++", *FLAGS, *(f"-I{src_root / i}" for i in _INCLUDES), "-c", str(src_root / source),
               "-o", str(part)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode:
            raise SetupError(f"compiling {source} failed:\n{result.stderr[-4000:]}")
    return obj


def build(*, sdist: Path | None = None, jobs: int | None = None, log: Callable[[str], None] = print) -> Path:
    """The helper's path, building it first when the cache has none for this key.

    `jobs` compiles run at once (default: one per CPU). The entry's lock is held while building:
    a second build of the same key waits, then returns the first one's binary.
    """
    binary = helper_path()
    if binary.is_file():
        return binary
    with locked(binary.parent / ".build.lock"):
        if binary.is_file():
            return binary
        return _build(binary, sdist, jobs, log)


def _build(binary: Path, sdist: Path | None, jobs: int | None, log: Callable[[str], None]) -> Path:
    lib = llama_lib_dir()
    obj_dir = objects_dir()
    obj_dir.mkdir(parents=True, exist_ok=True)
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        if sdist is None:
            log(f"downloading llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} sdist with pip ...")
            sdist = download_sdist(Path(tmp))
        src_root = Path(tmp) / "llama.cpp"
        extract_sources(sdist, src_root)
        shutil.copy(MAIN, src_root / "gguf_parity_chat.cpp")
        jobs = max(1, jobs or os.cpu_count() or 1)
        log(f"compiling {len(SOURCES)} llama.cpp chat sources and main.cpp ({jobs} job(s)); once ...")
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            objs = list(pool.map(lambda s: _compile(src_root, obj_dir, s), SOURCES))
        objs.append(_compile(src_root, binary.parent, "gguf_parity_chat.cpp"))
        own = copy_libraries(lib, binary.parent / "lib")
        with building(binary, "the chat helper") as part:
            cmd = ["g++", *(str(o) for o in objs), *(str(p) for p in own if p.name in LINKED),
                   "-Wl,-rpath,$ORIGIN/lib", "-Wl,--gc-sections", "-pthread", "-o", str(part)]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode:
                raise SetupError(f"linking the chat helper failed:\n{result.stderr[-4000:]}")
    log(f"chat helper: {binary} (llama.cpp's objects kept in {obj_dir} for the next main.cpp change)")
    return binary


def copy_libraries(lib: Path, into: Path) -> list[Path]:
    """The build's `LIBRARIES` copied from `lib` into `into` (the helper's own `lib/`), each written whole."""
    into.mkdir(parents=True, exist_ok=True)
    copies = []
    for path in libraries(lib):
        copy = into / path.name
        if not copy.is_file():
            with building(copy, f"the chat helper's {path.name}") as part:
                shutil.copyfile(path, part)
        copies.append(copy)
    return copies


def write_manifest(sdist: Path, path: Path = MANIFEST) -> int:
    """Maintainers only, when bumping the pin: record the sha256 of every extracted source."""
    with tempfile.TemporaryDirectory() as tmp:
        names = extract(sdist, Path(tmp), select=_wanted)
        lines = [f"{sha256_file(Path(tmp) / n)}  {n}" for n in sorted(names)]
    write_text_atomic(path, "\n".join(lines) + "\n")
    return len(lines)


if __name__ == "__main__":  # pragma: no cover - maintainer tool
    print(build(sdist=Path(sys.argv[1]) if len(sys.argv) > 1 else None))
