"""`--engine node-llama-cpp@VERSION`: the llama.cpp that node-llama-cpp ships prebuilt, without compiling.

node-llama-cpp (npm) carries its own llama.cpp binaries, so another llama.cpp build is one npm
install away. The pinned VERSION is installed once from the npm registry into the cache,

    ~/.cache/gguf-parity/venvs/node-llama-cpp-VERSION/   (`GGUF_PARITY_VENVS` moves it)

with npm's postinstall scripts off (`--ignore-scripts`: nothing is compiled or downloaded after
the install) and the optional GPU packages left out (`--omit=optional`, plus the one prebuilt
package of this platform): about 83 MB instead of 732 MB. Two runs take turns (`locked`); the
install goes into a private folder beside the entry and is renamed into place only once Node has
loaded the binary and said which llama.cpp it carries (`BUILD`, written last), so a killed install
leaves nothing that looks ready.

Each vocabulary is served by `harness/children/node_llama_child.mjs` through the engine protocol
(docs/engine-protocol.md), as any `cmd:` engine: a crash or hang costs one case. A missing Node or
npm, or a failed install, is a `SetupError` (exit 2) in one line.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..contained import probe
from ..environment import venvs_dir
from ..errors import SetupError
from ..files.atomic import locked
from ..files.input_limits import read_side_json

PREFIX = "node-llama-cpp@"
PACKAGE = "node-llama-cpp"
CHILD = Path(__file__).resolve().parents[1] / "children" / "node_llama_child.mjs"
BUILD = "gguf-parity-build.json"  # written last: an entry without it is half-installed and is made again
MIN_NODE = 20  # node-llama-cpp 3.x's `engines`
NPM_TIMEOUT = 600.0  # seconds for `npm install` (measured: 9 s with npm's cache warm)
DESCRIBE_TIMEOUT = 120.0  # Node loading the prebuilt binary once, to say what it is
# (platform.system(), platform.machine()) -> node-llama-cpp's prebuilt CPU package for it
PLATFORMS = {("Linux", "x86_64"): "linux-x64", ("Linux", "aarch64"): "linux-arm64",
             ("Darwin", "arm64"): "mac-arm64-metal", ("Darwin", "x86_64"): "mac-x64"}
_VERSION = re.compile(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?")

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def is_spec(spec: str | None) -> bool:
    return bool(spec) and spec.startswith(PREFIX)  # type: ignore[union-attr]


def version_of(spec: str) -> str:
    """`3.21.1` for `node-llama-cpp@3.21.1`; `SetupError` for anything but an exact version."""
    version = spec[len(PREFIX):]
    if not _VERSION.fullmatch(version):
        raise SetupError(f"--engine {spec!r}: expected node-llama-cpp@X.Y.Z, an exact npm version "
                         "(e.g. node-llama-cpp@3.21.1)")
    return version


def package_dir(version: str) -> Path:
    return venvs_dir() / f"{PACKAGE}-{version}"


def platform_package() -> str:
    """`@node-llama-cpp/<platform>`, the prebuilt CPU binary for this machine; `SetupError` elsewhere."""
    key = (platform.system(), platform.machine())
    if key not in PLATFORMS:
        raise SetupError(f"node-llama-cpp has no prebuilt CPU binary for {key[0]} {key[1]} that the harness "
                         f"knows (known: {', '.join(' '.join(k) for k in PLATFORMS)})")
    return f"@node-llama-cpp/{PLATFORMS[key]}"


def node_program() -> str:
    """The `node` on PATH, checked to be Node.js 20 or later; `SetupError` naming what is missing."""
    found = shutil.which("node")
    if found is None:
        raise SetupError(f"--engine {PREFIX}VERSION needs Node.js {MIN_NODE} or later: no `node` on PATH")
    try:
        done = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SetupError(f"{found} --version failed: {exc}") from None
    match = re.match(r"v(\d+)\.", done.stdout.strip())
    if done.returncode != 0 or match is None or int(match.group(1)) < MIN_NODE:
        raise SetupError(f"--engine {PREFIX}VERSION needs Node.js {MIN_NODE} or later: {found} is "
                         f"{done.stdout.strip()[:40] or 'unknown (exit ' + str(done.returncode) + ')'}")
    return found


def npm_program() -> str:
    found = shutil.which("npm")
    if found is None:
        raise SetupError(f"installing {PACKAGE} needs npm: no `npm` on PATH (it comes with Node.js)")
    return found


def is_ready(version: str) -> bool:
    try:
        return build(version)["version"] == version
    except (SetupError, KeyError, TypeError):
        return False


def build(version: str) -> dict[str, Any]:
    """What the installed entry records about itself: the package, its platform binary and the
    llama.cpp build it carries (`{"repo": ..., "release": ...}`); `SetupError` when not installed."""
    where = package_dir(version)
    if not (where / "node_modules" / PACKAGE / "package.json").is_file():
        raise SetupError(f"{PACKAGE} {version} is not installed in {where}")
    try:
        record = read_side_json(where / BUILD, f"the {PACKAGE} install record")
    except (OSError, ValueError) as exc:
        raise SetupError(f"{where / BUILD}: {exc}") from None
    if not isinstance(record, dict):
        raise SetupError(f"{where / BUILD}: not a JSON object")
    return record


def describe(record: dict[str, Any]) -> str:
    """One line: `node-llama-cpp 3.21.1 (@node-llama-cpp/linux-x64), llama.cpp v0.4.0 (ggml-org/llama.cpp)`."""
    carried = record.get("llama_cpp") or {}
    return (f"{PACKAGE} {record.get('version')} ({record.get('platform_package')}), "
            f"llama.cpp {carried.get('release')} ({carried.get('repo')})")


def ensure(version: str, log: Log = _stderr) -> Path:
    """The installed package folder of `version`, installed on first use. Node is checked every time
    (the child needs it); npm only when installing."""
    node = node_program()
    if is_ready(version):
        return package_dir(version)
    where = package_dir(version)
    with locked(where.with_name(where.name + ".lock")):
        if not is_ready(version):
            _install(version, where, node, log)
    return where


def _install(version: str, where: Path, node: str, log: Log) -> None:
    npm, binary = npm_program(), platform_package()
    where.parent.mkdir(parents=True, exist_ok=True)
    for stale in where.parent.glob(f".{where.name}.*.tmp"):  # left by a killed install (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    log(f"installing {PACKAGE}@{version} and {binary} once from the npm registry into {where} ...")
    folder = Path(tempfile.mkdtemp(dir=where.parent, prefix=f".{where.name}.", suffix=".tmp"))
    try:
        (folder / "package.json").write_text('{"private": true}\n', encoding="utf-8")
        _run([npm, "install", "--prefix", str(folder), "--save-exact", "--ignore-scripts", "--no-audit",
              "--no-fund", "--omit=optional", "--no-update-notifier", "--loglevel=error",
              f"{PACKAGE}@{version}", f"{binary}@{version}"], NPM_TIMEOUT, f"npm install {PACKAGE}@{version}")
        record = _describe(node, folder, version)
        (folder / BUILD).write_text(_json({"version": version, "platform_package": binary, **record}),
                                    encoding="utf-8")
        folder.chmod(0o755)  # mkdtemp made it private
        if where.exists():
            shutil.rmtree(where)
        os.rename(folder, where)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    log(f"{PACKAGE}@{version}: {describe(build(version))}")


def _describe(node: str, folder: Path, version: str) -> dict[str, Any]:
    """The child's own account of the install (it loads the prebuilt binary): `SetupError` if it cannot."""
    out = folder / "describe.json"
    _run([node, str(CHILD), str(folder), "--describe", str(out)], DESCRIBE_TIMEOUT,
         f"loading {PACKAGE}@{version}'s prebuilt llama.cpp")
    try:
        record = read_side_json(out, "the child's description")
    except (OSError, ValueError) as exc:
        raise SetupError(f"{PACKAGE}@{version} installed, but it did not describe itself: {exc}") from None
    carried = record.get("llama_cpp") if isinstance(record, dict) else None
    if not isinstance(carried, dict) or not isinstance(carried.get("release"), str) \
            or record.get("node_llama_cpp") != version:
        raise SetupError(f"{PACKAGE}@{version} installed, but describes itself as {str(record)[:200]}")
    out.unlink()
    return record


def _run(argv: list[str], timeout: float, what: str) -> None:
    with tempfile.TemporaryFile() as stderr:
        code = probe(argv, timeout=timeout, stderr=stderr)
        stderr.seek(0, os.SEEK_END)
        stderr.seek(max(0, stderr.tell() - 4000))
        tail = [line for line in stderr.read().decode("utf-8", "replace").splitlines() if line.strip()][-3:]
    if code is None:
        raise SetupError(f"{what} took over {timeout:g} s (stopped)")
    if code != 0:
        raise SetupError(f"{what} failed (exit {code}): " + " | ".join(tail))


def _json(value: object) -> str:
    import json
    return json.dumps(value, indent=1) + "\n"


def child_argv(where: Path, node: str | None = None) -> list[str]:
    """The protocol child serving the package installed in `where`."""
    return [node or node_program(), str(CHILD), str(where)]

