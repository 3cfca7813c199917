"""The original's answers, asked of `harness.chat.transformers_child` under a time and memory limit.

`OriginalChat(folder)` starts the child once (transformers loads the folder once) and
`ask(request)` sends one conversation. The child never sees the user's folder: it loads a
private copy of the files a tokenizer is read from (`tokenizer_files`), each read as a model
folder's files are read (`harness.models.folder_files`: inside the folder, regular, bounded; a
link that leaves the folder is refused, naming it), so transformers, which follows links and
reads what it likes of a folder, finds nothing there but those copies. A request past
`timeout` seconds is a "hang" (the child is killed and the next request starts a fresh one), a
child that dies is a "crash", and a template that passes the child's heap cap (RLIMIT_DATA) fails
inside it with MemoryError, an "error" whose text says so. Nothing here raises for what
transformers or the template does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..contained import Contained
from ..environment import child_env
from ..errors import SetupError
from ..files.input_limits import tokenizer_file_limit
from ..models import folder_files
from ..models.folder_data import DATA_FILES
from .oracle import NOW, ChatAnswer, LineChild
from .original import MAX_TEMPLATE_BYTES, extra_templates

DEFAULT_TIMEOUT = 30.0
DEFAULT_MEMORY = 2 << 30  # bytes of heap (RLIMIT_DATA): transformers and a 128k vocabulary load in under 1 GiB
LOAD_TIMEOUT = 120.0
EXTRA = "pip install 'gguf-parity[reference]'"
VOCAB_SUFFIXES = (".model", ".tiktoken", ".vocab", ".spm")  # a slow tokenizer's vocabulary files


def missing() -> str | None:
    """Why the original's side cannot run here (transformers or jinja2 missing), or None."""
    need = [name for name in ("transformers", "jinja2", "tokenizers") if importlib.util.find_spec(name) is None]
    return f"the original's chat templates need {', '.join(need)}: {EXTRA}" if need else None


def tokenizer_files(folder: Path) -> list[tuple[str, int]]:
    """What the child is given of `folder`, each with its size limit: the data files a tokenizer is read
    from (`harness.models.folder_data.DATA_FILES`), the folder's other vocabulary files (`VOCAB_SUFFIXES`:
    a slow tokenizer's `spiece.model`, ...) and its named chat templates. Never its code or weights."""
    names = list(DATA_FILES)
    with os.scandir(folder) as entries:
        names += sorted(e.name for e in entries if e.name.endswith(VOCAB_SUFFIXES) and e.name not in DATA_FILES)
    names += extra_templates(folder)
    return [(name, MAX_TEMPLATE_BYTES if name.endswith(".jinja") else tokenizer_file_limit(Path(name)))
            for name in names]


class OriginalChat(LineChild):
    """One transformers child serving the original folder's `apply_chat_template`."""

    what = "the transformers child"

    def __init__(self, folder: Path, *, timeout: float = DEFAULT_TIMEOUT, memory: int = DEFAULT_MEMORY) -> None:
        reason = missing()
        if reason:
            raise SetupError(reason)
        self.folder, self.timeout, self.memory = folder, timeout, memory
        self.child = None
        self.copy = folder_files.private_copy(folder, tokenizer_files(folder))

    def _argv(self) -> list[str]:
        return [sys.executable, "-m", "harness.chat.transformers_child", str(self.copy), "--memory", str(self.memory),
                "--parent", str(os.getpid())]

    def close(self) -> None:
        super().close()
        folder_files.remove_copy(self.copy)

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
        if hello.get("setup"):  # its memory cap could not be set: the harness's set-up, exit 2
            child.close()
            raise SetupError(f"the transformers child: {hello.get('error')}")
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
