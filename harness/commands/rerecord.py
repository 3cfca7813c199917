"""Record every golden again from its own cases with the installed llama.cpp; or rewrite the sdist manifests.

    python -m harness rerecord --golden golden --out golden --jobs 2     # every golden, in place
    python -m harness rerecord --manifests                               # maintainers bumping the pin

`drift` re-records each golden in memory and prints what changed; `rerecord` writes it: each
golden of --golden recorded again from its own case inputs (a long document rebuilt from its
builder), with the installed llama.cpp, into --out under the same name, so that a diff of the two
shows only llama.cpp's changed answers. A golden whose GGUF is no longer the recorded file (the new
sdist ships another) is recorded from the file of that name, and said so; one that cannot be
recorded is skipped with a one-line reason (exit 2 at the end).

--manifests rewrites the three manifests of the pinned llama-cpp-python sdist (harness/data/
manifest.sha256: the vocabularies, templates and tokenizer sources; chat_sources.sha256: the chat
helper's sources; converter_sources.sha256: the converter) from the sdist of the version in
harness/data/pin.txt, and extracts the vocabularies into its cache. `bump-pin` runs both in its
work tree, under the new build (docs/golden.md, "Bumping the pin").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ..errors import SetupError
from ..files.atomic import check_output_folder
from ..golden import files as goldens
from ..oracle import worker_limits

EXIT_STATUS = {
    0: "every golden was recorded again (or every manifest rewritten)",
    1: "a llama.cpp crash was recorded (the golden is still written)",
    2: "a golden could not be recorded (skipped, each with a one-line reason)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", type=Path, default=goldens.GOLDEN_DIR, metavar="DIR",
                        help="the goldens to record again (default golden/)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR", help="where they go (default: --golden)")
    parser.add_argument("--manifests", action="store_true",
                        help="instead: rewrite the sdist manifests from the pinned version's sdist")
    parser.add_argument("--sdist", type=Path, default=None, metavar="FILE",
                        help="with --manifests: this llama_cpp_python-*.tar.gz instead of pip's download")
    worker_limits.add_options(parser)  # --jobs --force-jobs --timeout --memory-limit


def run(args: argparse.Namespace) -> int:
    if args.manifests:
        for line in rewrite_manifests(args.sdist):
            print(line)
        return 0
    limits = worker_limits.from_args(args)
    out = args.out or args.golden
    check_output_folder(out, "--out")
    if not args.golden.is_dir():
        raise SetupError(f"--golden {args.golden}: no such folder")
    status = 0
    for file in goldens.golden_files(args.golden):
        try:
            line, crashes = rerecord(file, out, limits)
        except (SetupError, goldens.GoldenError) as exc:
            print(f"error: {file.name}: skipped: {exc}", file=sys.stderr)
            status = 2
            continue
        print(line)
        status = max(status, 1 if crashes else 0)
    return status


def rerecord(file: Path, out: Path, limits: worker_limits.Limits) -> tuple[str, int]:
    """One golden recorded again from its cases into `out`: (its line, the crashes recorded)."""
    from ..inputs import documents
    from ..inputs.corpus import default_corpora
    from ..models.shipped import models_dir, short_name
    from ..models.synth import synthetic_dir
    from .drift import find_gguf, replay_inputs
    from .record import count_crashes, record_model

    old = goldens.load_golden(file)
    note = ""
    try:
        path = find_gguf(old["gguf"], [models_dir(), synthetic_dir(), file.parent])
    except SetupError as exc:
        from ..models.paths import resolve
        path, note = resolve(short_name(old["gguf"]["file"])), f" (its GGUF changed: {str(exc)[:160]})"
    try:
        cases = replay_inputs(old["cases"], path)
    except documents.DocumentError:
        cases, note = default_corpora(path), note + " (a document changed: recorded from the default corpora)"
    new = record_model(path, cases, jobs=limits.jobs, timeout=limits.timeout, memory_limit=limits.memory)
    target = goldens.write_golden(Path(out) / file.name, new)
    crashes = count_crashes(new)
    return f"{file.name}: {len(new['cases'])} cases, {crashes} oracle crash(es) -> {target}{note}", crashes


def rewrite_manifests(sdist: Path | None) -> list[str]:
    """The three manifests of the pinned sdist written from it: one line per manifest."""
    from ..chat import helper_build
    from ..models import convert, fetch

    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        if sdist is None:
            sdist = fetch.download_sdist(Path(tmp))
        elif not sdist.is_file():
            raise SetupError(f"--sdist {sdist}: no such file")
        target = fetch.cache_dir()
        fetch.extract(sdist, target)
        lines.append(f"{fetch.MANIFEST}: {fetch.write_manifest(target)} files")
        lines.append(f"{helper_build.MANIFEST}: {helper_build.write_manifest(sdist)} files")
        sources = Path(tmp) / "converter"
        fetch.extract(sdist, sources, select=convert._wanted)  # the files ensure_sources extracts
        lines.append(f"{convert.MANIFEST}: {convert.write_manifest(sources)} files")
    return lines
