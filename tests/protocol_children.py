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
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time


def reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(mode: str, state: str | None = None) -> int:
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


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
