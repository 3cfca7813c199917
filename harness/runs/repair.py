"""From conversion findings to a fixed GGUF: the keys that explain them rewritten, and the check run again.

`repair(gguf, spec, out)`:

1. the three-way check on `gguf`: llama.cpp (oracle workers) and the original
   (its reference child) on the default cases of `run` (corpora, vocabulary
   and boundary cases, the original's own tokens), and with `vocab_words`
   every vocabulary word's text on its own;
2. each case that differs explained by experiment (`harness.references.causes`);
3. the fixes applied: each GGUF-key candidate that is, on its own or with other
   key candidates, the smallest change that makes a case agree, and that is
   exact (its value comes whole from the original). A cause that needs
   anything else (a llama.cpp behaviour no key carries, a value the original
   does not hold) is named and not applied;
4. `out` written by `harness.models.gguf_rewrite` (every other key kept, the
   tensor data byte for byte), loaded by llama.cpp and by our engine, and the
   same check run on it three ways: per cause, the cases that differed before
   and after.

Nothing is written when no key fix applies. A NaN or an infinite value in the metadata (a score,
a float key) is a finding about the file, named by key and index before and after
(`harness.models.summary.non_finite`); an infinite score is a cause like any other
(`finite-scores`, the original's score for the token), and a rewrite of a file holding a NaN
reads back as written (NaN is taken as equal to NaN there), so no other cause is blamed for it.
A NaN score is refused by the command before any work (`harness.commands.repair`): our engine
refuses such a file, as llama.cpp's merge order is undefined with it.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizer import Tokenizer
from tokenizer.gguf.reader import read

from ..errors import SetupError
from ..golden.records import evaluate_case
from ..inputs import boundaries
from ..inputs.cases import make_case
from ..inputs.corpus import default_corpora, load_corpus, unique_ids
from ..models.gguf_rewrite import rewrite_metadata
from ..models.summary import non_finite
from ..oracle.workers import run_cases
from ..references import added, causes, specs
from ..references.classify import FLAG_PAIRS, outcome_ids

Log = Callable[[str], None]
NORMAL = 1


@dataclass
class Check:
    """One GGUF's three-way check: per case, the flag pairs where llama.cpp and the original differ, and
    the cases where ours and llama.cpp differ (parity)."""

    conversion: dict[str, list[tuple[bool, bool]]] = field(default_factory=dict)
    parity: list[str] = field(default_factory=list)
    compared: int = 0
    llama_failed: list[str] = field(default_factory=list)  # cases llama.cpp gave no ids for (a crash, or no load)

    def new_failures(self, before: Check) -> list[str]:
        """Cases llama.cpp answered on `before`'s file and not on this one."""
        return [c for c in self.llama_failed if c not in set(before.llama_failed)]

    def as_dict(self) -> dict:
        return {"compared": self.compared, "conversion_differ": len(self.conversion),
                "parity_differ": len(self.parity), "parity_cases": self.parity[:20],
                "llama_failed": self.llama_failed[:20]}


@dataclass
class Repair:
    """What `repair` did: the causes before, the fixes applied and not, and the check after."""

    before: Check
    causes: dict[str, dict] = field(default_factory=dict)  # case id -> its Explanation.as_dict()
    applied: list[dict] = field(default_factory=list)
    not_applied: list[dict] = field(default_factory=list)
    changed_keys: list[str] = field(default_factory=list)
    after: Check | None = None
    loads: dict[str, str] = field(default_factory=dict)
    non_finite: list[dict] = field(default_factory=list)  # the input's NaN and infinite values (summary.non_finite)
    non_finite_after: list[dict] | None = None  # the written file's

    @property
    def left_non_finite(self) -> list[dict]:
        """The NaN and infinite values of the file that stands at the end (the written one, else the input)."""
        return self.non_finite if self.non_finite_after is None else self.non_finite_after

    def per_cause(self) -> list[dict]:
        """Per cause: cases that differed before, and how many of them still differ after."""
        counts: Counter[str] = Counter(c["cause"] for c in self.causes.values())
        left: Counter[str] = Counter(c["cause"] for case, c in self.causes.items()
                                     if self.after is not None and case in self.after.conversion)
        return [{"cause": cause, "before": n, "after": left[cause] if self.after is not None else None}
                for cause, n in counts.most_common()]

    def as_dict(self) -> dict:
        return {"before": self.before.as_dict(), "after": self.after.as_dict() if self.after else None,
                "per_cause": self.per_cause(), "applied": self.applied, "not_applied": self.not_applied,
                "changed_keys": self.changed_keys, "loads": self.loads, "causes": self.causes,
                "non_finite": {"before": self.non_finite, "after": self.non_finite_after}}


def cases_for(gguf: Path, spec: str, *, vocab_words: bool, corpora: Sequence[Path] = (),
              default: bool = True) -> list[dict]:
    """The default cases of `run --reference` (without the fuzzer) unless not `default`, the `corpora`'s,
    and the vocabulary words if asked."""
    cases = []
    if default:
        cases += default_corpora(gguf)
        cases += boundaries.reference_cases(gguf, added.texts(spec), boundaries.level())
    for path in corpora:
        cases += load_corpus(path)
    if vocab_words:
        cases += word_cases(gguf)
    return unique_ids(cases)


def word_cases(gguf: Path) -> list[dict]:
    """Each NORMAL token's text on its own (ids `word-N`), where its bytes are UTF-8."""
    tok = Tokenizer.from_gguf(gguf)
    types = tok.vocab.metadata.get("tokenizer.ggml.token_type")
    out = []
    for i in range(tok.n_tokens):
        if types is not None and int(types[i]) != NORMAL:
            continue
        try:
            text = tok.token_to_piece(i, special=False).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text:
            out.append(make_case(f"word-{i}", text))
    return out


