"""The original's answers, asked of `harness.chat.transformers_child` under a time and memory limit.

`OriginalChat(folder)` starts the child once (transformers loads the folder once) and
`ask(request)` sends one conversation. A request past `timeout` seconds is a "hang" (the child
is killed and the next request starts a fresh one), a child that dies is a "crash", and a
template that passes the child's address-space cap fails inside it with MemoryError, an
"error" whose text says so. Nothing here raises for what transformers or the template does.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..contained import Contained
from ..environment import child_env
from ..errors import SetupError
from .oracle import NOW, ChatAnswer, LineChild

DEFAULT_TIMEOUT = 30.0
DEFAULT_MEMORY = 2 << 30  # bytes of address space: transformers and a 128k vocabulary load in under 1 GiB
LOAD_TIMEOUT = 120.0
EXTRA = "pip install 'gguf-parity[reference]'"


def missing() -> str | None:
    """Why the original's side cannot run here (transformers or jinja2 missing), or None."""
    need = [name for name in ("transformers", "jinja2", "tokenizers") if importlib.util.find_spec(name) is None]
    return f"the original's chat templates need {', '.join(need)}: {EXTRA}" if need else None


class OriginalChat(LineChild):
    """One transformers child serving the original folder's `apply_chat_template`."""

    what = "the transformers child"

    def __init__(self, folder: Path, *, timeout: float = DEFAULT_TIMEOUT, memory: int = DEFAULT_MEMORY) -> None:
        reason = missing()
        if reason:
            raise SetupError(reason)
        self.folder, self.timeout, self.memory = folder, timeout, memory
        self.child = None

    def _argv(self) -> list[str]:
        return [sys.executable, "-m", "harness.chat.transformers_child", str(self.folder), "--memory", str(self.memory)]

    def _start(self) -> Contained:
        if self.child is not None and not self.child.exited():
            return self.child
        if self.child is not None:
            self.child.close()
        env = dict(child_env(), TZ="UTC", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                   TOKENIZERS_PARALLELISM="false", RAYON_NUM_THREADS="1", MALLOC_ARENA_MAX="2")
        child = Contained(self._argv(), env=env, stderr=subprocess.DEVNULL)
        line = child.readline(time.monotonic() + LOAD_TIMEOUT)
        hello = json.loads(line) if line else {"error": "the transformers child died while loading"}
        if not hello.get("ready"):
            child.close()
            raise SetupError(f"{self.folder}: transformers cannot load it: {hello.get('error', 'no answer')}")
        self.child = child
        return child

    def ask(self, req: dict[str, Any]) -> ChatAnswer:
        """The original's answer to a `harness.chat.oracle.request`: its template name in `template_name`,
        extra template variables (an experiment's) in `variables`."""
        wire = {"messages": req["messages"], "tools": req.get("tools"), "template": req.get("template_name"),
                "add_generation_prompt": req["add_generation_prompt"], "now": req.get("now", NOW),
                "variables": req.get("variables") or {}}
        data = self.exchange(self._start(), json.dumps(wire).encode("utf-8") + b"\n")
        if isinstance(data, ChatAnswer):
            return data
        if not data.get("ok"):
            prefix = "raise_exception: " if data.get("raised") else ""
            return ChatAnswer("error", error=prefix + str(data.get("error", "")))
        return ChatAnswer("ok", text=data["text"].encode("utf-8", "surrogatepass"), ids=data["ids"])
