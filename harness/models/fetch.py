"""Fetch llama.cpp's shipped test vocabularies from the pinned llama-cpp-python sdist.

pip downloads the source distribution (pip's own cache is used); the
vocabularies, their `.inp`/`.out` vectors and the chat templates are extracted
into `harness.models.shipped.cache_dir()` and every file is checked against the sha256
manifest committed in `harness/data/manifest.sha256`.

Two runs may fetch into the same empty cache at once (the Quickstart and every nox session
run `fetch`): the cache folder is locked for the whole fetch (`harness.files.atomic.locked`),
so the second waits and then finds the cache verified, and each file is extracted under a
random name and renamed into place (`harness.files.atomic.replacing`). An archive is read
within bounds: a member over `MAX_MEMBER_BYTES`, more than `MAX_MEMBERS` members or more
than `MAX_UNPACKED_BYTES` unpacked is refused, naming the archive.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from ..errors import SetupError
from ..files.atomic import locked, replacing, write_text_atomic
from ..files.input_limits import read_side_text
from .shipped import LLAMA_CPP_PYTHON_VERSION, cache_dir

MANIFEST = Path(__file__).parents[1] / "data" / "manifest.sha256"
SDIST_NAME = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
_MODELS = "vendor/llama.cpp/models/"
_TEMPLATES = "vendor/llama.cpp/models/templates/"
# llama.cpp's tokenizer sources: the reference for behaviour, read by tests that check
# our tables and name lists against them (never compiled, never imported).
SOURCES = ("llama-vocab.cpp", "unicode.cpp", "unicode-data.cpp", "unicode.h")
_SOURCES = "vendor/llama.cpp/src/"
# The pinned sdist: 3,884 members, 216 MB unpacked, its largest vocabulary 15.8 MB.
MAX_MEMBER_BYTES = 64 << 20
MAX_MEMBERS = 100_000
MAX_UNPACKED_BYTES = 2 << 30
LOCK_NAME = ".fetch.lock"


def wanted(member: str) -> str | None:
    """The cache-relative destination of an sdist member we keep, else None."""
    path = PurePosixPath(member)
    rel = PurePosixPath(*path.parts[1:]).as_posix()  # drop "llama_cpp_python-X.Y.Z/"
    if rel.startswith(_SOURCES) and rel[len(_SOURCES):] in SOURCES:
        return f"src/{path.name}"
    if rel.startswith(_TEMPLATES) and path.suffix == ".jinja" and "/" not in rel[len(_TEMPLATES):]:
        return f"templates/{path.name}"
    if rel.startswith(_MODELS) and "/" not in rel[len(_MODELS):]:
        name = path.name
        if name.startswith("ggml-vocab-") and name.endswith((".gguf", ".gguf.inp", ".gguf.out")):
            return f"models/{name}"
    return None


def read_manifest(path: Path = MANIFEST) -> dict[str, str]:
    """A sha256 manifest (`<hex digest>  <name>` per line), read as a bounded side file; `SetupError` naming
    the line when one is not of that form."""
    try:
        text = read_side_text(path, "sha256 manifest")
    except (OSError, ValueError) as exc:
        raise SetupError(f"cannot read the manifest {path}: {exc}") from None
    entries = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            digest, _, name = line.strip().partition("  ")
            if len(digest) != 64 or not name or any(c not in "0123456789abcdef" for c in digest):
                raise SetupError(f"{path}:{number}: not a line '<sha256 hex>  <name>'")
            entries[name] = digest
    return entries


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download_sdist(dest: Path) -> Path:
    """`pip download` the pinned sdist into `dest`; returns the archive's path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
           "-d", str(dest), "--quiet"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    archive = dest / SDIST_NAME
    if not archive.is_file():
        raise SetupError(
            f"pip could not download llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}:\n"
            + (result.stderr.strip() or result.stdout.strip())
        )
    return archive


def extract(archive: Path, target: Path, *, select: Callable[[str], str | None] | None = None,
            progress: Callable[[str], None] = lambda s: None) -> list[str]:
    """Extract the members of `archive` that `select` names (default `wanted`) under `target`.

    `select(member_name)` gives a member's path under `target`, or None to skip it.
    Returns the extracted paths, sorted.
    """
    try:
        return _extract(archive, target, select or wanted, progress)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise SetupError(f"{archive}: not a readable llama-cpp-python sdist (.tar.gz): {exc}") from None


