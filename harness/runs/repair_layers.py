"""Every layer of one GGUF held against its original, so that `repair` can tell a fix that makes one worse.

`measure(gguf, cases, original)` asks llama.cpp (oracle workers, and one worker for the vocabulary) and
the original (its reference child, `OriginalSide`) and counts, per layer, the items where the two differ:

    ids                (case, add_special x parse_special) pairs whose ids differ, and cases llama.cpp gave
                       no ids for
    detokenize         llama.cpp's detokenize of its own ids against the original's decode of the same ids
                       (`harness.references.decoding`): each of a case's 16 detokenizations that `differ`
    pieces             each token alone, under unparse_special off and on: llama.cpp's piece against the
                       original's decode of that one id (`classify.decode_outcome`); llama.cpp's piece with
                       special off is its piece with special on, or nothing for an UNKNOWN or CONTROL token
                       (`token_to_piece`'s rule), read from llama.cpp's own attributes
    specials           each special id and add_bos / add_eos that the original states
                       (`harness.references.stated`) and llama.cpp reads otherwise
    end-of-generation  the tokens in llama.cpp's end-of-generation set and not among the original's end
                       tokens, or the reverse
    messages           the conversations the original's chat template renders otherwise than llama.cpp's chat
                       path on the GGUF (`harness.chat.three_way`, given by the command as `messages`); not
                       measured when the original has no template

Each layer keeps the items that differ, so two measures compare item by item: `worse(before, after)` names
each layer with a difference after that it did not have before (a count that only went down is no
regression; one that traded old differences for new ones is). The original's answers that no GGUF key
changes (its ids, its decode of each token, what it states) are asked once (`OriginalSide`); only its
decode of llama.cpp's ids is asked again for each file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizer import Tokenizer

from ..errors import SetupError
from ..golden.records import evaluate_case
from ..oracle.session import OracleCrash, OracleRefusal, OracleSession
from ..oracle.workers import run_cases
from ..references import decoding, specs
from ..references.classify import FLAG_PAIRS, decode_outcome, outcome_ids
from ..references.stated import STATED_ROLES, stated_specials
from ..subjects.client import ChildFailure
from ..subjects.guard import EngineLoadError
from ..subjects.protocol import DECODE_TEXTS, unb64

Log = Callable[[str], None]
LAYERS = ("ids", "detokenize", "pieces", "specials", "eog", "messages")
LABELS = {"ids": "ids", "detokenize": "detokenize", "pieces": "pieces", "specials": "specials",
          "eog": "end-of-generation", "messages": "messages"}
SPECIAL_ATTRS = 1 | 8  # llama_token_attr UNKNOWN | CONTROL: no piece unless special is asked
PIECE_FLAGS = ((False, False), (False, True))  # (remove_special, unparse_special) of one token's decode
CHUNK = 2048  # ids per decode request of the pieces layer
EXAMPLES = 5


@dataclass(frozen=True)
class Layer:
    """One layer of one file: how many items were compared, the ones that differ, or why it was not measured."""

    checked: int = 0
    differ: frozenset[str] = frozenset()
    examples: tuple[str, ...] = ()
    not_measured: str = ""

    @property
    def measured(self) -> bool:
        return not self.not_measured

    def as_dict(self) -> dict:
        if not self.measured:
            return {"not_measured": self.not_measured}
        return {"checked": self.checked, "differ": len(self.differ), "examples": list(self.examples[:EXAMPLES])}


MessagesHook = Callable[[Path], Layer]


@dataclass
class Check:
    """One GGUF's check: per case, the flag pairs where llama.cpp and the original differ; the cases where ours
    and llama.cpp differ (parity, asked of the file `repair` writes); every layer (`LAYERS`)."""

    conversion: dict[str, list[tuple[bool, bool]]] = field(default_factory=dict)
    parity: list[str] = field(default_factory=list)
    compared: int = 0
    llama_failed: list[str] = field(default_factory=list)  # cases llama.cpp gave no ids for (a crash, or no load)
    layers: dict[str, Layer] = field(default_factory=dict)
    records: list[dict] = field(default_factory=list, repr=False)  # llama.cpp's, per case (not written out)

    def new_failures(self, before: Check) -> list[str]:
        """Cases llama.cpp answered on `before`'s file and not on this one."""
        return [c for c in self.llama_failed if c not in set(before.llama_failed)]

    def as_dict(self) -> dict:
        return {"compared": self.compared, "conversion_differ": len(self.conversion),
                "parity_differ": len(self.parity), "parity_cases": self.parity[:20],
                "llama_failed": self.llama_failed[:20],
                "layers": {name: layer.as_dict() for name, layer in self.layers.items()}}


