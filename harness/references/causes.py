"""The cause of each conversion finding, found by experiment: the smallest change that makes the case agree.

A conversion finding is a case where llama.cpp (on the GGUF) and the original
give different ids. For each such case, `Finder.explain` tries the candidate
changes of `harness.references.cause_candidates` (a GGUF key rewritten, a
llama.cpp behaviour switched on in the original, a class of code points
rewritten for both), alone and then two at a time, and names the smallest set
after which the two agree on every flag pair the case differed on. What it
records is the evidence: the ids of both sides after the change. When several
sets of the same size explain a case, all are kept (`sets`) and the first, in
the candidates' order (GGUF keys, then the original's switches, then the
input), is its `cause`: a change `repair` can write comes first. A case that
no set makes agree is `unexplained`, with the candidates tried; a case that
agrees when asked again, unchanged, is `agrees-unchanged` (never a cause).

Both sides are asked as the three-way run asks them: llama.cpp in an oracle
worker (`harness.oracle.session.OracleSession`) on the GGUF or on a rewritten
copy (`harness.models.gguf_rewrite`), the original in its reference child
(`harness.references.specs`) on its file or on a changed copy. Each variant is
opened once, on first use, and closed by `close()`.

    with Finder(gguf, "hf:DIR", tmp) as finder:
        finder.explain({"id": "c", "text": " jeho"}, [(False, False)]).cause   # 'pre-name'
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizer import Tokenizer
from tokenizer.gguf.reader import read

from ..models.gguf_rewrite import rewrite_metadata
from ..oracle.session import OracleCrash, OracleRefusal, OracleSession
from ..subjects.client import ChildFailure
from ..subjects.protocol import b64, unb64
from . import cause_candidates as cc
from . import class_experiments as cx
from .classify import FLAG_PAIRS, outcome_ids
from .gguf_keys import read_spm
from .specs import parse, reference_factory

MAX_SET = 2  # changes tried together at most
MAX_CASES = 300  # cases searched per model; the rest are marked not traced
Pair = tuple[bool, bool]
UNEXPLAINED = "unexplained"
NOT_TRACED = "not traced"  # past MAX_CASES, a bytes input, or a search that could not run: no experiment ran
AGREES = "agrees-unchanged"


@dataclass(frozen=True)
class Explanation:
    """A case's cause: the smallest sets of candidates that make it agree, with the ids after the first."""

    cause: str
    sets: tuple[tuple[str, ...], ...] = ()
    evidence: tuple[dict, ...] = ()
    tried: tuple[str, ...] = ()
    sides: dict[str, str] = field(default_factory=dict)  # candidate -> gguf / original / input
    failed: dict[str, str] = field(default_factory=dict)  # candidate set -> why it could not be tried
    kind: str = cx.UNEXPLAINED  # the class of difference (`class_experiments.class_of`, `pieces_class`)
    detail: dict = field(default_factory=dict)  # what the experiment changed (the code points substituted)

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"cause": self.cause, "class": self.kind, "sets": ["+".join(s) for s in self.sets],
                               "evidence": list(self.evidence)}
        if self.detail:
            out["detail"] = dict(self.detail)
        if self.sides:
            out["sides"] = dict(self.sides)
        if self.cause == UNEXPLAINED:
            out["tried"] = list(self.tried)
        if self.failed:
            out["failed"] = dict(self.failed)
        return out


