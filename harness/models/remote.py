"""`--model URL`: the header of a remote GGUF file, fetched with HTTP Range requests and cached.

`http://` and `https://` URLs are read as given; `hf://ORG/REPO/FILE` (or
`hf://ORG/REPO@REVISION/FILE`) is the Hub's resolve URL of that file, built by
`huggingface_hub.hf_hub_url` (so `HF_ENDPOINT` applies), with `HF_TOKEN` sent
for gated or private repositories (never to any other host).

Only the header is fetched: a HEAD for the file's size and ETag, then Range
requests of a growing window (2 MiB, doubling) until the metadata parses
(`tokenizer.gguf.reader.parse(metadata_only=True)`). `--header-cap` (64 MiB
by default, at most 1 GiB) bounds what is fetched in total, into one buffer:
only the reader's "the metadata runs past these bytes" (`GGUFTruncated`)
asks for more, a header claiming more than the file's size or the cap is
refused at once, and any other reader error is final. Every response must
carry the size and the ETag the first ones had, or the fetch stops: the file
changed under us. A server that ignores Range and sends the whole file is
used only when the file is no larger than the cap; otherwise it is refused
with one line. A compressed body (`Content-Encoding` other than identity,
which the request asks for) is refused.

Every request has a connect timeout (10 s) and a read timeout (30 s without a
byte), and the whole fetch, HEAD included, a deadline (`--fetch-timeout`,
300 s by default, `$GGUF_PARITY_FETCH_TIMEOUT`): a server that drips one byte a
second is stopped there. Each is exit 2, one line naming the URL and what
timed out.

The bytes fetched are kept under `<cache>/remote/<sha256(url)[:16]>/etag-<sha256(etag)[:16]>/`
(the bytes as `<the URL's file name>`, and `source.json`), with `latest.json` naming the ETag seen last:
the next run with the same URL and ETag fetches nothing but the HEAD. In
offline mode (`HF_HUB_OFFLINE=1` or `--offline`) no request is made and the
cache alone answers. The header-only file is then checked as any cut file is
(`harness.models.header_only`). A server that sends no ETag is not cached.

The client is `huggingface_hub`'s (its shared `httpx2` session,
`get_hf_file_metadata`, `build_hf_headers`, `hf_raise_for_status`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tokenizer.errors import GGUFTruncated
from tokenizer.gguf import reader as gguf

from ..environment_vars import (
    FETCH_TIMEOUT,
    HEADER_CAP,
    MAX_FETCH_SECONDS,
    MAX_HEADER_CAP,
    MIN_HEADER_CAP,
    byte_size,
    seconds,
)
from ..errors import SetupError
from ..files.atomic import write_bytes_atomic, write_text_atomic
from .shipped import cache_dir

FIRST_WINDOW = 2 << 20
DEFAULT_CAP = HEADER_CAP.default
MAX_HEADER = MAX_HEADER_CAP  # the largest --header-cap: no tokenizer's metadata comes near it
DEFAULT_DEADLINE = FETCH_TIMEOUT.default  # seconds for the whole header fetch, HEAD included (--fetch-timeout)
MAX_DEADLINE = MAX_FETCH_SECONDS
CONNECT_TIMEOUT = 10.0    # seconds to connect, per request (or less when the deadline is nearer)
READ_TIMEOUT = 30.0       # seconds without a byte, per request (idem)
ALARM_GRACE = 1.0         # the alarm behind the deadline rings this late: a request's own timeout says more
OFFLINE_ENV = "HF_HUB_OFFLINE"
_SCHEMES = ("http://", "https://", "hf://")
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


@dataclass
class Settings:
    """How remote headers are fetched: the bytes cap, offline mode and the deadline
    (`--header-cap`, `--offline`, `--fetch-timeout`)."""

    cap: int = DEFAULT_CAP
    offline: bool = False
    deadline: float = DEFAULT_DEADLINE


def _from_env() -> Settings:
    offline = os.environ.get(OFFLINE_ENV, "").strip().upper() in ("1", "ON", "YES", "TRUE")
    return Settings(HEADER_CAP.get(), offline, FETCH_TIMEOUT.get())


def configure(*, cap: int | None = None, offline: bool | None = None, deadline: float | None = None) -> None:
    """Set the cap, offline mode and deadline for this process (`--header-cap`, `--offline`, `--fetch-timeout`)."""
    if cap is not None:
        SETTINGS.cap = cap
    if offline:
        SETTINGS.offline = True
    if deadline is not None:
        SETTINGS.deadline = deadline


def parse_deadline(text: str) -> float:
    """Seconds for a whole header fetch: more than 0, at most an hour (`SetupError` otherwise)."""
    try:
        return seconds(text, MAX_DEADLINE)
    except ValueError as exc:
        raise SetupError(f"--fetch-timeout {text!r}: {exc}") from None


def parse_size(text: str) -> int:
    """`64M`, `2MiB`, `1G` or a byte count, as bytes (`SetupError` if it is none of these or below 1 MiB)."""
    try:
        return byte_size(text, MIN_HEADER_CAP, MAX_HEADER)
    except ValueError as exc:
        raise SetupError(f"--header-cap {text!r}: {exc}") from None


SETTINGS = _from_env()


def is_remote(text: str) -> bool:
    return text.startswith(_SCHEMES)


@dataclass(frozen=True)
class Header:
    """A remote file's header as fetched (or found in the cache), and where it came from."""

    spec: str            # as the user gave it
    url: str             # what was fetched
    etag: str | None
    size: int            # the whole remote file
    header_bytes: int    # magic, counts and metadata
    header_sha256: str
    fetched_bytes: int   # bytes received by this call (0 from the cache)
    requests: int        # Range requests made by this call
    window_cap: int
    from_cache: bool
    path: str            # the local header-only file (its first bytes)

    def as_source(self) -> dict[str, Any]:
        """The report's and the golden's `source` of the model."""
        return {"kind": "url", **{k: v for k, v in asdict(self).items() if k != "path"}}


