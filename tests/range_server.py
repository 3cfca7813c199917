"""A local HTTP server with Range support, for the remote-model tests (127.0.0.1 only).

It serves files by URL path, answers HEAD with Content-Length and ETag, and a
GET with `Range: bytes=A-B` with 206 and Content-Range. It counts what it sent
(`sent`: body bytes, `log`: one entry per request) so a test can say how much
of a file was fetched. `ranges=False` makes it ignore Range (200, the whole
file, as a plain server does); `etag_after` changes the ETag after that many
GETs (the file replaced between requests).

A hostile server for the bounds tests: `mode="silent"` answers a GET with
nothing at all, `"drip-head"` sends its GET reply one byte a second from the
status line on, `"drip-body"` sends the headers and then one byte of body a
second, `"wrong-bytes"` answers every range with a right Content-Range and
the file's first bytes, `"gzip"` sends `gzip_body` with Content-Encoding gzip
(although identity is asked). A held reply ends at the latest when the server
stops (`HOLD_LIMIT` seconds otherwise), so no test leaves a thread waiting.

    with RangeServer({"/x.gguf": path}) as server:
        url = server.url("/x.gguf")
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHUNK = 1 << 20
HOLD_LIMIT = 60.0  # the longest a silent or dripping reply is held, in seconds
MODES = (None, "silent", "drip-head", "drip-body", "wrong-bytes", "gzip")


class RangeServer:
    def __init__(self, files: dict[str, Path], *, ranges: bool = True, etag: str = "v1",
                 etag_after: int | None = None, mode: str | None = None, gzip_body: bytes = b"") -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {MODES}")
        self.files, self.ranges, self.etag, self.etag_after = files, ranges, etag, etag_after
        self.mode, self.gzip_body = mode, gzip_body
        self.closing = threading.Event()
        self.sent = 0
        self.gets = 0
        self.log: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def __enter__(self) -> RangeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def current_etag(self) -> str:
        changed = self.etag_after is not None and self.gets > self.etag_after
        return f'"{self.etag}-changed"' if changed else f'"{self.etag}"'


def _handler(server: RangeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _file(self) -> Path | None:
            path = server.files.get(self.path.split("?", 1)[0])
            if path is None:
                self.send_error(404)
            return path

        def do_HEAD(self) -> None:
            path = self._file()
            if path is None:
                return
            with server.lock:
                server.log.append({"method": "HEAD", "auth": self.headers.get("Authorization")})
                etag = server.current_etag()
            self.send_response(200)
            self.send_header("Content-Length", str(path.stat().st_size))
            self.send_header("ETag", etag)
            self.end_headers()

        def do_GET(self) -> None:
            path = self._file()
            if path is None:
                return
            size = path.stat().st_size
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            with server.lock:
                server.gets += 1
                etag = server.current_etag()
            if server.mode in ("silent", "drip-head"):
                self._hold(path, size, match)
                return
            if server.mode == "gzip":
                self._gzip(size, match)
                return
            if server.ranges and match:
                start = int(match[1])
                stop = min(size, int(match[2]) + 1 if match[2] else size)
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
            else:
                start, stop = 0, size
                self.send_response(200)
            self.send_header("Content-Length", str(stop - start))
            self.send_header("ETag", etag)
            self.end_headers()
            with server.lock:
                server.log.append({"method": "GET", "range": self.headers.get("Range"), "start": start,
                                   "stop": stop, "auth": self.headers.get("Authorization")})
            if server.mode == "drip-body":
                self._drip(b"\0" * (stop - start))
            else:
                self._send(path, 0 if server.mode == "wrong-bytes" else start,
                           stop - start if server.mode == "wrong-bytes" else stop)

        def _hold(self, path: Path, size: int, match: re.Match | None) -> None:
            """Nothing (silent), or a whole 206 reply one byte a second (drip-head)."""
            if server.mode == "silent":
                server.closing.wait(HOLD_LIMIT)
                return
            start = int(match[1]) if match else 0
            self._drip(f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{size - 1}/{size}\r\n"
                       f"Content-Length: {size - start}\r\n\r\n".encode())

        def _drip(self, data: bytes) -> None:
            for i in range(len(data)):
                if server.closing.wait(1.0 if i else 0.0) or i >= HOLD_LIMIT:
                    return
                try:
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return
                with server.lock:
                    server.sent += 1

        def _gzip(self, size: int, match: re.Match | None) -> None:
            """A 206 for the range asked, its body `gzip_body` with Content-Encoding gzip."""
            start = int(match[1]) if match else 0
            stop = min(size, int(match[2]) + 1) if match and match[2] else size
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(server.gzip_body)))
            self.end_headers()
            try:
                self.wfile.write(server.gzip_body)
            except (BrokenPipeError, ConnectionResetError):
                return
            with server.lock:
                server.sent += len(server.gzip_body)

        def _send(self, path: Path, start: int, stop: int) -> None:
            with path.open("rb") as fh:
                fh.seek(start)
                left = stop - start
                while left > 0:
                    block = fh.read(min(CHUNK, left))
                    try:
                        self.wfile.write(block)
                    except (BrokenPipeError, ConnectionResetError):
                        return  # the client stopped reading (a refused whole-file answer)
                    with server.lock:
                        server.sent += len(block)
                    left -= len(block)

    return Handler


def sparse_model(source: Path, out: Path, *, data_bytes: int = 4 << 30) -> tuple[int, int]:
    """`out`: the metadata of the vocabulary `source` (a GGUF without tensors), one tensor of
    `data_bytes` announced after it, and the data a sparse hole. Returns (header bytes, file size).

    The header is `source`'s bytes with the tensor count set to 1, then the
    tensor's directory entry and the alignment padding; the file is then
    extended with `truncate`, so it takes no disk space.
    """
    import struct

    raw = source.read_bytes()
    if raw[:4] != b"GGUF" or struct.unpack_from("<Q", raw, 8)[0] != 0:
        raise ValueError(f"{source}: expected a v2/v3 GGUF with no tensors")
    name = b"token_embd.weight"
    cols = 4096
    rows = data_bytes // (cols * 4)
    entry = struct.pack("<Q", len(name)) + name + struct.pack("<I", 2) + struct.pack("<qq", cols, rows)
    entry += struct.pack("<I", 0) + struct.pack("<Q", 0)  # F32, at offset 0 of the data
    head = raw[:8] + struct.pack("<Q", 1) + raw[16:] + entry
    head += bytes((-len(head)) % 32)
    with out.open("wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + rows * cols * 4)
    return len(raw), len(head) + rows * cols * 4


def main(argv: list[str] | None = None) -> None:
    """`python tests/range_server.py FILE [--sparse-from VOCAB]`: serve FILE at /NAME until ctrl-C.

    With `--sparse-from`, FILE is first made from VOCAB by `sparse_model` (4 GiB, sparse).
    """
    import argparse
    import time

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--sparse-from", type=Path, metavar="VOCAB")
    parser.add_argument("--no-ranges", action="store_true", help="ignore Range, as a plain server does")
    args = parser.parse_args(argv)
    if args.sparse_from:
        header, size = sparse_model(args.sparse_from, args.file)
        print(f"{args.file}: {size:,} bytes, header {header:,}", flush=True)
    with RangeServer({f"/{args.file.name}": args.file}, ranges=not args.no_ranges) as server:
        print(server.url(f"/{args.file.name}"), flush=True)
        try:
            while True:
                time.sleep(10)
                print(f"sent {server.sent:,} bytes in {len(server.log)} requests", flush=True)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
