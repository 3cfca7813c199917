"""The engine protocol, version 1 (docs/engine-protocol.md): constants and the serving side.

`Server` answers requests for one engine object; `serve()` runs it over
JSON lines on a pair of binary streams. `harness.children.python_child` is a
thin shell around them; `harness.subjects.client` is the harness's side.

Everything the engine does is caught per input (including `SystemExit` and
`KeyboardInterrupt`: they come from engine code, the child ignores SIGINT)
and answered as an error object, so only a real crash or hang ends a request
without a reply.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .capabilities import CAPABILITIES
from .guard import EngineLoadError, checked_engine
from .records import (
    NotApplicable,
    engine_info,
    engine_input,
    error_fields,
    offered_fields,
    output_bytes,
    plain_ids,
    score_json,
    vocab_columns,
)

PROTOCOL = 1
TOKENIZE_BATCH = 64
VOCAB_SLICE = 32768
BYTE_FIELDS = ("text", "piece", "piece_special")
DECODE_TEXTS = ("raw", "cleaned", "applied")  # a reference's decode (harness.references.classify.decode_outcome)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: object) -> bytes:
    """Strict base64 (`binascii.Error` or `TypeError` on anything else)."""
    if not isinstance(text, str):
        raise TypeError(f"expected a base64 string, got {type(text).__name__}")
    return base64.b64decode(text, validate=True)


def error_object(exc: BaseException) -> dict:
    fields = error_fields(exc)
    name = getattr(exc, "error_type", None) or type(exc).__name__
    return {"type": name, "message": str(exc), "traceback": fields["traceback"]}


class Server:
    """One engine, loaded on `hello`, answering `tokenize`, `vocab`, `shutdown` (and a reference's `decode`,
    `normalize`)."""

    def __init__(self, factory: Callable[..., object], source: str) -> None:
        self.factory, self.source = factory, source
        self.engine: Any = None
        self.caps: frozenset[str] = frozenset()
        self.done = False

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        method = {"hello": self.hello, "tokenize": self.tokenize, "vocab": self.vocab, "decode": self.decode,
                  "normalize": self.normalize, "shutdown": self.shutdown}.get(op)  # type: ignore[arg-type]
        if method is None:
            return {"ok": False, "error": {"type": "UnknownOp", "message": f"unknown op {op!r}", "traceback": ""}}
        if op in ("tokenize", "vocab", "decode", "normalize") and self.engine is None:
            return {"ok": False, "error": {"type": "NotLoaded", "message": "no hello yet", "traceback": ""}}
        try:
            return {"ok": True, **method(request)}
        except BaseException as exc:  # noqa: BLE001 - whatever the engine raises goes back as an error
            return {"ok": False, "error": error_object(exc)}

    def hello(self, request: dict) -> dict:
        args = {str(k): str(v) for k, v in (request.get("args") or {}).items()}
        try:
            engine, caps = checked_engine(self.factory(Path(request["model"]), **args), self.source)
        except EngineLoadError as exc:
            name, _, message = str(exc).partition(": ")
            raise NamedError(name, message) from None
        self.engine, self.caps = engine, caps
        return {"protocol": PROTOCOL, "engine": self.source,
                "capabilities": [c for c in CAPABILITIES if c in caps], "info": engine_info(engine, caps)}

    def tokenize(self, request: dict) -> dict:
        flags = [tuple(pair) for pair in request["flags"]]
        detok = [tuple(pair) for pair in request.get("detokenize") or []]
        return {"results": [self._one(unb64(item), flags, detok) for item in request["inputs"]]}

    def _one(self, data: bytes, flags: list, detok: list) -> list[dict]:
        text = engine_input(self.caps, data)
        if isinstance(text, NotApplicable):
            return [{"error": {"type": "NotApplicable", "message": text.reason, "traceback": ""}}] * len(flags)
        out = []
        for add_special, parse_special in flags:
            try:
                ids = plain_ids(self.engine.tokenize(text, add_special=add_special, parse_special=parse_special))
            except BaseException as exc:  # noqa: BLE001
                out.append({"error": error_object(exc)})
                continue
            result: dict = {"ids": ids}
            if detok:
                result["detokenize"] = self._detok(ids, detok)
            out.append(result)
        return out

    def _detok(self, ids: list[int], pairs: list) -> list:
        out: list = []
        for remove_special, unparse_special in pairs:
            try:
                value = self.engine.detokenize(ids, remove_special=remove_special, unparse_special=unparse_special)
                out.append(b64(output_bytes(value, "detokenize")))
            except BaseException as exc:  # noqa: BLE001
                out.append({"error": error_object(exc)})
        return out

    def decode(self, request: dict) -> dict:
        """A reference's own decode of given ids (docs/engine-protocol.md, `decode`): three texts per flag pair.

        Only an engine with a `decode(ids, remove_special=, unparse_special=)` method answers it
        (the reference engines, `harness.references`); a pair it cannot express comes back as an
        error of type `NotApplicable`, like any error, per id list and pair.
        """
        decode = getattr(self.engine, "decode", None)
        if not callable(decode):
            raise NamedError("NotOffered", "this engine has no decode (only reference engines answer it)")
        pairs = [tuple(pair) for pair in request["flags"]]
        return {"results": [[self._decode_one(decode, plain_ids(ids), rs, us) for rs, us in pairs]
                            for ids in request["ids"]]}

    @staticmethod
    def _decode_one(decode: Callable[..., Any], ids: list[int], remove_special: bool, unparse_special: bool) -> dict:
        try:
            texts = decode(ids, remove_special=bool(remove_special), unparse_special=bool(unparse_special))
            return {name: b64(output_bytes(texts[name], "decode")) for name in DECODE_TEXTS}
        except BaseException as exc:  # noqa: BLE001
            return {"error": error_object(exc)}

    def normalize(self, request: dict) -> dict:
        """A reference's own normalizer on given texts (docs/engine-protocol.md, `normalize`): the text it
        tokenizes, spaces as spaces. Only an engine with a `normalize(text)` method answers it."""
        normalize = getattr(self.engine, "normalize", None)
        if not callable(normalize):
            raise NamedError("NotOffered", "this engine has no normalize (only reference engines answer it)")
        out: list = []
        for item in request["inputs"]:
            try:
                out.append(b64(output_bytes(normalize(unb64(item).decode("utf-8", "surrogatepass")), "normalize")))
            except BaseException as exc:  # noqa: BLE001
                out.append({"error": error_object(exc)})
        return {"results": out}

    def vocab(self, request: dict) -> dict:
        fields = [f for f in request["fields"] if f in offered_fields(self.caps)]
        columns = vocab_columns(self.engine, fields, int(request["start"]), int(request["count"]))
        for name in BYTE_FIELDS:
            if name in columns:
                columns[name] = [b64(v) for v in columns[name]]
        if "score" in columns:
            columns["score"] = [score_json(v) for v in columns["score"]]
        return columns

    def shutdown(self, request: dict) -> dict:
        self.done = True
        close = getattr(self.engine, "close", None)
        if callable(close):
            close()
        return {}


class NamedError(Exception):
    """An error reported under a given type name (a load failure already phrased "Type: reason")."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.error_type = name


def reply_line(request_id: object, reply: dict) -> bytes:
    return (json.dumps({"id": request_id, **reply}, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")


def serve(server: Server, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """Answer JSON-lines requests until `shutdown` or end of input; returns the exit status (0)."""
    for line in stdin:
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("a request must be a JSON object")
        except (ValueError, binascii.Error) as exc:
            stdout.write(reply_line(None, {"ok": False, "error": error_object(exc)}))
            stdout.flush()
            continue
        reply = server.handle(request)
        stdout.write(reply_line(request.get("id"), reply))
        stdout.flush()
        if server.done:
            break
    return 0
