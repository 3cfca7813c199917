"""`--model URL` fetches only the header, with Range requests (harness/models/remote.py).

Every test serves files from a local server on 127.0.0.1 (tests/range_server.py).
The model is a 4 GiB sparse GGUF: llama-bpe's shipped metadata (7.8 MB, the
Llama-3 vocabulary), one tensor announced after it, and a hole where its data
would be. The bytes fetched must be at most the header plus one window.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.models import remote as remote_gguf
from tests.range_server import RangeServer, sparse_model

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


@pytest.fixture
def big(require_vocab, tmp_path: Path, monkeypatch) -> tuple[Path, int, int]:
    """(the sparse model, its header bytes, its size); then a cache of the test's own."""
    vocab = require_vocab("llama-bpe")
    path = tmp_path / "Meta-Llama-3-8B-Q4_K_M.gguf"
    header, size = sparse_model(vocab, path)
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return path, header, size


def online(**kw) -> remote_gguf.Settings:
    return remote_gguf.Settings(**{"cap": remote_gguf.DEFAULT_CAP, "offline": False, **kw})


def test_only_the_header_of_a_4_gib_file_is_fetched_in_growing_windows(big):
    path, header_bytes, size = big
    with RangeServer({"/m.gguf": path}) as server:
        got = remote_gguf.fetch_header(server.url("/m.gguf"), settings=online())
        ranges = [(e["start"], e["stop"]) for e in server.log if e["method"] == "GET"]
    assert size > 4 << 30 and got.size == size and got.header_bytes == header_bytes
    assert ranges == [(0, 2 * MiB), (2 * MiB, 6 * MiB), (6 * MiB, 14 * MiB)]  # 2, 4, 8 MiB windows
    last_window = ranges[-1][1] - ranges[-1][0]
    print(f"fetched {server.sent:,} of {size:,} bytes (header {header_bytes:,}, last window {last_window:,})")
    assert got.fetched_bytes == server.sent <= header_bytes + last_window, \
        "more than the header plus one window was fetched"
    assert got.etag == "v1" and not got.from_cache and Path(got.path).stat().st_size == server.sent


def test_the_cap_bounds_what_is_fetched_in_all(big):
    path, header_bytes, _ = big
    with RangeServer({"/m.gguf": path}) as server:
        remote_gguf.fetch_header(server.url("/m.gguf"), settings=online(cap=10 * MiB))
        ranges = [(e["start"], e["stop"]) for e in server.log if e["method"] == "GET"]
    assert ranges == [(0, 2 * MiB), (2 * MiB, 6 * MiB), (6 * MiB, 10 * MiB)]  # the last window cut at the cap
    with RangeServer({"/m.gguf": path}) as server, \
            pytest.raises(SetupError, match="more than the header cap of 4,194,304"):
        remote_gguf.fetch_header(server.url("/m.gguf"), settings=online(cap=4 * MiB))
    assert header_bytes > 4 * MiB and server.sent <= 4 * MiB


def test_a_second_fetch_of_the_same_url_and_etag_comes_from_the_cache(big):
    path, _, _ = big
    with RangeServer({"/m.gguf": path}) as server:
        first = remote_gguf.fetch_header(server.url("/m.gguf"), settings=online())
        sent = server.sent
        again = remote_gguf.fetch_header(server.url("/m.gguf"), settings=online())
        assert server.sent == sent and server.log[-1]["method"] == "HEAD"  # a HEAD, no byte of the file
        server.etag = "v2"  # the file replaced: the same URL is fetched anew
        other = remote_gguf.fetch_header(server.url("/m.gguf"), settings=online())
    assert again.from_cache and again.fetched_bytes == 0 and again.header_sha256 == first.header_sha256
    assert other.etag == "v2" and not other.from_cache and other.fetched_bytes == sent


def test_offline_uses_the_cache_only(big):
    path, _, _ = big
    with RangeServer({"/m.gguf": path}) as server:
        url = server.url("/m.gguf")
        with pytest.raises(SetupError, match=r"offline .* not in the cache"):
            remote_gguf.fetch_header(url, settings=online(offline=True))
        assert server.log == []  # not a single request
        remote_gguf.fetch_header(url, settings=online())
    got = remote_gguf.fetch_header(url, settings=online(offline=True))  # the server is gone
    assert got.from_cache and got.requests == 0 and got.etag == "v1"


def test_a_server_without_range_support_is_refused_above_the_cap(big):
    path, _, size = big
    with (RangeServer({"/m.gguf": path}, ranges=False) as server,
          pytest.raises(SetupError, match=f"does not support HTTP Range requests and the file is {size:,}")):
        remote_gguf.fetch_header(server.url("/m.gguf"), settings=online())
    assert server.sent < 64 * MiB  # the client hung up instead of reading 4 GiB


def test_a_server_without_range_support_is_used_below_the_cap(require_vocab, tmp_path, monkeypatch):
    vocab = require_vocab("llama-spm")
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    with RangeServer({"/v.gguf": vocab}, ranges=False) as server:
        got = remote_gguf.fetch_header(server.url("/v.gguf"), settings=online())
    assert got.fetched_bytes == got.size == vocab.stat().st_size and Path(got.path).read_bytes() == vocab.read_bytes()