def fetch_header(spec: str, *, settings: Settings | None = None) -> Header:
    """The header of the GGUF file at `spec` (URL or hf://), from the cache or with Range requests.

    Raises `SetupError` (exit 2) naming the URL for anything that stops it: no
    network or offline without a cache entry, an HTTP error, a timeout or the
    deadline, a server without Range support on a file larger than the cap, a
    compressed reply, a header needing more than the cap or the file, a file
    that changed between requests; `GGUFError` when the bytes are no GGUF.
    """
    settings = settings or SETTINGS
    url, token = resolve_url(spec)
    cache = _Cache(url)
    if settings.offline:
        found = cache.latest()
        if found is None:
            raise SetupError(f"{spec}: offline ({OFFLINE_ENV}=1 or --offline) and not in the cache "
                             f"({cache.folder}); run once online to fetch its header")
        return _replace(found, spec=spec, fetched_bytes=0, requests=0, from_cache=True)
    clock = _Clock(spec, settings.deadline)
    with _http_errors(spec, settings.deadline), _alarm(spec, settings.deadline):
        size, etag = _head(url, token, min(CONNECT_TIMEOUT + READ_TIMEOUT, settings.deadline))
        found = cache.get(etag) if etag else None
        if found is not None and etag:
            cache.set_latest(etag)
            return _replace(found, spec=spec, fetched_bytes=0, requests=0, from_cache=True)
        head, end, requests = _fetch(spec, url, token, size, etag, settings.cap, clock)
    header = Header(spec, url, etag, size, end, hashlib.sha256(memoryview(head)[:end]).hexdigest(),
                    len(head), requests, settings.cap, False, "")
    return cache.put(header, head)


def resolve_url(spec: str) -> tuple[str, bool | None]:
    """The URL to fetch and the token argument for huggingface_hub (HF_TOKEN for hf:// only)."""
    if not spec.startswith("hf://"):
        return spec, False  # never send a Hub token to another host
    from huggingface_hub import hf_hub_url

    parts = spec.removeprefix("hf://").split("/", 2)
    if len(parts) < 3 or not all(parts):
        raise SetupError(f"{spec}: give hf://ORG/REPO/FILE (or hf://ORG/REPO@REVISION/FILE)")
    org, repo, filename = parts
    repo, _, revision = repo.partition("@")
    return hf_hub_url(f"{org}/{repo}", filename, revision=revision or None), None


def _head(url: str, token: bool | None, timeout: float) -> tuple[int, str | None]:
    from huggingface_hub import get_hf_file_metadata

    meta = get_hf_file_metadata(url, token=token, timeout=timeout)
    if meta.size is None:
        raise SetupError(f"{url}: the server gave no file size (Content-Length) for a HEAD request")
    if meta.size == 0:
        raise SetupError(f"{url}: the file is empty (0 bytes): not a GGUF file")
    return meta.size, meta.etag


def _fetch(spec: str, url: str, token: bool | None, size: int, etag: str | None,
           cap: int, clock: _Clock) -> tuple[bytearray, int, int]:
    """(bytes fetched, header end, requests): windows of 2 MiB, doubling, until the metadata parses.

    All of it is at most `cap` bytes (or the file, if smaller), in one
    buffer the responses are read into. Only "the metadata runs past these
    bytes" asks for more, and never for less than the reader says it needs; a
    need past the file's end or past the cap is refused at once.
    """
    from huggingface_hub.utils import build_hf_headers

    headers = {**build_hf_headers(token=token), "Accept-Encoding": "identity"}
    limit = min(size, cap)
    head = bytearray()
    window, requests, seen = FIRST_WINDOW, 0, _Seen(spec, size, etag)
    while True:
        requests += 1
        stop = min(limit, len(head) + window)
        _get_range(url, headers, head, stop, cap, seen, clock)
        end, needed = _metadata_end(head, spec, size=size, cap=cap)
        if end is not None:
            return head, end, requests
        if len(head) >= limit:
            raise SetupError(f"{spec}: its metadata does not end within the header cap of {cap:,} "
                             "bytes (--header-cap); raise the cap or download the file and give its path")
        window = max(window * 2, needed - len(head))