class OriginalSide:
    """The original, asked once for what no GGUF key changes; its child kept open to decode llama.cpp's ids."""

    def __init__(self, spec: str, gguf: Path, cases: list[dict], *, args: dict[str, str], timeout: float,
                 log: Log) -> None:
        self.spec = spec
        try:
            self.engine = specs.reference_factory(spec, args=args, timeout=timeout)(gguf)
        except EngineLoadError as exc:
            raise SetupError(f"reference {spec}: could not load: {exc}") from None
        log(f"  the original on {len(cases)} cases")
        self.outcomes = dict(zip((str(c["id"]) for c in cases), self.engine.evaluate_many(cases), strict=True))
        self.stated = stated_specials(spec, args)
        self._pieces: list[list[dict | None]] | str | None = None

    def __enter__(self) -> OriginalSide:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.close()

    def pieces(self, n_tokens: int, log: Log) -> list[list[dict | None]] | str:
        """Per token, the original's decode of that one id under `PIECE_FLAGS` (None: not applicable); or why
        it could not be asked. Asked once: the ids are the same in every file."""
        if self._pieces is None:
            log(f"  the original decodes each of {n_tokens:,} tokens alone")
            try:
                self._pieces = [row for start in range(0, n_tokens, CHUNK)
                                for row in self._decode_chunk(range(start, min(start + CHUNK, n_tokens)))]
            except (ChildFailure, ValueError, KeyError, TypeError) as exc:
                self._pieces = f"the original's decode failed: {type(exc).__name__}: {str(exc)[:200]}"
        return self._pieces

    def _decode_chunk(self, ids: range) -> list[list[dict | None]]:
        reply = self.engine.call({"op": "decode", "ids": [[t] for t in ids], "flags": [list(f) for f in PIECE_FLAGS]})
        results = reply.get("results") if reply.get("ok") else None
        if not isinstance(results, list) or len(results) != len(ids):
            raise ValueError(f"decode: {str(reply.get('error') or results)[:200]}")
        return [[None if not isinstance(item, dict) or "error" in item else
                 {name: unb64(item[name]).decode("utf-8", "surrogatepass") for name in DECODE_TEXTS}
                 for item in items] for items in results]


def measure(gguf: Path, cases: list[dict], original: OriginalSide, *, jobs: int, timeout: float, log: Log,
            ours: bool = False, messages: MessagesHook | None = None) -> Check:
    """Every layer of `gguf` against the original (see the module docstring); `ours`: also our engine's ids
    against llama.cpp's on every case (parity)."""
    log(f"  llama.cpp on {len(cases)} cases ({gguf.name})")
    records = run_cases(gguf, cases, jobs=jobs, timeout=timeout)
    result = Check(records=records)
    _ids(result, cases, records, original)
    if ours:
        engine = Tokenizer.from_gguf(gguf)
        result.parity = [str(c["id"]) for c, r in zip(cases, records, strict=True)
                         if outcome_ids(r) is not None and _ours(engine, c) != outcome_ids(r)]
    result.layers["detokenize"] = _detokenize(cases, records, original)
    vocab = _llama_vocab(gguf, timeout)
    if isinstance(vocab, str):
        for name in ("pieces", "specials", "eog"):
            result.layers[name] = Layer(not_measured=vocab)
    else:
        result.layers["pieces"] = _pieces(vocab, original, log)
        result.layers["specials"] = _specials(vocab["vocab"], original.stated)
        result.layers["eog"] = _eog(vocab["vocab"], original.stated)
    result.layers["messages"] = messages(gguf) if messages is not None else Layer(
        not_measured="no chat template check for this original")
    return result


