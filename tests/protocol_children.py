"""Children that break the engine protocol on purpose: `python tests/protocol_children.py MODE`.

Each answers `hello` properly (except `die-at-hello` and `protocol-2`), then
misbehaves on `tokenize` as its MODE says. tests/subjects/test_engine_protocol.py
checks that the harness turns each into an engine error or a load error.

`python tests/protocol_children.py MODE-once STATE` misbehaves only while the file
STATE does not exist (it creates it): `die-once`, `hang-once` on tokenize,
`die-at-hello-once` at hello; the harness's re-check in a fresh child then
gets an answer, which makes an engine flake. `exit-after-reply` answers each tokenize
request, then exits (so each next request restarts it). `die-then-at-hello-once` dies on
tokenize, and the fresh child that replaces it at hello; the one after answers.

Misbehaving on the wire (docs/engine-protocol.md "Bounds"; tests/subjects/test_wire.py):
`flood` answers tokenize with 64 KiB writes that never end a line, `drip` with one byte every
`DRIP` seconds, `many-ids` with a line of 50 million ids (written as it goes: the child holds
none of it), `ids-over-cap` with a short line of 100,000 ids per input; `hello-2^40` claims
2^40 tokens in hello, `hello-over-gguf` 2^24 (under the cap, over any shipped GGUF), and both
answer every vocabulary slice asked. With a second argument PIDS, each of these first starts
a grandchild (a sleeper in its process group) and appends "pid grandchild-pid" to the file
PIDS, so a test can see that nothing the engine started outlives the run (and a vocabulary
slice asked is noted there as "vocab START").
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

DRIP = 0.25  # seconds between the bytes of `drip`
WIRE = ("flood", "drip", "many-ids", "ids-over-cap", "hello-2^40", "hello-over-gguf")


def reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def spawn_sleeper(pids: str) -> None:
    """A grandchild in this child's process group; both pids appended to the file `pids`."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(pids, "a") as out:
        out.write(f"{os.getpid()} {sleeper.pid}\n")


def write_raw(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def wire(mode: str, request: dict) -> None:
    """Answer a tokenize request as a `WIRE` mode misbehaves (never returns for the endless ones)."""
    rid = request["id"]
    if mode == "flood":
        while True:
            write_raw(b"x" * (64 << 10))
    if mode == "drip":
        while True:
            write_raw(b"{")
            time.sleep(DRIP)
    if mode == "many-ids":
        write_raw(f'{{"id": {rid}, "ok": true, "results": [[{{"ids": ['.encode())
        for _ in range(50_000_000 // 500_000):
            write_raw(b"7," * 500_000)
        write_raw(b'7]}]]}\n')
        return
    reply({"id": rid, "ok": True, "results": [[{"ids": [7] * 100_000}] * 4 for _ in request["inputs"]]})


def hello_claim(mode: str, rid: int) -> dict:
    n = 1 << 40 if mode == "hello-2^40" else 1 << 24
    return {"id": rid, "ok": True, "protocol": 1, "capabilities": ["tokenize", "bytes_input", "token_text"],
            "info": {"n_tokens": n}}


def main(mode: str, state: str | None = None) -> int:
    if mode in WIRE:
        if state:
            spawn_sleeper(state)
        return main_wire(mode, state)
    if mode == "die-then-at-hello-once":  # dies on tokenize; the fresh child dies at hello; the next answers
        assert state is not None
        mode = "die-once" if not os.path.exists(state) else "die-at-hello-once"
        state = state if mode == "die-once" else state + ".hello"
    if mode.endswith("-once"):
        assert state is not None
        mode = "ok" if os.path.exists(state) else mode.removesuffix("-once")
        if mode != "ok" and mode != "die-at-hello":
            mode = f"{mode}-later:{state}"
        elif mode == "die-at-hello":
            open(state, "w").close()
    for line in sys.stdin:
        request = json.loads(line)
        rid, op = request["id"], request["op"]
        if op == "hello":
            if mode == "die-at-hello":
                print("cannot load: planted", file=sys.stderr)
                return 4
            reply({"id": rid, "ok": True, "protocol": 2 if mode == "protocol-2" else 1,
                   "capabilities": ["tokenize", "bytes_input"], "info": {}})
        elif op == "shutdown":
            reply({"id": rid, "ok": True})
            return 0
        elif mode == "garbage":
            sys.stdout.write("this is not JSON\n")
            sys.stdout.flush()
        elif mode == "wrong-id":
            reply({"id": rid + 7, "ok": True, "results": []})
        elif mode == "float-ids":
            reply({"id": rid, "ok": True, "results": [[{"ids": [1.0]}] * 4 for _ in request["inputs"]]})
        elif mode == "short":
            reply({"id": rid, "ok": True, "results": []})
        elif mode.partition(":")[0] in ("hang-later", "die-later"):  # the -once modes: fail now, not again
            open(mode.partition(":")[2], "w").close()
            mode = mode.partition(":")[0].removesuffix("-later")
            if mode == "hang":
                time.sleep(3600)
            os._exit(9)
        elif mode == "hang":
            time.sleep(3600)
        elif mode == "slow-per-64k":  # 0.3 s per 64 KiB of input, then answers: slow, not hung
            size = sum(len(base64.b64decode(i)) for i in request["inputs"])
            time.sleep(0.3 * size / (64 << 10))
            reply({"id": rid, "ok": True, "results": [[{"ids": [len(i)]}] * 4 for i in request["inputs"]]})
        elif mode == "die":
            os._exit(9)
        elif mode == "exit-after-reply":  # answers, then is gone: every next request needs a fresh child
            reply({"id": rid, "ok": True, "results": [[{"ids": [len(i)]}] * 4 for i in request["inputs"]]})
            return 0
        else:
            reply({"id": rid, "ok": True, "results": [[{"ids": [len(i)]}] * 4 for i in request["inputs"]]})
    return 0


def alive(pids: Path, grace: float = 3.0) -> list[int]:
    """The pids in the file `pids` (an engine child and the grandchild it started) still running
    `grace` seconds after the last was killed (a SIGKILL takes a moment to land)."""
    deadline = time.monotonic() + grace
    while (running := _running(pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running


def _running(pids: Path) -> list[int]:
    out = []
    for line in pids.read_text().splitlines() if pids.exists() else []:
        if line.startswith("vocab"):
            continue
        for pid in map(int, line.split()):
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                out.append(pid)
    return out


def main_wire(mode: str, state: str | None) -> int:
    for line in sys.stdin:
        request = json.loads(line)
        rid, op = request["id"], request["op"]
        if op == "hello":
            reply(hello_claim(mode, rid) if mode.startswith("hello-") else
                  {"id": rid, "ok": True, "protocol": 1, "capabilities": ["tokenize", "bytes_input"], "info": {}})
        elif op == "shutdown":
            reply({"id": rid, "ok": True})
            return 0
        elif op == "vocab":  # answered, slice after slice: only the harness's cap ends it
            if state:
                with open(state, "a") as out:
                    out.write(f"vocab {request['start']}\n")
            reply({"id": rid, "ok": True, "text": ["eA=="] * request["count"]})
        elif mode.startswith("hello-"):
            reply({"id": rid, "ok": True, "results": [[{"ids": [len(i)]}] * 4 for i in request["inputs"]]})
        else:
            wire(mode, request)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