class _Clock:
    """The fetch's deadline: a request's connect and read timeouts, and the time left in all."""

    def __init__(self, spec: str, seconds: float) -> None:
        self.spec, self.seconds = spec, seconds
        self.deadline = time.monotonic() + seconds

    def timeout(self) -> Any:
        import httpx2

        left = max(0.001, self.deadline - time.monotonic())
        return httpx2.Timeout(min(READ_TIMEOUT, left), connect=min(CONNECT_TIMEOUT, left))

    def check(self, done: int) -> None:
        if time.monotonic() > self.deadline:
            raise SetupError(f"{self.spec}: the header fetch timed out: {done:,} bytes in {self.seconds:g} s "
                             "(--fetch-timeout)")


class _Seen:
    """The size and ETag every response must repeat: a change means the file changed between requests."""

    def __init__(self, spec: str, size: int, etag: str | None) -> None:
        self.spec, self.size, self.head_etag = spec, size, etag
        self.data_etag: str | None = None

    def check(self, response: Any, total: int) -> None:
        if total != self.size:
            raise SetupError(f"{self.spec}: the file changed between requests (size {self.size:,} bytes, "
                             f"then {total:,}); run again")
        etag = normalize_etag(response.headers.get("ETag"))
        redirected = response.history or str(response.url) != str(response.request.url)
        first = self.data_etag if self.data_etag is not None else (None if redirected else self.head_etag)
        if etag is not None and first is not None and etag != first:
            raise SetupError(f"{self.spec}: the file changed between requests (ETag {first}, then {etag}); "
                             "run again")
        if self.data_etag is None:
            self.data_etag = etag


def _get_range(url: str, headers: dict[str, str], head: bytearray, stop: int, cap: int, seen: _Seen,
               clock: _Clock) -> None:
    """Append bytes [len(head), stop) of `url` to `head`: a 206 checked against `seen`; a 200 (no Range
    support) only when the whole file is within `cap`; a compressed body never (identity was asked)."""
    from huggingface_hub import get_session
    from huggingface_hub.utils import hf_raise_for_status

    start = len(head)
    with get_session().stream("GET", url, headers={**headers, "Range": f"bytes={start}-{stop - 1}"},
                              follow_redirects=True, timeout=clock.timeout()) as response:
        hf_raise_for_status(response)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise SetupError(f"{seen.spec}: the server sent Content-Encoding {encoding!r} although the request "
                             "asked for identity; a compressed header is not read")
        if response.status_code == 200:
            if seen.size > cap or start:
                raise SetupError(f"{seen.spec}: the server does not support HTTP Range requests and the "
                                 f"file is {seen.size:,} bytes, more than the header cap of {cap:,} "
                                 "(--header-cap); download it and give its path")
            seen.check(response, seen.size)
            _read(response, head, seen.size, seen.spec, clock)
            return
        match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
        if response.status_code != 206 or not match or int(match[1]) != start:
            raise SetupError(f"{seen.spec}: asked for bytes {start}-{stop - 1}, got HTTP "
                             f"{response.status_code} {response.headers.get('Content-Range', '')!r}")
        seen.check(response, seen.size if match[3] == "*" else int(match[3]))
        _read(response, head, stop, seen.spec, clock)


def _read(response: Any, head: bytearray, stop: int, spec: str, clock: _Clock) -> None:
    """The body appended to `head` until it holds `stop` bytes (a server sending more is cut off, not believed)."""
    start = len(head)
    for chunk in response.iter_raw():
        head += chunk[:stop - len(head)]
        clock.check(len(head))
        if len(head) >= stop:
            return
    if len(head) < stop:
        raise SetupError(f"{spec}: the response ended after {len(head) - start:,} of {stop - start:,} bytes; "
                         "run again")


def _metadata_end(head: bytearray, spec: str, *, size: int, cap: int) -> tuple[int | None, int]:
    """(where the metadata of `head` ends, None) or (None, bytes the reader needs at least).

    The reader's `GGUFTruncated` alone asks for more; a need past the file's
    size or the cap is refused here, and any other reader error is final.
    """
    try:
        return gguf.parse(head, name=spec, metadata_only=True).data_offset, 0
    except GGUFTruncated as exc:
        if len(head) >= size:
            raise
        if exc.needed > size:
            raise SetupError(f"{spec}: its header claims {exc.needed:,} bytes, more than the file's "
                             f"{size:,}: not a GGUF file we can read ({exc})") from None
        if exc.needed > cap:
            raise SetupError(f"{spec}: its header needs at least {exc.needed:,} bytes, more than the header "
                             f"cap of {cap:,} (--header-cap) ({exc})") from None
        if exc.needed <= len(head):
            raise
        return None, exc.needed