class Finder:
    """The candidates for one GGUF and its original, and the two sides under each set of them."""

    def __init__(self, gguf: Path, spec: str, tmp: Path, *, args: dict[str, str] | None = None,
                 timeout: float = 60.0) -> None:
        self.gguf, self.tmp, self.timeout = Path(gguf), Path(tmp), timeout
        self.ref = parse(spec)
        self.args = dict(args or {})
        self.meta = read(self.gguf).metadata
        self.data: dict | None = None
        self.original_model: str | None = None
        self.models_differ = False
        self._normal: dict[str, str] = {}
        self.candidates = self._candidates()
        self._llama: dict[tuple[str, ...], OracleSession] = {}
        self._original: dict[tuple[str, ...], Any] = {}
        self.paths: dict[tuple[str, ...], Path] = {(): self.gguf}

    def _candidates(self) -> list[cc.Candidate]:
        """The key, switch and input candidates of `cause_candidates`, then the class experiments: the model
        type among the GGUF keys, the Unicode versions and the original's normalized text after the inputs."""
        tok = Tokenizer.from_gguf(self.gguf)
        found: list[cc.Candidate] = []
        normalizes, self.original_model = False, None
        if self.ref.kind == "hf":
            self.data = json.loads(self.ref.path.read_text(encoding="utf-8"))
            found = cc.for_hf(tok, self.meta, self.data)
            self.original_model = (self.data.get("model") or {}).get("type")
            normalizes = cx.hf_normalizes(self.data)
        elif self.ref.kind == "spm":
            buf = self.ref.path.read_bytes()
            found = cc.for_spm(tok, self.meta, read_spm(buf))
            self.original_model, normalizes = cx.spm_model_type(buf), cx.spm_normalizes(buf)
        elif self.ref.kind == "tekken":
            self.data = json.loads(self.ref.path.read_text(encoding="utf-8"))
            found, self.original_model = cc.for_tekken(tok, self.data), "BPE"
        self.models_differ = cx.models_differ(self.original_model, tok.vocab.vocab_type)
        keys = [c for c in found if c.side == "gguf"]
        rest = [c for c in found if c.side != "gguf"]
        extra = cx.normalized(self._normalized) if normalizes else []
        return [*keys, *cx.model_type(tok, self.original_model), *rest, *cx.unicode_version(), *extra]

    def _normalized(self, text: str) -> str:
        """The original's normalized text (its child's `normalize`), asked once per text."""
        if text not in self._normal:
            client = self._original_side(())
            try:
                reply = client.call({"op": "normalize", "inputs": [b64(text.encode("utf-8", "surrogatepass"))]})
            except ChildFailure as failure:
                raise OSError(f"the original's normalize failed: {failure}") from None
            result = (reply.get("results") or [None])[0] if reply.get("ok") else reply.get("error")
            if not isinstance(result, str):
                raise ValueError(f"the original's normalize: {str(result)[:200]}")
            self._normal[text] = unb64(result).decode("utf-8", "surrogatepass")
        return self._normal[text]

    def __enter__(self) -> Finder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for session in self._llama.values():
            session.close()
        for engine in self._original.values():
            engine.close()
        self._llama.clear()
        self._original.clear()

    # --- the sides under a set of changes -------------------------------------------------------------

    def changes(self, chosen: Iterable[cc.Candidate]) -> dict:
        """The GGUF keys the chosen candidates rewrite, composed in order."""
        out: dict = {}
        for c in chosen:
            if c.gguf:
                out |= c.gguf(self.meta | out)
        return out

    def gguf_path(self, chosen: Sequence[cc.Candidate]) -> Path:
        key = tuple(c.name for c in chosen if c.gguf)
        if key not in self.paths:
            path = self.tmp / f"{'+'.join(key)}.gguf"
            rewrite_metadata(self.gguf, path, self.changes(chosen))
            self.paths[key] = path
        return self.paths[key]

    def _llama_side(self, chosen: Sequence[cc.Candidate]) -> OracleSession:
        key = tuple(c.name for c in chosen if c.gguf)
        if key not in self._llama:
            self._llama[key] = OracleSession(self.gguf_path(chosen), timeout=self.timeout)
        return self._llama[key]

    def _original_side(self, chosen: Sequence[cc.Candidate]) -> Any:
        key = tuple(c.name for c in chosen if c.original)
        if key not in self._original:
            path = self.ref.path
            if key and self.data is not None:
                data = json.loads(json.dumps(self.data))
                for c in chosen:
                    if c.original:
                        c.original(data)
                folder = self.tmp / ("original-" + "+".join(key))
                folder.mkdir(parents=True, exist_ok=True)
                config = self.ref.path.parent / "tokenizer_config.json"
                if config.is_file():
                    shutil.copyfile(config, folder / config.name)
                path = folder / self.ref.path.name
                path.write_text(json.dumps(data), encoding="utf-8")
            spec = f"{self.ref.kind}:{path}"
            self._original[key] = reference_factory(spec, args=self.args, timeout=self.timeout)(self.gguf)
        return self._original[key]

    def rows(self, case: dict, chosen: Sequence[cc.Candidate] = ()) -> tuple[list, list]:
        """(original's ids, llama.cpp's ids) per flag pair, after the chosen changes (None where a side has none)."""
        case = dict(case)
        for c in chosen:
            if c.text and isinstance(case.get("text"), str):
                case["text"] = c.text(case["text"])
        record = self._llama_side(chosen).evaluate(case)
        outcome = self._original_side(chosen).evaluate_one(case)
        none = [None] * len(FLAG_PAIRS)
        return outcome_ids(outcome) or none, outcome_ids(record) or none

    # --- the search -------------------------------------------------------------------------------------

    def explain(self, case: dict, pairs: Sequence[Pair]) -> Explanation:
        """The smallest candidate sets after which both sides agree on `pairs`, with the evidence and the class
        of the difference; where none does, the class the two sides' pieces show (`class_experiments`)."""
        search = _Search([FLAG_PAIRS.index(p) for p in pairs])
        for size in range(min(MAX_SET, len(self.candidates)) + 1):
            for chosen in itertools.combinations(self.candidates, size):
                if not search.worth(chosen, case.get("text")):
                    continue
                try:
                    original, llama = self.rows(case, chosen)
                except (OracleCrash, OracleRefusal, OSError, ValueError) as exc:
                    names = sorted(c.name for c in chosen)
                    search.failed["+".join(names) or "(unchanged)"] = f"{type(exc).__name__}: {exc}"[:300]
                    continue
                search.saw(chosen, original, llama)
            if search.found:
                break
        return self._conclude(search, str(case.get("text", "")))

    def _conclude(self, search: _Search, text: str) -> Explanation:
        found, failed = search.found, search.failed
        if found and not found[0]:
            return Explanation(AGREES, ((),), search.evidence, failed=failed, kind=AGREES)
        if not found:
            rows = search.rows.get(("original-normalized",)) or search.rows.get(())
            types = self.meta.get("tokenizer.ggml.token_type")
            kind = cx.pieces_class(rows or [], self.tokens(), types, self.models_differ)
            return Explanation(UNEXPLAINED, tried=tuple(c.name for c in self.candidates), failed=failed, kind=kind)
        sides = {c.name: c.side for f in found for c in f}
        sets = tuple(tuple(c.name for c in f) for f in found)
        return Explanation("+".join(sets[0]), sets, search.evidence, sides=sides, failed=failed,
                           kind=cx.class_of(sets[0], sides), detail=cx.detail(sets[0], text))

    def tokens(self) -> list[str]:
        """The GGUF's token texts (the two sides' ids index the same table)."""
        return [t if isinstance(t, str) else bytes(t).decode("utf-8", "replace")
                for t in self.meta.get("tokenizer.ggml.tokens") or []]