def _ids(result: Check, cases: list[dict], records: list[dict], original: OriginalSide) -> None:
    differ: set[str] = set()
    examples: list[str] = []
    for case, record in zip(cases, records, strict=True):
        case_id = str(case["id"])
        llama, theirs = outcome_ids(record), outcome_ids(original.outcomes.get(case_id))
        if llama is None:
            result.llama_failed.append(case_id)
            differ.add(f"{case_id}|no ids")
            continue
        if theirs is None:
            continue
        result.compared += 1
        pairs = [p for p, a, b in zip(FLAG_PAIRS, llama, theirs, strict=True)
                 if a is not None and b is not None and a != b]
        if pairs:
            result.conversion[case_id] = pairs
            differ.update(f"{case_id}|{int(a)}{int(p)}" for a, p in pairs)
            examples.append(f"{case_id}: {len(pairs)} flag pair(s)")
    result.layers["ids"] = Layer(result.compared * len(FLAG_PAIRS), frozenset(differ), tuple(examples[:EXAMPLES]))


def _ours(engine: Tokenizer, case: dict) -> list | None:
    try:
        return outcome_ids(evaluate_case(engine, case))
    except Exception:  # noqa: BLE001 - our engine failing on a case is a parity difference, counted as one
        return None


def _detokenize(cases: list[dict], records: list[dict], original: OriginalSide) -> Layer:
    """Each detokenization of llama.cpp's ids that the original decodes otherwise (`decode_outcome` differ)."""
    checked, failed = 0, 0
    differ: set[str] = set()
    examples: list[str] = []
    for case, record in zip(cases, records, strict=True):
        decoded = decoding.ask(original.engine, record)
        if not isinstance(decoded, decoding.CaseDecode):
            failed += decoded is not None
            continue
        for pair, detoks in enumerate(decoded.pairs):
            for detok in detoks:
                if detok.outcome == "not_applicable":
                    continue
                checked += 1
                if _differs(detok.outcome):
                    differ.add(f"{case['id']}|{pair}|{int(detok.remove_special)}{int(detok.unparse_special)}")
                    shown = (f"{case['id']}: llama.cpp {detok.llama.decode('utf-8', 'replace')[:40]!r}, "
                             f"original {(detok.original or {}).get('applied', '')[:40]!r}")
                    if len(examples) < EXAMPLES and shown not in examples:
                        examples.append(shown)
    if failed and not checked:
        return Layer(not_measured=f"the original could not decode on {failed} case(s)")
    return Layer(checked, frozenset(differ), tuple(examples))


def _differs(outcome: str) -> bool:
    """A decode that is not the original's: `differ`, and a difference `decode_outcome` explains by a known llama.cpp
    behaviour (an explanation says why the two differ; it does not make them agree)."""
    return outcome == "differ" or outcome.startswith("explained:")


def _llama_vocab(gguf: Path, timeout: float) -> dict | str:
    """llama.cpp's vocabulary record, every token's piece (special on) and attributes; or why it has none."""
    try:
        with OracleSession(gguf, timeout=max(timeout, 300.0)) as session:
            return {"vocab": session.call("vocab"), "pieces": session.call("pieces"), "attrs": session.call("attrs")}
    except (OracleCrash, OracleRefusal, OSError) as exc:
        return f"llama.cpp gave no vocabulary: {str(exc)[:200]}"


def _pieces(vocab: dict, original: OriginalSide, log: Log) -> Layer:
    pieces, attrs = vocab["pieces"], vocab["attrs"]
    theirs = original.pieces(len(pieces), log)
    if isinstance(theirs, str):
        return Layer(not_measured=theirs)
    checked = 0
    differ: set[str] = set()
    examples: list[str] = []
    for token, (piece, attr, decodes) in enumerate(zip(pieces, attrs, theirs, strict=False)):
        for (_, unparse), decoded in zip(PIECE_FLAGS, decodes, strict=True):
            llama = piece if unparse or not int(attr) & SPECIAL_ATTRS else b""
            outcome = decode_outcome(llama, decoded)
            if outcome == "not_applicable":
                continue
            checked += 1
            if _differs(outcome):
                differ.add(f"{token}|{int(unparse)}")
                if len(examples) < EXAMPLES:
                    shown = llama.decode("utf-8", "replace")
                    examples.append(f"token {token} (unparse_special {'on' if unparse else 'off'}): llama.cpp "
                                    f"{shown!r}, original {(decoded or {}).get('applied')!r}")
    return Layer(checked, frozenset(differ), tuple(examples))


