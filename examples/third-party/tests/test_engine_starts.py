"""The repository's own tests sit beside the parity items: here, that the engine answers hello."""

import json
import subprocess

from conftest import engine_command  # the repository's conftest.py (its folder is on sys.path)


def test_the_engine_says_hello(tmp_path):
    from harness.models.paths import resolve

    request = {"op": "hello", "id": 0, "protocol": 1, "model": str(resolve("llama-spm")), "args": {}}
    argv = engine_command().removeprefix("cmd:").split()
    done = subprocess.run(argv, input=json.dumps(request) + "\n", capture_output=True, text=True, timeout=60)
    reply = json.loads(done.stdout.splitlines()[0])
    assert reply["ok"] and reply["protocol"] == 1, reply
