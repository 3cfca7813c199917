"""From conversion findings to a fixed GGUF: the keys that explain them rewritten, never a layer made worse.

`repair(gguf, spec, out)`:

1. every layer of `gguf` measured against the original (`harness.runs.repair_layers`: ids, detokenize,
   pieces, specials, end-of-generation, and the messages when the command gives a chat check), on the
   default cases of `run` (corpora, vocabulary and boundary cases, the original's own tokens), and with
   `vocab_words` every vocabulary word's text on its own;
2. each case whose ids differ explained by experiment (`harness.references.causes`);
3. per cause (the cases that share a first smallest set), its fixes: the sets of exact GGUF-key candidates
   (the value comes whole from the original) that make its cases agree, the one that fixes most first,
   then the candidates' order. Each is tried in turn on a copy with the fixes kept so far: every layer is
   measured again, and the first set that makes the ids better and no layer worse (no item that agreed
   now differs) is kept. A set that makes a layer worse is not written: it is reported with the layer
   and the counts (`allow_regression` keeps the first set that makes the ids better all the same, and
   says so). A cause that needs anything else (a llama.cpp behaviour no key carries, a value the
   original does not hold) is named and not applied;
4. `out` written by `harness.models.gguf_rewrite` (every other key kept, the tensor data byte for byte)
   with the fixes kept, loaded by llama.cpp and by our engine, and measured again: per layer and per
   cause, before and after.

Nothing is written when no fix is kept. A NaN or an infinite value in the metadata (a score,
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
from ..inputs import boundaries
from ..inputs.cases import make_case
from ..inputs.corpus import default_corpora, load_corpus, unique_ids
from ..models.gguf_rewrite import rewrite_metadata
from ..models.summary import non_finite
from ..references import added, causes
from .repair_layers import Check, MessagesHook, OriginalSide, measure, table, worse, worse_line

Log = Callable[[str], None]
NORMAL = 1


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
    trials: list[dict] = field(default_factory=list)  # each fix tried, its layers and what became of it

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
                "layers": table(self.before, self.after), "trials": self.trials,
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


@dataclass
class Settings:
    """How `repair` asks both sides and what it may write."""

    jobs: int = 1
    timeout: float = 60.0
    args: dict[str, str] = field(default_factory=dict)  # the original's --reference-arg KEY=VALUE
    allow_regression: bool = False
    messages: MessagesHook | None = None
    log: Log = print


@dataclass
class Plan:
    """One cause: its cases, and the sets of exact key candidates that fix them, best first."""

    cause: str
    cases: list[str]
    options: list[tuple[str, ...]]


def repair(gguf: Path, spec: str, out: Path, *, vocab_words: bool = False, corpora: Sequence[Path] = (),
           default: bool = True, settings: Settings | None = None) -> Repair:
    """See the module docstring."""
    how = settings or Settings()
    cases = cases_for(gguf, spec, vocab_words=vocab_words, corpora=corpora, default=default)
    if not cases:
        raise SetupError("repair: no cases to check (--no-default-corpora and no --corpus, --vocab-words)")
    with tempfile.TemporaryDirectory(prefix="gguf-parity-repair-") as tmp, \
            OriginalSide(spec, gguf, cases, args=how.args, timeout=how.timeout, log=how.log) as original, \
            causes.Finder(gguf, spec, Path(tmp), args=how.args, timeout=how.timeout) as finder:
        how.log(f"before: {gguf}")
        done = Repair(_measure(gguf, cases, original, how, ours=True), non_finite=non_finite(read(gguf).metadata))
        _explain(done, cases, finder, how.log)
        kept = _trials(_plans(finder, done), finder, done, cases, original, how)
        if not kept:
            return done
        done.changed_keys = sorted(finder.changes(kept))
        rewrite_metadata(gguf, out, finder.changes(kept))
        done.loads = _loads(out)
        done.non_finite_after = non_finite(read(out).metadata)
        how.log(f"after: {out}")
        done.after = _measure(out, cases, original, how, ours=True)
    failed, new = done.after.llama_failed, done.after.new_failures(done.before)
    done.loads["llama.cpp"] = (f"gave no ids on {len(new)} case(s) it answered before: {', '.join(new[:5])}" if new
                               else f"loaded: ids on {len(cases) - len(failed)} of {len(cases)} cases"
                               + (f" (none on {', '.join(failed[:5])}, as before)" if failed else ""))
    return done


def _measure(gguf: Path, cases: list[dict], original: OriginalSide, how: Settings, *, ours: bool = False) -> Check:
    return measure(gguf, cases, original, jobs=how.jobs, timeout=how.timeout, log=how.log, ours=ours,
                   messages=how.messages)


def _explain(done: Repair, cases: list[dict], finder: causes.Finder, log: Log) -> None:
    by_id = {str(c["id"]): c for c in cases}
    log(f"  causes of {len(done.before.conversion)} differing case(s), by experiment")
    for case_id, pairs in done.before.conversion.items():
        case = by_id[case_id]
        if not isinstance(case.get("text"), str):
            done.causes[case_id] = {"cause": "not traced", "why": "a bytes input"}
            continue
        done.causes[case_id] = finder.explain(case, pairs).as_dict()


def _plans(finder: causes.Finder, done: Repair) -> list[Plan]:
    """Per cause (most cases first), the sets of exact key candidates its cases list, the set that fixes most of
    them first; a cause with none offers the exact keys of its first set (a part of the fix). What a cause
    needs besides goes to `not_applied`, named with why."""
    by_name = {c.name: c for c in finder.candidates}
    order = {c.name: i for i, c in enumerate(finder.candidates)}
    groups: dict[str, list[str]] = {}
    for case_id, found in done.causes.items():
        groups.setdefault(found["cause"], []).append(case_id)
    named: dict[str, str] = {}
    plans = []
    for cause, ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        counts: Counter[tuple[str, ...]] = Counter()
        for case_id in ids:
            counts.update({tuple(s.split("+")) for s in done.causes[case_id].get("sets") or [] if s})
        if not counts:
            if cause in (causes.UNEXPLAINED, "not traced"):
                named.setdefault(cause, "no candidate change makes the case agree")
            continue
        options = sorted((s for s in counts if all(_exact_key(by_name[n]) for n in s)),
                         key=lambda s: (-counts[s], len(s), [order[n] for n in s]))
        first = tuple(cause.split("+"))
        for name in first:
            if not _exact_key(by_name[name]):
                named[name] = ("a llama.cpp behaviour no GGUF key carries" if by_name[name].side != "gguf"
                               else "not exact: the value is derived, not held by the original")
        partial = tuple(n for n in first if _exact_key(by_name[n]))
        if not options and partial:
            options = [partial]
        plans.append(Plan(cause, ids, options))
    done.not_applied = [{"name": n, "why": why, "what": by_name[n].what if n in by_name else ""}
                        for n, why in named.items()]
    return plans


def _trials(plans: list[Plan], finder: causes.Finder, done: Repair, cases: list[dict], original: OriginalSide,
            how: Settings) -> list[Any]:
    """Each plan's options tried on a copy with the fixes kept so far; the candidates kept, in the finder's order."""
    by_name = {c.name: c for c in finder.candidates}
    kept: list[str] = []
    current = done.before
    for plan in plans:
        if any(set(option) <= set(kept) for option in plan.options):
            continue  # an earlier cause's fix holds it
        tried: list[tuple[tuple[str, ...], Check, dict]] = []
        for option in plan.options:
            names = kept + [n for n in option if n not in kept]
            chosen = [c for c in finder.candidates if c.name in names]
            how.log(f"  trying {'+'.join(option)} for cause {plan.cause} ({len(plan.cases)} case(s))")
            trial = _measure(finder.gguf_path(chosen), cases, original, how)
            found = worse(current, trial)
            better = len(trial.layers["ids"].differ) < len(current.layers["ids"].differ)
            done.trials.append(_trial_record(plan, option, current, trial, found, better))
            tried.append((option, trial, found))
            if better and not found:
                kept, current = names, trial
                done.trials[-1]["verdict"] = "kept"
                break
        else:
            kept, current = _refused(plan, tried, kept, current, done, how)
    done.applied = [{"name": n, "what": by_name[n].what, "keys": list(by_name[n].keys)}
                    for n in (c.name for c in finder.candidates) if n in kept]
    return [c for c in finder.candidates if c.name in kept]


def _trial_record(plan: Plan, option: tuple[str, ...], current: Check, trial: Check, found: dict,
                  better: bool) -> dict:
    left = sum(1 for case in plan.cases if case in trial.conversion)
    return {"cause": plan.cause, "cases": len(plan.cases), "set": list(option), "cases_left": left,
            "layers": table(current, trial), "worse": found,
            "verdict": "not kept: " + ("makes a layer worse: " + worse_line(found) if found
                                       else "the ids are no better")}


def _refused(plan: Plan, tried: list[tuple[tuple[str, ...], Check, dict]], kept: list[str], current: Check,
             done: Repair, how: Settings) -> tuple[list[str], Check]:
    """No option was kept: each is named with why (the layer it makes worse, with the counts); with
    `allow_regression` the first that made the ids better is kept all the same."""
    records = done.trials[len(done.trials) - len(tried):]
    for (option, trial, found), record in zip(tried, records, strict=True):
        better = len(trial.layers["ids"].differ) < len(current.layers["ids"].differ)
        if found and better and how.allow_regression:
            record["verdict"] = "kept with --allow-regression, though it makes a layer worse: " + worse_line(found)
            return kept + [n for n in option if n not in kept], trial
        why = ("makes a layer worse: " + worse_line(found) + " (--allow-regression writes it anyway)" if found
               else "the ids are no better with it")
        done.not_applied.append({"name": "+".join(option), "why": why, "worse": found,
                                 "what": f"the fix tried for cause {plan.cause} ({len(plan.cases)} case(s))"})
    return kept, current


def _exact_key(candidate: Any) -> bool:
    return bool(candidate.side == "gguf" and candidate.exact)


def _loads(path: Path) -> dict[str, str]:
    """The repaired file loaded by our engine (llama.cpp's load is the after-check's first step)."""
    tok = Tokenizer.from_gguf(path)
    return {"ours": f"loaded: {tok.vocab_type}, pre {tok.pre!r}, {tok.n_tokens} tokens"}