def normalize_etag(etag: str | None) -> str | None:
    """An ETag without its weak prefix and quotes (`W/"abc"` -> `abc`), or None."""
    if not etag:
        return None
    return etag.strip().removeprefix("W/").strip('"') or None


@contextmanager
def _alarm(spec: str, seconds: float) -> Iterator[None]:
    """The fetch's deadline as SIGALRM (main thread only): it also stops a server that drips its status
    line or headers, which no read timeout sees (each byte comes in time) and no chunk loop reaches."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def ring(signum: int, frame: object) -> None:
        raise SetupError(f"{spec}: the header fetch timed out: not done in {seconds:g} s (--fetch-timeout)")

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds + ALARM_GRACE)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old if old is not None else signal.SIG_DFL)


@contextmanager
def _http_errors(spec: str, deadline: float) -> Iterator[None]:
    """Network and HTTP failures as one `SetupError` line naming the URL (and what timed out)."""
    import httpx2
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, OfflineModeIsEnabled

    try:
        yield
    except httpx2.ConnectTimeout:
        raise SetupError(f"{spec}: timed out connecting (no connection within "
                         f"{min(CONNECT_TIMEOUT, deadline):g} s)") from None
    except httpx2.TimeoutException as exc:
        raise SetupError(f"{spec}: timed out reading ({type(exc).__name__}: no byte within "
                         f"{min(READ_TIMEOUT, deadline):g} s)") from None
    except GatedRepoError:
        raise SetupError(f"{spec}: a gated repository: accept its terms on the Hub and set HF_TOKEN") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        hint = " (private or gated? set HF_TOKEN)" if status in (401, 403) else ""
        raise SetupError(f"{spec}: HTTP {status}{hint}: {str(exc).splitlines()[0]}") from None
    except OfflineModeIsEnabled:
        raise SetupError(f"{spec}: offline mode is on ({OFFLINE_ENV}) and the header is not cached") from None
    except httpx2.HTTPError as exc:
        raise SetupError(f"{spec}: cannot fetch it ({type(exc).__name__}: {exc})") from None


def _replace(header: Header, **changes: Any) -> Header:
    return Header(**{**asdict(header), **changes})


class _Cache:
    """`<cache>/remote/<sha256(url)[:16]>/`: one folder per ETag, and the ETag seen last."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.folder = cache_dir() / "remote" / hashlib.sha256(url.encode()).hexdigest()[:16]
        # the file name the URL gives (`.../x.gguf?download=1` -> `x.gguf`): the report names the model so
        stem = re.sub(r"[^\w.-]", "_", url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]) or "remote"
        self.name = stem if stem.endswith(".gguf") else f"{stem}.gguf"

    def _entry(self, etag: str) -> Path:
        """The ETag's folder, named by its hash: a server's text (`..`, `.`, a slash) never names a path."""
        return self.folder / f"etag-{hashlib.sha256(etag.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"

    def get(self, etag: str) -> Header | None:
        entry = self._entry(etag)
        try:
            record = json.loads((entry / "source.json").read_text(encoding="utf-8"))
            header = Header(**{**record, "path": str(entry / self.name)})
        except (OSError, ValueError, TypeError):
            return None
        if header.url != self.url or header.etag != etag or not Path(header.path).is_file():
            return None
        return header

    def latest(self) -> Header | None:
        try:
            etag = json.loads((self.folder / "latest.json").read_text(encoding="utf-8"))["etag"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return self.get(etag) if isinstance(etag, str) else None

    def set_latest(self, etag: str) -> None:
        write_text_atomic(self.folder / "latest.json", json.dumps({"url": self.url, "etag": etag}) + "\n")

    def put(self, header: Header, head: bytes | bytearray) -> Header:
        """Keep `head` (the bytes fetched) under its ETag, named as the URL names the file."""
        if header.etag is None:  # nothing to key it by: kept for this run only
            path = cache_dir() / "remote" / "uncached" / hashlib.sha256(head).hexdigest()[:16] / self.name
            write_bytes_atomic(path, head)
            return _replace(header, path=str(path))
        entry = self._entry(header.etag)
        write_bytes_atomic(entry / self.name, head)
        record = {k: v for k, v in asdict(header).items() if k != "path"}
        write_text_atomic(entry / "source.json", json.dumps(record, indent=1) + "\n")
        self.set_latest(header.etag)
        return _replace(header, path=str(entry / self.name))
