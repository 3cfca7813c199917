"""Download the pinned llama-cpp-python sdist and extract llama.cpp's test vocabularies.

Extracts vendor/llama.cpp/models/ggml-vocab-*.gguf with their .inp/.out vectors,
and models/templates/*.jinja, into the cache folder ($GGUF_PARITY_CACHE or
~/.cache/gguf-parity/<version>/), and checks each file against the sha256
manifest committed in harness/data/manifest.sha256.
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


def run(args: argparse.Namespace) -> int:
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