def _specials(record: dict, stated: dict) -> Layer:
    """Each role and add flag the original states that llama.cpp reads otherwise."""
    differ: set[str] = set()
    examples: list[str] = []
    checked = 0
    read = record.get("specials") or {}
    for role in STATED_ROLES:
        if role in stated["ids"]:
            checked += 1
            theirs, ours = stated["ids"][role], read.get(role)
            if ours is None or int(ours) != theirs:
                differ.add(role)
                examples.append(f"{role}: llama.cpp {ours}, original {theirs}")
    for flag in ("add_bos", "add_eos"):
        if stated.get(flag) is not None:
            checked += 1
            if bool(record.get(flag)) != stated[flag]:
                differ.add(flag)
                examples.append(f"{flag}: llama.cpp {bool(record.get(flag))}, original {stated[flag]}")
    if not checked:
        return Layer(not_measured="the original states no special token and no add_bos / add_eos")
    return Layer(checked, frozenset(differ), tuple(examples))


def _eog(record: dict, stated: dict) -> Layer:
    """The tokens in one side's end-of-generation set only (the original's: its EOS)."""
    llama, theirs = set(record.get("eog") or []), set(stated.get("eog") or [])
    if not theirs:
        return Layer(not_measured="the original names no end-of-generation token")
    only = sorted(llama ^ theirs)
    examples = tuple(f"token {t}: end of generation in {'llama.cpp' if t in llama else 'the original'} only"
                     for t in only[:EXAMPLES])
    return Layer(len(llama | theirs), frozenset(str(t) for t in only), examples)


def worse(before: Check, after: Check) -> dict[str, dict]:
    """Each layer that differs after on an item it agreed on before (or is no longer measured):
    `{layer: {"before", "after", "new", "examples"}}`; empty when no layer is worse."""
    out: dict[str, dict] = {}
    for name in LAYERS:
        a, b = before.layers.get(name), after.layers.get(name)
        if a is None or not a.measured:
            continue
        if b is None or not b.measured:
            out[name] = {"before": len(a.differ), "after": None, "new": None,
                         "examples": [b.not_measured if b is not None else "not measured"]}
            continue
        new = b.differ - a.differ
        if new:
            shown = [e for e in b.examples if e not in a.examples][:EXAMPLES]
            out[name] = {"before": len(a.differ), "after": len(b.differ), "new": len(new), "examples": shown}
    return out


def worse_line(found: dict[str, dict]) -> str:
    """`detokenize 0 -> 1,426 (1,426 new); pieces 0 -> 30 (30 new)`."""
    parts = []
    for name, row in found.items():
        if row["after"] is None:
            parts.append(f"{LABELS[name]} no longer measured ({row['examples'][0]})")
        else:
            parts.append(f"{LABELS[name]} {row['before']:,} -> {row['after']:,} ({row['new']:,} new)")
    return "; ".join(parts)


def table(before: Check, after: Check | None) -> list[dict[str, Any]]:
    """Per layer: the items that differ before and after (None: not measured), with what was compared."""
    rows = []
    for name in LAYERS:
        a = before.layers.get(name)
        b = after.layers.get(name) if after is not None else None
        shown = b if b is not None else a
        rows.append({"layer": name, "label": LABELS[name],
                     "before": len(a.differ) if a is not None and a.measured else None,
                     "after": len(b.differ) if b is not None and b.measured else None,
                     "checked": shown.checked if shown is not None and shown.measured else None,
                     "not_measured": next((x.not_measured for x in (b, a) if x is not None and not x.measured), "")})
    return rows
