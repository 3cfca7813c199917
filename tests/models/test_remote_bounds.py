"""A hostile server cannot hold the harness or take its memory (harness/models/remote.py).

Each server runs on 127.0.0.1 inside the test (tests/range_server.py) and stops
with it. The harness runs as `python -m harness inspect URL` in a child whose
peak RSS is read from inside it (`VmHWM`, and `RUSAGE_CHILDREN`, written to a file at exit): every
case must end in exit 2 with one line, within seconds, having fetched at most
the cap plus one window, with the peak RSS a small multiple of the cap above
an idle harness.
"""

from __future__ import annotations

import gzip
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.models import remote as remote_gguf
from tests.range_server import RangeServer

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
CAP = 4 * MiB
RSS_LIMIT = 64 * MiB + 8 * CAP  # idle `inspect` of a URL peaks at 59 MiB; the old fetch took 2.3 to 6.7 GB
RUN_LIMIT = 60.0       # seconds; the old fetch took 165 s on the wrong-bytes server
# Peak RSS of the harness process (VmHWM: ru_maxrss would keep pytest's own from before the exec) and
# of its children (RUSAGE_CHILDREN), in bytes, written where $RSS_FILE says at exit.
MEASURED = """
import atexit, os, re, resource, runpy, sys
def peak():
    with open("/proc/self/status") as status:
        own = int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read())[1])
    kib = max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    with open(os.environ["RSS_FILE"], "w") as out:
        out.write(str(kib * 1024))
atexit.register(peak)
sys.argv = ["harness", *sys.argv[1:]]
runpy.run_module("harness", run_name="__main__")
"""


def gguf_claiming(value: bytes) -> bytes:
    """A v3 GGUF header with one key, `general.name`, whose typed value is `value` (type field first)."""
    key = b"general.name"
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + value


HUGE_STRING = struct.pack("<IQ", 8, 10 << 30) + b"0123456789"        # a 10 GB string
HUGE_ARRAY = struct.pack("<IIQ", 9, 0, 1 << 40) + bytes(64)          # 2^40 uint8 entries


def sparse_file(path: Path, head: bytes, size: int) -> Path:
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


def inspect(url: str, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, int, float]:
    """(the finished `inspect URL --header-cap 4M`, its peak RSS in bytes, seconds it took)."""
    rss = tmp_path / "rss"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RSS_FILE": str(rss),
           "GGUF_PARITY_CACHE": str(tmp_path / "cache")}
    env.pop("HF_HUB_OFFLINE", None)
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", MEASURED, "inspect", url, "--header-cap", "4M", *extra],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=RUN_LIMIT, check=False)
    took = time.monotonic() - began
    return done, int(rss.read_text()) if rss.is_file() else 0, took