def _extract(archive: Path, target: Path, select: Callable[[str], str | None],
             progress: Callable[[str], None]) -> list[str]:
    names = []
    unpacked = 0
    with tarfile.open(archive, "r:gz") as tar:
        for count, member in enumerate(tar, 1):
            unpacked += member.size
            _check_bounds(archive, member, count, unpacked)
            dest = select(member.name)
            if dest is None or not member.isfile():
                continue
            src = tar.extractfile(member)
            if src is None:  # not a regular file after all (isfile() said it was)
                continue
            with replacing(target / dest, f"{archive}: extracted file") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            names.append(dest)
            progress(dest)
    return sorted(names)


def _check_bounds(archive: Path, member: tarfile.TarInfo, count: int, unpacked: int) -> None:
    if member.size > MAX_MEMBER_BYTES:
        raise SetupError(f"{archive}: member {member.name} is {member.size:,} bytes, "
                         f"over the limit of {MAX_MEMBER_BYTES:,}")
    if count > MAX_MEMBERS or unpacked > MAX_UNPACKED_BYTES:
        raise SetupError(f"{archive}: over {MAX_MEMBERS:,} members or {MAX_UNPACKED_BYTES:,} bytes unpacked, "
                         "not a llama-cpp-python sdist")


def verify(target: Path, manifest: dict[str, str]) -> list[str]:
    """Problems found checking `target` against `manifest` (empty when all is well)."""
    problems = []
    for name, digest in sorted(manifest.items()):
        path = target / name
        if not path.is_file():
            problems.append(f"missing: {name}")
        elif sha256_file(path) != digest:
            problems.append(f"sha256 mismatch: {name}")
    return problems


def is_fetched(target: Path | None = None) -> bool:
    target = target or cache_dir()
    return (target / ".complete").is_file()


def fetch(*, target: Path | None = None, sdist: Path | None = None, force: bool = False,
          log: Callable[[str], None] = print) -> Path:
    """Make sure the cache holds every manifest file, verified. Returns the cache folder.

    Holds the cache folder's lock throughout: a second fetch into the same cache waits, then
    finds it verified.
    """
    target = target or cache_dir()
    manifest = read_manifest()
    with locked(target / LOCK_NAME):
        if is_fetched(target) and not force and not verify(target, manifest):
            log(f"already fetched and verified: {target} ({len(manifest)} files)")
            return target
        _fetch(target, manifest, sdist, log)
    return target


def _fetch(target: Path, manifest: dict[str, str], sdist: Path | None, log: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if sdist is None:
            log(f"downloading llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} sdist with pip ...")
            sdist = download_sdist(Path(tmp))
        log(f"extracting vocabularies and templates into {target} ...")
        extract(sdist, target)
    problems = verify(target, manifest)
    if problems:
        raise SetupError(f"{len(problems)} file(s) failed the manifest check in {target}: "
                         + "; ".join(problems[:5]) + ("; ..." if len(problems) > 5 else ""))
    write_text_atomic(target / ".complete", f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}\n")
    log(f"ok: {len(manifest)} files verified against {MANIFEST.name}")


def write_manifest(target: Path, path: Path = MANIFEST) -> int:
    """Maintainers only, when bumping the pin: record the sha256 of every extracted file."""
    names = sorted(p.relative_to(target).as_posix() for p in target.rglob("*")
                   if p.is_file() and _from_cache_path(p.relative_to(target).as_posix()))
    write_text_atomic(path, "".join(f"{sha256_file(target / n)}  {n}\n" for n in names))
    return len(names)


def _from_cache_path(rel: str) -> str | None:
    """`wanted` run backwards: is this cache-relative file one that `extract` writes?"""
    member = {"templates": "models/templates", "models": "models", "src": "src"}.get(rel.split("/")[0])
    if member is None:
        return None
    return wanted(f"x/vendor/llama.cpp/{member}/{rel.split('/', 1)[1]}")