def check(gguf: Path, spec: str, cases: list[dict], *, jobs: int, timeout: float, log: Log) -> Check:
    """llama.cpp, the original and ours on every case of `cases`, for the GGUF at `gguf`."""
    log(f"  llama.cpp on {len(cases)} cases ({gguf.name})")
    records = run_cases(gguf, cases, jobs=jobs, timeout=timeout)
    log(f"  the original on {len(cases)} cases")
    engine = specs.reference_factory(spec, args={}, timeout=timeout)(gguf)
    try:
        outcomes = engine.evaluate_many(cases)
    finally:
        engine.close()
    ours = Tokenizer.from_gguf(gguf)
    result = Check()
    for case, record, outcome in zip(cases, records, outcomes, strict=True):
        llama, original = outcome_ids(record), outcome_ids(outcome)
        if llama is None:
            result.llama_failed.append(str(case["id"]))
        elif _ours(ours, case) != llama:
            result.parity.append(str(case["id"]))
        if llama is None or original is None:
            continue
        result.compared += 1
        pairs = [p for p, a, b in zip(FLAG_PAIRS, llama, original, strict=True)
                 if a is not None and b is not None and a != b]
        if pairs:
            result.conversion[str(case["id"])] = pairs
    return result


def _ours(ours: Tokenizer, case: dict) -> list | None:
    try:
        return outcome_ids(evaluate_case(ours, case))
    except Exception:  # noqa: BLE001 - our engine failing on a case is a parity difference, counted as one
        return None


def repair(gguf: Path, spec: str, out: Path, *, vocab_words: bool = False, corpora: Sequence[Path] = (),
           default: bool = True, jobs: int = 1, timeout: float = 60.0, log: Log = print) -> Repair:
    """See the module docstring."""
    cases = cases_for(gguf, spec, vocab_words=vocab_words, corpora=corpora, default=default)
    if not cases:
        raise SetupError("repair: no cases to check (--no-default-corpora and no --corpus, --vocab-words)")
    log(f"before: {gguf}")
    done = Repair(check(gguf, spec, cases, jobs=jobs, timeout=timeout, log=log),
                  non_finite=non_finite(read(gguf).metadata))
    by_id = {str(c["id"]): c for c in cases}
    with tempfile.TemporaryDirectory(prefix="gguf-parity-repair-") as tmp, \
            causes.Finder(gguf, spec, Path(tmp), timeout=timeout) as finder:
        log(f"  causes of {len(done.before.conversion)} differing case(s), by experiment")
        for case_id, pairs in done.before.conversion.items():
            case = by_id[case_id]
            if not isinstance(case.get("text"), str):
                done.causes[case_id] = {"cause": "not traced", "why": "a bytes input"}
                continue
            done.causes[case_id] = finder.explain(case, pairs).as_dict()
        chosen = _choose(finder, done)
        if not chosen:
            return done
        changes = finder.changes(chosen)
    done.changed_keys = sorted(changes)
    rewrite_metadata(gguf, out, changes)
    done.loads = _loads(out)
    done.non_finite_after = non_finite(read(out).metadata)
    log(f"after: {out}")
    done.after = check(out, spec, cases, jobs=jobs, timeout=timeout, log=log)
    failed, new = done.after.llama_failed, done.after.new_failures(done.before)
    done.loads["llama.cpp"] = (f"gave no ids on {len(new)} case(s) it answered before: {', '.join(new[:5])}" if new
                               else f"loaded: ids on {len(cases) - len(failed)} of {len(cases)} cases"
                               + (f" (none on {', '.join(failed[:5])}, as before)" if failed else ""))
    return done


def _choose(finder: causes.Finder, done: Repair) -> list[Any]:
    """The candidates to apply, in the finder's order; what a case needs besides goes to `not_applied`.

    Per case, its first set that only exact keys make (else its first set): the exact keys in it are
    applied, any other member is named with the reason it is not.
    """
    by_name = {c.name: c for c in finder.candidates}
    wanted: set[str] = set()
    named: dict[str, str] = {}
    for cause in done.causes.values():
        sets = [s.split("+") for s in cause.get("sets") or [] if s]
        if not sets:
            if cause["cause"] in (causes.UNEXPLAINED, "not traced"):
                named.setdefault(cause["cause"], "no candidate change makes the case agree")
            continue
        fixable = [s for s in sets if all(_exact_key(by_name[n]) for n in s)]
        for name in fixable[0] if fixable else sets[0]:
            if _exact_key(by_name[name]):
                wanted.add(name)
            else:
                named[name] = ("a llama.cpp behaviour no GGUF key carries" if by_name[name].side != "gguf"
                               else "not exact: the value is derived, not held by the original")
    chosen = [c for c in finder.candidates if c.name in wanted]
    done.applied = [{"name": c.name, "what": c.what, "keys": list(c.keys)} for c in chosen]
    done.not_applied = [{"name": n, "why": why, "what": by_name[n].what if n in by_name else ""}
                        for n, why in named.items()]
    return chosen


def _exact_key(candidate: Any) -> bool:
    return bool(candidate.side == "gguf" and candidate.exact)


def _loads(path: Path) -> dict[str, str]:
    """The repaired file loaded by our engine (llama.cpp's load is the after-check's first step)."""
    tok = Tokenizer.from_gguf(path)
    return {"ours": f"loaded: {tok.vocab_type}, pre {tok.pre!r}, {tok.n_tokens} tokens"}