class _Search:
    """One case's search: the sets found, the evidence of the first, what failed, the rows seen without a
    change and with the original's normalized text alone (for the class of a case nothing explains)."""

    def __init__(self, index: list[int]) -> None:
        self.index = index
        self.found: list[tuple[cc.Candidate, ...]] = []
        self.failed: dict[str, str] = {}
        self.evidence: tuple[dict, ...] = ()
        self.rows: dict[tuple[str, ...], list[tuple[Any, Any]]] = {}

    def worth(self, chosen: Sequence[cc.Candidate], text: Any) -> bool:
        """Not a superset of a set found, no two of a name, and no input change that leaves its text as it
        was (that set is the one without it, tried already)."""
        names = {c.name for c in chosen}
        if any({c.name for c in f} <= names for f in self.found) or _conflict(chosen):
            return False
        for c in chosen:
            if c.text and isinstance(text, str):
                try:
                    changed = c.text(text)
                except (OSError, ValueError):
                    return True  # rows() meets the same failure and records it
                if changed == text:
                    return False
                text = changed
        return True

    def saw(self, chosen: Sequence[cc.Candidate], original: list, llama: list) -> None:
        key = tuple(c.name for c in chosen)
        if key in ((), ("original-normalized",)):
            self.rows[key] = [(original[i], llama[i]) for i in self.index]
        if all(original[i] is not None and original[i] == llama[i] for i in self.index):
            if not self.found:
                self.evidence = tuple(_row(FLAG_PAIRS[i], original[i], llama[i]) for i in self.index)
            self.found.append(tuple(chosen))


