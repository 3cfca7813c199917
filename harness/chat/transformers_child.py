"""The original's side of the message check: transformers' `apply_chat_template` in a bounded child.

    python -m harness.chat.transformers_child FOLDER --memory BYTES   # one JSON line in, one out

What it is: `AutoTokenizer.from_pretrained(FOLDER)` offline, no remote code, then for each
request `apply_chat_template(messages, tools=..., add_generation_prompt=..., tokenize=False)`
for the text and `tokenize=True, return_dict=False` for the ids, exactly as a user of
transformers calls them (its special tokens are the template's variables; no BOS is added by
the tokenizer, transformers passes `add_special_tokens=False`). The clock is fixed: the
template's `strftime_now` reads the request's `now` (UTC), as llama.cpp's helper does.

Bounds: the heap is capped (`--memory` bytes of RLIMIT_DATA: what it allocates, not the shared
libraries it maps, so torch's large libraries load where transformers imports it; an inherited
lower limit stays) before transformers is imported, so a template that builds a huge list or
string fails with MemoryError in here; the parent (`harness.chat.transformers_side`) kills the
child at its time limit, and the child dies with the parent (`--parent PID`). Answers:
{"ok": true, "text", "ids"} or {"ok": false, "error", "raised"} (`raised`: the template
called raise_exception).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from typing import Any

from harness.environment import LimitError, die_with_parent_signal, lower_limit


def _fixed_clock(module: Any, now: list[float]) -> None:
    """Make the module's `datetime.now()` return the current request's `now` (strftime_now reads it)."""
    class Fixed(dt.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Fixed:
            return cls.fromtimestamp(now[0], tz or dt.UTC)
    module.datetime = Fixed


def load(folder: str) -> Any:
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)


def answer(tok: Any, req: dict[str, Any]) -> dict[str, Any]:
    from jinja2.exceptions import TemplateError
    kwargs = {"tools": req.get("tools"), "add_generation_prompt": bool(req.get("add_generation_prompt")),
              "chat_template": req.get("template") or None, **(req.get("variables") or {})}
    try:
        text = tok.apply_chat_template(req["messages"], tokenize=False, **kwargs)
        ids = tok.apply_chat_template(req["messages"], tokenize=True, return_dict=False, **kwargs)
    except TemplateError as exc:
        raised = type(exc).__name__ == "TemplateError"  # raise_exception raises the base class itself
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000], "raised": raised}
    except MemoryError:
        return {"ok": False, "error": "MemoryError: the template passed the child's memory limit", "raised": False}
    except Exception as exc:  # noqa: BLE001 - whatever the template or transformers does is this case's answer
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000], "raised": False}
    return {"ok": True, "text": text, "ids": [int(i) for i in ids]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.chat.transformers_child")
    parser.add_argument("folder")
    parser.add_argument("--memory", type=int, required=True, help="heap cap in bytes (RLIMIT_DATA)")
    parser.add_argument("--parent", type=int, default=None, metavar="PID", help="die when this process does")
    args = parser.parse_args(argv)
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # transformers' prints go to stderr, the protocol keeps stdout
    if args.parent is not None:
        die_with_parent_signal()
        if os.getppid() != args.parent:
            return 1
    try:
        lower_limit("DATA", args.memory)
    except LimitError as exc:  # the harness's set-up, not the folder's
        out.write(json.dumps({"ok": False, "fatal": True, "setup": True, "error": str(exc)}) + "\n")
        out.flush()
        return 2
    try:
        tok = load(args.folder)
    except Exception as exc:  # noqa: BLE001 - a folder transformers cannot load is reported, one line
        out.write(json.dumps({"ok": False, "fatal": True, "error": f"{type(exc).__name__}: {exc}"[:2000]}) + "\n")
        out.flush()
        return 2
    from transformers.utils import chat_template_utils
    now = [0.0]
    _fixed_clock(chat_template_utils, now)
    out.write(json.dumps({"ok": True, "ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        now[0] = float(req.get("now", 0))
        out.write(json.dumps(answer(tok, req)) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