def assert_one_line_exit_2(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr[-2000:]
    for word in words:
        assert word in done.stderr, done.stderr


@pytest.mark.parametrize("value, size, said", [
    pytest.param(HUGE_STRING, 8 * MiB, "more than the file's", id="10GB-string-in-an-8MB-file"),
    pytest.param(HUGE_STRING, 16 << 30, "more than the header cap", id="10GB-string-in-a-16GB-file"),
    pytest.param(HUGE_ARRAY, 16 << 30, "more than the file's", id="2^40-entries-in-a-16GB-file"),
])
def test_a_header_claiming_more_than_the_file_or_the_cap_is_refused_after_one_request(tmp_path, value, size,
                                                                                     said):
    path = sparse_file(tmp_path / "m.gguf", gguf_claiming(value), size)
    with RangeServer({"/m.gguf": path}) as server:
        done, rss, took = inspect(server.url("/m.gguf"), tmp_path)
        gets = server.gets
    print(f"{path.stat().st_size:,} bytes file: {server.sent:,} bytes fetched in {gets} GET(s), "
          f"peak RSS {rss / MiB:.0f} MiB, {took:.1f} s")
    assert_one_line_exit_2(done, server.url("/m.gguf"), said)
    assert gets == 1 and server.sent <= remote_gguf.FIRST_WINDOW
    assert 0 < rss < RSS_LIMIT


def test_a_206_with_the_right_range_and_the_wrong_bytes_fetches_at_most_the_cap(require_vocab, tmp_path):
    vocab = require_vocab("llama-bpe")  # 7.8 MB of metadata: more than one window
    path = sparse_file(tmp_path / "m.gguf", vocab.read_bytes(), 4 << 30)
    with RangeServer({"/m.gguf": path}, mode="wrong-bytes") as server:
        done, rss, took = inspect(server.url("/m.gguf"), tmp_path)
    print(f"wrong bytes: {server.sent:,} bytes fetched in {server.gets} GET(s), peak RSS {rss / MiB:.0f} MiB, "
          f"{took:.1f} s")
    assert_one_line_exit_2(done, server.url("/m.gguf"))
    assert server.sent <= CAP + remote_gguf.FIRST_WINDOW
    assert 0 < rss < RSS_LIMIT


def test_a_gzip_reply_is_refused_although_it_would_inflate_within_bounds(require_vocab, tmp_path):
    vocab = require_vocab("llama-bpe")
    path = sparse_file(tmp_path / "m.gguf", vocab.read_bytes(), 4 << 30)
    bomb = gzip.compress(bytes(256 * MiB), compresslevel=9)  # 256 MiB of zeros in about 250 KB
    with RangeServer({"/m.gguf": path}, mode="gzip", gzip_body=bomb) as server:
        done, rss, took = inspect(server.url("/m.gguf"), tmp_path)
    print(f"gzip bomb of {len(bomb):,} bytes: {server.gets} GET(s), peak RSS {rss / MiB:.0f} MiB, {took:.1f} s")
    assert_one_line_exit_2(done, server.url("/m.gguf"), "Content-Encoding 'gzip'")
    assert server.gets == 1 and 0 < rss < RSS_LIMIT


@pytest.mark.parametrize("mode, said", [
    pytest.param("silent", "no byte within 3 s", id="silent"),
    pytest.param("drip-head", "not done in 3 s", id="drips-its-status-line"),
    pytest.param("drip-body", "in 3 s", id="drips-its-body"),
])
def test_a_server_that_sends_nothing_or_drips_is_stopped_by_the_deadline(require_vocab, tmp_path, mode, said):
    vocab = require_vocab("llama-bpe")
    with RangeServer({"/m.gguf": vocab}, mode=mode) as server:
        done, _, took = inspect(server.url("/m.gguf"), tmp_path, "--fetch-timeout", "3")
    print(f"{mode}: exit {done.returncode} after {took:.1f} s: {done.stderr.strip()}")
    assert_one_line_exit_2(done, server.url("/m.gguf"), "timed out", said)
    assert took < 20


def test_every_request_gets_a_connect_and_read_timeout(require_vocab, tmp_path, monkeypatch):
    """A silent GET ends at the read timeout, long before the fetch's deadline."""
    vocab = require_vocab("llama-bpe")
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(remote_gguf, "READ_TIMEOUT", 1.0)
    began = time.monotonic()
    with RangeServer({"/m.gguf": vocab}, mode="silent") as server, \
            pytest.raises(SetupError, match="timed out reading"):
        remote_gguf.fetch_header(server.url("/m.gguf"), settings=remote_gguf.Settings(deadline=30.0))
    assert time.monotonic() - began < 10


def test_an_etag_of_dot_dot_names_no_folder_outside_the_urls_entry(require_vocab, tmp_path, monkeypatch):
    vocab = require_vocab("llama-bpe")
    cache = tmp_path / "cache"
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for etag in ("..", "."):
        with RangeServer({"/m.gguf": vocab}, etag=etag) as server:
            got = remote_gguf.fetch_header(server.url("/m.gguf"), settings=remote_gguf.Settings())
        entry = Path(got.path).parent
        url_folder = cache / "remote" / remote_gguf.hashlib.sha256(server.url("/m.gguf").encode()).hexdigest()[:16]
        assert entry.parent == url_folder and entry.name not in (".", ".."), got.path
        assert not (cache / "remote" / "m.gguf").exists() and not (url_folder / "m.gguf").exists()


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "soon", "7200"])
def test_a_bad_fetch_timeout_is_refused(text):
    with pytest.raises(SetupError, match="--fetch-timeout"):
        remote_gguf.parse_deadline(text)
