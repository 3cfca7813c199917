"""A `cmd:` engine that leaves a process behind: `python tests/orphaning_engine.py MODE PIDFILE`.

It answers `hello` with our own tokenizer's capabilities (tokenize, bytes input), then
starts a grandchild (`sleep 300`) that inherits its stdin and stdout, and exits:

- `after-hello`: right after its hello reply;
- `mid-tokenize`: on its first tokenize request, without replying (exit status 5).

Every pid it starts (its own, the grandchild's) is appended to PIDFILE, one per line,
so tests/oracle/test_contained.py can check that none is left alive after the run. The
grandchild holding the pipes is what made the harness wait for an end of file
that never came.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

EXIT_MID_TOKENIZE = 5


def orphan(pidfile: str) -> None:
    grandchild = subprocess.Popen(["sleep", "300"])  # inherits stdin, stdout and stderr
    with open(pidfile, "a", encoding="utf-8") as f:
        f.write(f"{grandchild.pid}\n")


def main(mode: str, pidfile: str) -> int:
    with open(pidfile, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "hello":
            sys.stdout.write(json.dumps({"id": request["id"], "ok": True, "protocol": 1,
                                         "capabilities": ["tokenize", "bytes_input"], "info": {}}) + "\n")
            sys.stdout.flush()
            if mode == "after-hello":
                orphan(pidfile)
                return 0
        elif request["op"] == "tokenize" and mode == "mid-tokenize":
            orphan(pidfile)
            return EXIT_MID_TOKENIZE
        elif request["op"] == "shutdown":
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