def test_an_etag_change_between_requests_stops_the_fetch(big):
    path, _, _ = big
    with (RangeServer({"/m.gguf": path}, etag_after=1) as server,
          pytest.raises(SetupError, match=r"changed between requests \(ETag v1, then v1-changed\)")):
        remote_gguf.fetch_header(server.url("/m.gguf"), settings=online())
    assert not list((Path(os.environ["GGUF_PARITY_CACHE"]) / "remote").glob("*/*/*.gguf"))  # nothing cached


def test_hf_urls_resolve_to_the_hub_and_only_they_get_the_token(big):
    path, _, _ = big
    with RangeServer({"/org/repo/resolve/main/m.gguf": path, "/m.gguf": path}) as server:
        env = {"HF_ENDPOINT": server.url(""), "HF_TOKEN": "hf_test_token"}
        code = ("from harness.models import remote as r; h = r.fetch_header('hf://org/repo/m.gguf'); "
                "print(h.url); r.fetch_header(" + repr(server.url("/m.gguf")) + ")")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == server.url("/org/repo/resolve/main/m.gguf")
        auth = [(e["method"], e["auth"]) for e in server.log]
    hub, other = auth[:len(auth) // 2], auth[len(auth) // 2:]
    assert all(a == "Bearer hf_test_token" for _, a in hub) and all(a is None for _, a in other)


def test_a_bad_hf_spec_and_an_unreachable_url_are_one_line_errors():
    with pytest.raises(SetupError, match="give hf://ORG/REPO/FILE"):
        remote_gguf.fetch_header("hf://org/repo", settings=online())
    with pytest.raises(SetupError, match="cannot fetch it"):
        remote_gguf.fetch_header("http://127.0.0.1:9/x.gguf", settings=online())


def harness(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, timeout=600, check=False)


@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
@pytest.mark.oracle
def test_run_record_and_compare_on_a_url_exit_0_and_name_the_source(big, tmp_path):
    path, header_bytes, size = big
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "Hello world"}\n{"id": "b", "text": " 2026-12-01\\n"}\n')
    env = {"GGUF_PARITY_CACHE": os.environ["GGUF_PARITY_CACHE"]}
    with RangeServer({"/Meta-Llama-3-8B-Q4_K_M.gguf": path}) as server:
        url = server.url("/Meta-Llama-3-8B-Q4_K_M.gguf")
        done = harness("run", "--model", url, "--corpus", str(corpus), "--no-default-corpora",
                       "--report", str(tmp_path / "r"), "--quiet", env=env)
        assert done.returncode == 0, (done.stdout, done.stderr)
        print(f"run --model {url}: fetched {server.sent:,} of {size:,} bytes")
        assert server.sent <= header_bytes + 8 * MiB
        done = harness("record", "--model", url, "--corpus", str(corpus), "--out", str(tmp_path / "g"), env=env)
        assert done.returncode == 0, (done.stdout, done.stderr)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    row = report["summary"]["per_model"]["Meta-Llama-3-8B-Q4_K_M"]
    assert row["source"]["url"] == url and row["source"]["etag"] == "v1" and row["source"]["size"] == size
    assert any(n.startswith(f"checked header-only from {url}") for n in row["notes"])
    assert f"checked header-only from {url}" in (tmp_path / "r" / "report.html").read_text()
    golden = json.loads((tmp_path / "g" / "Meta-Llama-3-8B-Q4_K_M.json").read_text())
    assert {k: golden["gguf"]["source"][k] for k in ("url", "etag", "header_sha256")} == \
        {k: row["source"][k] for k in ("url", "etag", "header_sha256")}
    done = harness("compare", "--golden", str(tmp_path / "g"), "--model", url, "--offline",
                   "--report", str(tmp_path / "r2"), "--quiet", env=env)  # the server is gone: the cache answers
    assert done.returncode == 0, (done.stdout, done.stderr)


def test_the_cli_refuses_a_no_range_server_with_one_line(big, tmp_path):
    path, _, _ = big
    with RangeServer({"/m.gguf": path}, ranges=False) as server:
        done = harness("inspect", server.url("/m.gguf"), env={"GGUF_PARITY_CACHE": os.environ["GGUF_PARITY_CACHE"]})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: ") and "does not support HTTP Range" in done.stderr


@pytest.mark.parametrize("text, size", [("64M", 64 * MiB), ("2MiB", 2 * MiB), ("1G", 1 << 30),
                                        (str(3 * MiB), 3 * MiB)])
def test_header_cap_sizes(text, size):
    assert remote_gguf.parse_size(text) == size


@pytest.mark.parametrize("text", ["10k", "lots", "-5M"])
def test_a_bad_header_cap_is_refused(text):
    with pytest.raises(SetupError, match="--header-cap"):
        remote_gguf.parse_size(text)


def test_an_empty_remote_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("GGUF_PARITY_CACHE", str(tmp_path / "cache"))
    (tmp_path / "e.gguf").write_bytes(b"")
    with RangeServer({"/e.gguf": tmp_path / "e.gguf"}) as server, \
            pytest.raises(SetupError, match="empty"):
        remote_gguf.fetch_header(server.url("/e.gguf"), settings=online())
