"""harness.models.fetch: two fetches into one empty cache at once both succeed; an archive is read within bounds.

The sdist here is a small stand-in built by the test (the real one is 76 MB): the same member
layout, its own manifest, so the race on the extract step runs offline in about a second.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.models import fetch

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "llama_cpp_python-0.0.0/vendor/llama.cpp/models/"

CHILD = """
import json, sys
from pathlib import Path
from harness.models import fetch
manifest = json.loads(Path(sys.argv[3]).read_text())
fetch.read_manifest = lambda *args: manifest
fetch.fetch(target=Path(sys.argv[1]), sdist=Path(sys.argv[2]), log=lambda line: None)
"""


def stand_in_sdist(tmp: Path, files: int = 300, size: int = 16 << 10) -> tuple[Path, Path]:
    """A .tar.gz with `files` vocabularies where the sdist has them, and its manifest (JSON)."""
    archive, manifest = tmp / "sdist.tar.gz", {}
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        for i in range(files):
            data = hashlib.sha256(str(i).encode()).digest() * (size // 32)
            info = tarfile.TarInfo(f"{PREFIX}ggml-vocab-t{i}.gguf")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            manifest[f"models/ggml-vocab-t{i}.gguf"] = hashlib.sha256(data).hexdigest()
    (tmp / "manifest.json").write_text(json.dumps(manifest))
    return archive, tmp / "manifest.json"


def test_two_fetches_into_one_empty_cache_both_succeed(tmp_path):
    """issue 47: one of two fetches exited 2 in 2 of 3 rounds (`...ggml-vocab-aquila.gguf.part: No such file`)."""
    archive, manifest = stand_in_sdist(tmp_path)
    for round_ in range(3):
        cache = tmp_path / f"cache{round_}"
        runs = [subprocess.Popen([sys.executable, "-c", CHILD, str(cache), str(archive), str(manifest)],
                                 cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
        results = [(run.wait(timeout=120), run.stderr.read() if run.stderr else "") for run in runs]
        for run in runs:
            run.stdout.close() if run.stdout else None
            run.stderr.close() if run.stderr else None
        assert [code for code, _ in results] == [0, 0], results
        assert fetch.verify(cache, json.loads(manifest.read_text())) == []
        assert not [p.name for p in cache.rglob("*") if p.name.endswith((".part", ".tmp"))]


def test_a_member_over_its_limit_is_refused_naming_the_archive(tmp_path, monkeypatch):
    archive, _ = stand_in_sdist(tmp_path, files=2, size=4096)
    monkeypatch.setattr(fetch, "MAX_MEMBER_BYTES", 1024)
    with pytest.raises(SetupError, match=r"sdist.tar.gz: member .*ggml-vocab-t0.gguf is 4,096 bytes"):
        fetch.extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_manifest_is_a_bounded_side_file_and_a_bad_line_is_named(tmp_path):
    bad = tmp_path / "bad.sha256"
    bad.write_text(f"{'0' * 64}  models/a.gguf\nnot a line\n")
    with pytest.raises(SetupError, match=r"bad.sha256:2: not a line"):
        fetch.read_manifest(bad)
    fifo = tmp_path / "fifo.sha256"
    os.mkfifo(fifo)
    with pytest.raises(SetupError, match="sha256 manifest is a FIFO"):
        fetch.read_manifest(fifo)
    assert len(fetch.read_manifest()) > 100  # the shipped one reads
