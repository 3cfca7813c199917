"""llama.cpp's chat formatting, asked through the chat helper, crash-isolated.

The helper (see `chat_helper_build`) runs as a child process that answers one JSON
line per request. A crash (the child dies) or a hang (no answer within the timeout,
the child is killed) is an outcome of that request, recorded as a finding, and the
next request starts a fresh child.

What the helper reproduces, precisely: `common_chat_templates_init(model, template)`
and `common_chat_templates_apply(use_jinja=true)` from llama.cpp's `common/chat.cpp` —
the input preparation, the template capabilities, the specialized handlers and the
autoparser as llama-server runs them — then `common_tokenize(prompt, add_special=true,
parse_special=true)` as the server's `tokenize_input_prompts`, and the legacy C API
`llama_chat_apply_template` (from the same libllama the llama-cpp-python wheel ships).
What it does not: the server's HTTP layer, its "prefill assistant" continuation of a
final assistant message, and the wall clock (it reads the request's `now`).
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from ..contained import Contained
from ..environment import bounded_argv, child_env
from ..errors import SetupError
from . import helper_build as chat_helper_build

DEFAULT_TIMEOUT = 30.0
DEFAULT_MEMORY = 1 << 30  # address space of the helper: vocabularies only (no tensor data); gemma-4 peaks at 0.2 GiB
NOW = 1735689600  # 2025-01-01T00:00:00Z: the fixed clock of every recorded conversation
# Started through Python to cap the helper's address space before it runs (RLIMIT_AS survives exec;
# an inherited lower limit stays) and to tie it to this process (PR_SET_PDEATHSIG survives exec too):
# a template that allocates without end then fails inside llama.cpp, a crash of that case at worst,
# and a helper busy on a bomb dies with the harness, however the harness ends.


@dataclass(frozen=True)
class ChatAnswer:
    """One request's outcome: "ok", "error" (the template refused or failed), "crash" or "hang"."""

    status: str
    text: bytes | None = None
    ids: list[int] | None = None
    legacy: bytes | None = None  # None: llama_chat_apply_template does not recognise the template
    error: str = ""
    caps: dict[str, bool] = field(default_factory=dict)


def request(*, template: str | None, messages: list[Any], add_generation_prompt: bool,
            model: Path | None = None, bos_token: str = "", eos_token: str = "",
            tools: list[Any] | None = None, kwargs: dict[str, Any] | None = None,
            now: int = NOW, legacy: bool = True) -> dict[str, Any]:
    return {"model": str(model) if model else None, "template": template, "bos_token": bos_token,
            "eos_token": eos_token, "messages": messages, "tools": tools,
            "add_generation_prompt": add_generation_prompt, "kwargs": kwargs or {}, "now": now,
            "legacy": legacy}


class LineChild:
    """A contained child that answers each JSON request line with one JSON line, under a deadline.

    `exchange()` never raises for what the child does: no answer within `timeout` is a "hang"
    (the child is killed), a child that dies is a "crash"; either way the next request starts a
    fresh child (`_start`, the subclass's). `what` names the child in those answers.
    """

    what = "the child"
    timeout: float
    child: Contained | None = None
    busy: bool = False  # a request was sent and its answer not yet read

    def exchange(self, child: Contained, payload: bytes) -> ChatAnswer | dict[str, Any]:
        """The child's answer to `payload` as data, or the `ChatAnswer` of a hang or a crash."""
        deadline = time.monotonic() + self.timeout
        self.busy = True  # until its answer is read: a close meanwhile kills it at once (an interrupt)
        if not child.write(payload, deadline):
            return self._died(child)
        line = child.readline(deadline)
        self.busy = False
        if line is None:
            self._end(child)
            return ChatAnswer("hang", error=f"no answer within {self.timeout:g} s")
        if not line:
            return self._died(child)
        data: dict[str, Any] = json.loads(line)
        return data

    def _died(self, child: Contained) -> ChatAnswer:
        child.wait_exit(5.0)
        code = self._end(child)
        return ChatAnswer("crash", error=f"{self.what} died (exit status {code})")

    def _end(self, child: Contained) -> int:
        self.child = None
        return child.close()

    def close(self) -> None:
        """End the child: idle, EOF on its stdin and up to 5 s to exit; busy on a request (the check was
        interrupted), its process group killed at once."""
        if self.child is not None:
            self.child.close(grace=0.0 if self.busy else 5.0)
            self.child = None
        self.busy = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ChatOracle(LineChild):
    """A long-lived helper child; `ask()` never raises for what llama.cpp does.

    The helper runs in a session of its own (`harness.contained`): its death is seen
    at once, and a hang, a crash or `close()` kills its whole process group. Its address
    space is capped at `memory` bytes.
    """

    def __init__(self, binary: Path | None = None, timeout: float = DEFAULT_TIMEOUT,
                 memory: int = DEFAULT_MEMORY) -> None:
        self.binary = binary or chat_helper_build.build()
        self.timeout = timeout
        self.memory = memory
        self.child = None

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self.child.proc if self.child is not None else None

    what = "the helper"

    def _start(self) -> Contained:
        if self.child is None or self.child.exited():
            if self.child is not None:
                self.child.close()
            env = dict(child_env(), TZ="UTC", LC_ALL="C")
            argv = bounded_argv([str(self.binary)], self.memory, limit="AS")
            self.child = Contained(argv, env=env, stderr=subprocess.DEVNULL)
        return self.child

    def ask(self, req: dict[str, Any]) -> ChatAnswer:
        payload = json.dumps(req, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"
        got = self.exchange(self._start(), payload)
        if isinstance(got, dict) and "setup_error" in got:  # its memory cap could not be set: ours, exit 2
            self.close()
            raise SetupError(f"the chat helper: {got['setup_error']}")
        return got if isinstance(got, ChatAnswer) else _answer(got)


def _answer(data: dict[str, Any]) -> ChatAnswer:
    legacy = bytes.fromhex(data["legacy_hex"]) if "legacy_hex" in data else None
    if not data.get("ok"):
        return ChatAnswer("error", legacy=legacy, error=data.get("error", ""), caps=data.get("caps", {}))
    return ChatAnswer("ok", text=bytes.fromhex(data["prompt_hex"]), ids=data.get("ids"), legacy=legacy,
                      caps=data.get("caps", {}))
