"""The original's decode against llama.cpp's detokenize, case by case .

What is decoded: **llama.cpp's ids**. For each of a case's four (add_special,
parse_special) id lists from llama.cpp, the reference's library decodes those
same ids under llama.cpp's four (remove_special, unparse_special) pairs, and
each result is held against llama.cpp's detokenize of them
(`classify.decode_outcome`). Both decoders get the same ids, so only decoding is
compared: a tokenizing difference is already a conversion finding of its own
(decoding the reference's own ids would count it twice), and a case the
reference cannot tokenize (bytes that are not UTF-8, a flag pair it cannot
express) is still decoded.

The request is the engine protocol's `decode` op, which only reference
children answer (docs/engine-protocol.md): one request per case, its distinct id
lists, every pair. A pair the library cannot express comes back as a
`NotApplicable` error for that id list and pair alone (not applicable, never a
pass); any other error, or a child that fails the request twice (it is
restarted and asked once more), is a reference error for the whole case.

Per case 16 detokenizations are classified (4 id lists x 4 pairs):
`agree`, `explained:clean_up_tokenization_spaces`, `explained:leading_space`,
`differ` (a decode conversion finding), `not_applicable`.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import Any

from ..golden.records import field_bytes
from ..subjects.client import ChildFailure
from ..subjects.protocol import DECODE_TEXTS, unb64
from ..subjects.records import EngineError
from .classify import FLAG_PAIRS as FLAGS
from .classify import decode_outcome

NOT_APPLICABLE_TYPE = "NotApplicable"


@dataclass(frozen=True)
class Detok:
    """One of llama.cpp's detokenizations beside the reference's decode of the same ids."""

    remove_special: bool
    unparse_special: bool
    llama: bytes
    original: dict[str, str] | None  # {"raw", "cleaned", "applied"}; None: not applicable
    reason: str | None  # why not applicable (the library's NotApplicable message)
    outcome: str  # classify.decode_outcome


@dataclass(frozen=True)
class CaseDecode:
    """A case's 16 detokenizations: `pairs[i]` for llama.cpp's ids under `FLAGS[i]`, four `Detok` each."""

    pairs: tuple[tuple[Detok, ...], ...]

    def outcomes(self) -> list[str]:
        return [d.outcome for pair in self.pairs for d in pair]


def ask(client: Any, record: dict | None) -> CaseDecode | EngineError | None:
    """The reference's decode of llama.cpp's ids in `record` (None when llama.cpp has no record)."""
    if not isinstance(record, dict) or not isinstance(record.get("encode"), list):
        return None
    lists = [list(item["ids"]) for item in record["encode"]]
    distinct = [list(ids) for ids in dict.fromkeys(tuple(ids) for ids in lists)]
    message = {"op": "decode", "ids": distinct, "flags": [list(f) for f in FLAGS]}
    try:
        reply = _request(client, message)
    except ChildFailure as failure:
        return EngineError(f"EngineProcess: {failure}", "", "decode")
    if not reply.get("ok"):
        return _error(reply.get("error"))
    results = reply.get("results")
    if not isinstance(results, list) or len(results) != len(distinct):
        return EngineError(f"ProtocolError: decode: {len(distinct)} id lists, results {str(results)[:200]}", "",
                           "decode")
    answers: dict[tuple[int, ...], list[tuple[dict[str, str] | None, str | None]]] = {}
    for ids, items in zip(distinct, results, strict=True):
        got = _answers(items)
        if isinstance(got, EngineError):
            return got
        answers[tuple(ids)] = got
    return CaseDecode(tuple(_pair(item, answers[tuple(item["ids"])]) for item in record["encode"]))


def _request(client: Any, message: dict) -> dict:
    """The reply; a failed request is asked once more of the restarted child (`ChildFailure` again: given up)."""
    try:
        return client.call(message)
    except ChildFailure as first:
        try:
            return client.call(message)
        except ChildFailure as again:
            raise ChildFailure(f"{first}; re-checked in a fresh process: {again}") from None


def _answers(items: object) -> list[tuple[dict[str, str] | None, str | None]] | EngineError:
    """(texts, None) or (None, reason not applicable) per flag pair; an `EngineError` for anything else."""
    if not isinstance(items, list) or len(items) != len(FLAGS):
        return EngineError(f"ProtocolError: decode: expected {len(FLAGS)} results, got {str(items)[:200]}", "",
                           "decode")
    out: list[tuple[dict[str, str] | None, str | None]] = []
    for item in items:
        error = item.get("error") if isinstance(item, dict) else item
        if isinstance(error, dict) and error.get("type") == NOT_APPLICABLE_TYPE:
            out.append((None, str(error.get("message", ""))))
            continue
        if error is not None:
            return _error(error)
        try:
            texts = {name: unb64(item[name]).decode("utf-8", "surrogatepass") for name in DECODE_TEXTS}
        except (KeyError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
            return EngineError(f"ProtocolError: decode: {type(exc).__name__}: {exc}", "", "decode")
        out.append((texts, None))
    return out


def _pair(item: dict, answers: list[tuple[dict[str, str] | None, str | None]]) -> tuple[Detok, ...]:
    """llama.cpp's four detokenizations of one id list beside the reference's four decodes."""
    llama = {(d["remove_special"], d["unparse_special"]): field_bytes(d) for d in item.get("detokenize", [])}
    out = []
    for (remove_special, unparse_special), (texts, reason) in zip(FLAGS, answers, strict=True):
        ours = llama.get((remove_special, unparse_special))
        out.append(Detok(remove_special, unparse_special, ours if ours is not None else b"", texts, reason,
                         decode_outcome(ours, texts)))
    return tuple(out)


def _error(obj: object) -> EngineError:
    if not isinstance(obj, dict):
        return EngineError(f"ProtocolError: expected an error object, got {str(obj)[:200]}", "", "decode")
    return EngineError(f"{obj.get('type', 'Error')}: {obj.get('message', '')}", str(obj.get("traceback", "")),
                       "decode")


def shown(detok: Detok) -> dict:
    """One differing detokenization for a card: both texts byte-exact (hex), and for display only with
    invalid UTF-8 replaced (`errors='replace'`)."""
    original = detok.original or {}
    applied = original.get("applied", "").encode("utf-8", "surrogatepass")
    return {"remove_special": detok.remove_special, "unparse_special": detok.unparse_special,
            "llama_hex": detok.llama.hex(), "llama_text": detok.llama.decode("utf-8", "replace"),
            "original_hex": applied.hex(), "original_text": applied.decode("utf-8", "replace"),
            "original_raw": original.get("raw"), "original_cleaned": original.get("cleaned")}