def _conflict(chosen: Sequence[cc.Candidate]) -> bool:
    """Two candidates of the same name (two token-type rewrites) are tried apart, never together."""
    names = [c.name for c in chosen]
    return len(names) != len(set(names))


EVIDENCE_IDS = 96  # ids of each side kept in a row of evidence; a long case's row keeps its first ones


def _row(pair: Pair, original: list[int], llama: list[int]) -> dict:
    """Both sides' ids after the change (they agree); on a long case the first `EVIDENCE_IDS` of each, with
    the whole lengths (`ids_n`), so a card stays small."""
    row = {"add_special": pair[0], "parse_special": pair[1], "original": original[:EVIDENCE_IDS],
           "llama.cpp": llama[:EVIDENCE_IDS]}
    if max(len(original), len(llama)) > EVIDENCE_IDS:
        row["ids_n"] = {"original": len(original), "llama.cpp": len(llama)}
    return row


def explain_findings(entries: list[dict], finder: Finder, *, limit: int = MAX_CASES,
                     texts: dict[str, str] | None = None) -> Counter[str]:
    """Each conversion entry given its case's `cause` (one search per case); the causes counted per case.

    `texts` holds the whole input of a case whose entries show a window of it (a long document): the
    search runs on the whole text.

    Past `limit` cases the rest are `not traced` (said so on each), so a model with thousands of
    differing cases costs a bounded time. The search takes first one case of each distinct difference
    (its entries' `signature`, `harness.compare.signature`), then the rest in order: a difference that
    only a late case shows (one added token among thousands of sweep cases) is traced within the limit.
    """
    cases: dict[str, list[dict]] = {}
    for entry in entries:
        if entry.get("class") == "conversion":
            cases.setdefault(str(entry.get("case_id")), []).append(entry)
    counts: Counter[str] = Counter()
    for case_id, group in _each_difference_first(cases):
        first = group[0]
        cause: dict
        if sum(counts.values()) >= limit:
            cause = {"cause": NOT_TRACED, "why": f"past the first {limit} cases searched"}
        elif first.get("bytes") is not None or not isinstance(first.get("text"), str):
            cause = {"cause": NOT_TRACED, "why": "a bytes input: the candidates rewrite text"}
        else:
            pairs = [(bool(e["add_special"]), bool(e["parse_special"])) for e in group]
            text = (texts or {}).get(case_id, first["text"])
            cause = finder.explain({"id": case_id, "text": text}, pairs).as_dict()
        counts[cause["cause"]] += 1
        for entry in group:
            entry["cause"] = cause
    return counts


def _each_difference_first(cases: dict[str, list[dict]]) -> list[tuple[str, list[dict]]]:
    """The cases, the first of each signature (in order of appearance) before all the others."""
    seen: set[str] = set()
    first: list[tuple[str, list[dict]]] = []
    rest: list[tuple[str, list[dict]]] = []
    for case_id, group in cases.items():
        new = {str(e["signature"]) for e in group if e.get("signature")} - seen
        seen |= new
        (first if new else rest).append((case_id, group))
    return first + rest
