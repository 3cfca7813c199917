"""Which cases a run checks, and when it stops, as pytest users expect: `-k`, `--lf`, `--ff`, `-x`, `--maxfail`.

- `-k EXPRESSION` (`keyword_matcher`): pytest's small grammar over words, `and`, `or`, `not` and
  parentheses; a word matches a case when it is a substring of the case's id or of its model's
  name, ignoring case (pytest matches an item's name and its parents' the same way).
- `--lf` / `--ff` (`read_last_run`): the cases that failed in the last run's report, read from the
  `--report` folder (report.json for the models it checked, `findings/<model>.jsonl` for every
  failing case id, `cases/<model>.jsonl` for their inputs, each read bounded). `--lf` checks only
  those, and a model that failed as a whole (not loaded, not checked, a vocabulary finding) whole;
  `--ff` checks them first, then the rest. When the last run failed nowhere (or there is no last
  run), both check everything, as pytest does, and say so.
- `-x` / `--maxfail N` (`Tally`): the run stops once N cases have failed (findings an
  `--expected-differences` entry names are not failures). What it did not check is listed
  (report.json's `meta.selection`) and named in the verdict, never counted as passing.

`choose(cases, model, config)` applies `--case`, `--lf`, `-k` and `--ff` to a model's gathered cases;
`chosen(models, config, gather)` the same to a run's models (those left with nothing are left out).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import SetupError
from ..files import input_limits, jsonl
from ..inputs.corpus import CorpusError, load_corpus

if TYPE_CHECKING:
    from ..models.model import Model

MAX_EXPRESSION = 4096   # characters of a -k expression
MAX_DEPTH = 64          # nesting of `not` and parentheses in one
MAX_FINDING_LINES = 64 << 20  # bytes of one findings/<model>.jsonl read back (a line per finding)
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_OPERATORS = ("and", "or", "not")

Matcher = Callable[[tuple[str, ...]], bool]
T = TypeVar("T")


# --- -k EXPRESSION ----------------------------------------------------------------------------------------

def keyword_matcher(expression: str) -> Matcher:
    """A function of (lowercased names) -> bool for pytest's `-k` grammar; `SetupError` naming the problem.

        expr := and_expr ('or' and_expr)*      and_expr := not_expr ('and' not_expr)*
        not_expr := 'not' not_expr | '(' expr ')' | word
    """
    if len(expression) > MAX_EXPRESSION:
        raise SetupError(f"-k: the expression is {len(expression):,} characters, over the limit of {MAX_EXPRESSION:,}")
    parser = _Parser(_TOKEN.findall(expression), expression)
    return parser.parse()


class _Parser:
    def __init__(self, tokens: list[str], text: str) -> None:
        self.tokens, self.text, self.at, self.depth = tokens, text, 0, 0

    def parse(self) -> Matcher:
        if not self.tokens:
            return lambda names: True  # pytest: an empty expression selects everything
        node = self._or()
        if self.at < len(self.tokens):
            self._fail(f"unexpected {self.tokens[self.at]!r}")
        return node

    def _fail(self, why: str) -> None:
        raise SetupError(f"-k {self.text!r}: {why} (the grammar: words, and, or, not, parentheses)")

    def _take(self, word: str) -> bool:
        if self.at < len(self.tokens) and self.tokens[self.at] == word:
            self.at += 1
            return True
        return False

    def _or(self) -> Matcher:
        nodes = [self._and()]
        while self._take("or"):
            nodes.append(self._and())
        return nodes[0] if len(nodes) == 1 else lambda names: any(node(names) for node in nodes)

    def _and(self) -> Matcher:
        nodes = [self._not()]
        while self._take("and"):
            nodes.append(self._not())
        return nodes[0] if len(nodes) == 1 else lambda names: all(node(names) for node in nodes)

    def _not(self) -> Matcher:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self._fail(f"nested deeper than {MAX_DEPTH} levels")
        try:
            if self._take("not"):
                inner = self._not()
                return lambda names: not inner(names)
            if self._take("("):
                inner = self._or()
                if not self._take(")"):
                    self._fail("a '(' is not closed")
                return inner
            return self._word()
        finally:
            self.depth -= 1

    def _word(self) -> Matcher:
        if self.at >= len(self.tokens):
            self._fail("it ends where a word was expected")
        token = self.tokens[self.at]
        if token in (*_OPERATORS, ")"):
            self._fail(f"{token!r} where a word was expected")
        self.at += 1
        word = token.lower()
        return lambda names: any(word in name for name in names)


def keyword_names(model: str, case_id: str) -> tuple[str, ...]:
    """What a `-k` word is matched against: the case id and its model's name, lowercased."""
    return (case_id.lower(), model.lower())


# --- --lf / --ff: the last run's failures -----------------------------------------------------------------

@dataclass(frozen=True)
class LastRun:
    """What the last run's report says failed: per model its failing case ids, the models that failed as a
    whole, and the failing cases' inputs (from `cases/<model>.jsonl`, for those no corpus holds)."""

    source: Path
    failed: dict[str, frozenset[str]] = field(default_factory=dict)
    whole: frozenset[str] = frozenset()
    inputs: dict[str, dict[str, dict]] = field(default_factory=dict)

    @property
    def models(self) -> frozenset[str]:
        return frozenset(m for m, ids in self.failed.items() if ids) | self.whole

    def describe(self) -> dict:
        return {"report": str(self.source), "models": sorted(self.models),
                "cases": sum(len(ids) for ids in self.failed.values())}


def read_last_run(folder: Path) -> LastRun | None:
    """The failures of the report in `folder`, or None when it holds no report.json (no last run).

    A report.json that cannot be read or is not a report is a `SetupError` naming it.
    """
    path = folder / "report.json"
    if not path.exists():
        return None
    try:
        report = input_limits.read_side_json(path, "the last run's report", limit=input_limits.MAX_REPORT_BYTES)
    except (OSError, ValueError) as exc:
        raise SetupError(f"--lf/--ff: cannot read {path}: {exc}") from None
    per_model = report.get("summary", {}).get("per_model") if isinstance(report, dict) else None
    if not isinstance(per_model, dict) or not all(isinstance(c, dict) for c in per_model.values()):
        raise SetupError(f"--lf/--ff: {path} is not a gguf-parity report (no summary.per_model)")
    failed: dict[str, frozenset[str]] = {}
    whole: set[str] = set()
    inputs: dict[str, dict[str, dict]] = {}
    for model, counts in per_model.items():
        ids, model_level = _failed_ids(folder, report, model)
        if model_level or counts.get("not_checked"):
            whole.add(model)
        failed[model] = frozenset(ids)
        if ids:
            inputs[model] = _inputs(folder, model)
    return LastRun(path, failed, frozenset(whole), inputs)


def _safe_file(folder: Path, sub: str, model: str) -> Path | None:
    """`folder/sub/<model>.jsonl`, or None for a model name that would leave that folder."""
    if not model or "/" in model or "\\" in model or model.startswith(".") or "\0" in model:
        return None
    return folder / sub / f"{model}.jsonl"


def _failed_ids(folder: Path, report: dict, model: str) -> tuple[set[str], bool]:
    """(failing case ids, whether a finding was about the model itself) of one model of the last report.

    The findings file counts only when it holds as many lines as the report counts findings of the model: a
    file an earlier run left in the folder (this one found nothing there) is not this report's.
    """
    from ..compare.result import FINDINGS
    counts = report["summary"]["per_model"][model]
    counted = sum(n for n in (counts.get(kind, 0) for kind in FINDINGS) if isinstance(n, int))
    if not counted:
        return set(), False
    path = _safe_file(folder, "findings", model)
    lines: list = []
    if path is not None and path.exists():
        try:
            lines = [value for _, value in jsonl.read(path, max_bytes=MAX_FINDING_LINES)]
        except jsonl.JSONLError as exc:
            raise SetupError(f"--lf/--ff: {exc}") from None
    if len(lines) != counted:  # none, or not this report's: its lists, as far as they go
        lines = [e for kind in FINDINGS for e in report.get(kind) or [] if isinstance(e, dict)
                 and e.get("model") == model]
    ids: set[str] = set()
    model_level = False
    for line in lines:
        case_id = line.get("case_id") if isinstance(line, dict) else None
        if not isinstance(case_id, str) or case_id.startswith("<"):
            model_level = True
        else:
            ids.add(case_id)
    return ids, model_level


def _inputs(folder: Path, model: str) -> dict[str, dict]:
    path = _safe_file(folder, "cases", model)
    if path is None or not path.exists():
        return {}
    try:
        return {str(c["id"]): c for c in load_corpus(path)}
    except (CorpusError, OSError) as exc:
        raise SetupError(f"--lf/--ff: {exc}") from None


# --- choosing a model's cases -----------------------------------------------------------------------------

def narrowed(config) -> bool:
    """True when the run checks a chosen part of each model's cases (`--case`, `-k`, `--lf` with failures)."""
    last = config.last_failed
    return bool(config.case_ids or config.keyword or (last is not None and last.models and not config.failed_first))


def choose(cases: list[dict], model: str, config, *, extra: bool = True) -> list[dict]:
    """`cases` after `--case` (each id must exist), `--lf`, `-k` and `--ff`, in that order. With `extra`, a
    failed case no corpus holds comes from the last report's cases file (a live run; a golden has none)."""
    if config.case_ids:
        missing = set(config.case_ids) - {c["id"] for c in cases}
        if missing:
            raise SetupError(f"{model}: no case with id {', '.join(sorted(map(repr, missing)))} in the corpora")
        cases = [c for c in cases if c["id"] in config.case_ids]
    last = config.last_failed
    if last is not None and last.models:
        cases = _last_failures(cases, model, last, first=config.failed_first, extra=extra)
    if config.keyword:
        match = keyword_matcher(config.keyword)
        cases = [c for c in cases if match(keyword_names(model, str(c["id"])))]
    return cases


def _last_failures(cases: list[dict], model: str, last: LastRun, *, first: bool, extra: bool) -> list[dict]:
    """--lf: the failed cases (a model that failed whole: all); --ff: those first, then the rest.

    A failed case no corpus holds (a fuzz input, a long document's window) comes from the report's cases file.
    """
    if model in last.whole and not first:
        return cases
    ids = last.failed.get(model, frozenset())
    held = {str(c["id"]) for c in cases}
    more = [c for i, c in last.inputs.get(model, {}).items() if i in ids and i not in held] if extra else []
    failed = [c for c in cases if str(c["id"]) in ids] + more
    if not first:
        return failed
    return failed + [c for c in cases if str(c["id"]) not in ids]


def wanted(model: str, config) -> str | None:
    """Why `--lf` leaves `model` out (the last run did not fail on it), or None when it is checked."""
    last = config.last_failed
    if last is None or not last.models or config.failed_first or model in last.models:
        return None
    return "--lf: it did not fail in the last run"


def everything_line(config) -> str | None:
    """What `--lf` says when it checks everything: no last report, or nothing failed in it (as pytest does)."""
    if config.tally is None or "last_failed" not in config.tally.asked:
        return None
    last = config.last_failed
    if last is None:
        return f"--lf: no last run in {config.report_dir} (no report.json): checking everything"
    if not last.models:
        return f"--lf: nothing failed in the last run ({last.source}): checking everything"
    return None


def chosen(models: Mapping[str, tuple[Model, list[dict] | None]], config,
           gather: Callable[[Model, Any], list[dict]]) -> dict:
    """The models a selection keeps (`-k`, `--lf`, `--ff`), each with its cases (`gather`ed unless given); all
    of them, as they are, without one.

    A model `--lf` leaves out (it did not fail last time), or of which `-k` keeps no case, is named on
    stderr and in `config.tally`; `--ff` puts the models that failed last time first. None left is a
    `SetupError` (exit 2) before any work.
    """
    everything = everything_line(config)
    if everything and not config.quiet:
        print(everything, file=sys.stderr)
    if config.tally is None or not (config.keyword or (config.last_failed and config.last_failed.models)):
        return dict(models)
    kept = {}
    for arg, (model, cases) in models.items():
        why = wanted(model.name, config)
        if why is None:
            cases = gather(model, config) if cases is None else cases
            model.forget_metadata()  # read again by its check
            why = None if cases or config.fuzz else f"-k {config.keyword!r} keeps none of its cases"
        if why is None:
            kept[arg] = (model, cases)
            continue
        config.tally.left_out[model.name] = why
        if not config.quiet:
            print(f"{model.name}: left out ({why})", file=sys.stderr)
    if not kept:
        raise SetupError(f"the selection leaves no case to check in {len(models)} model(s): "
                         + "; ".join(f"{m}: {why}" for m, why in list(config.tally.left_out.items())[:3]))
    return dict(first_failed(kept.items(), lambda item: item[1][0].name, config))


def first_failed(models: Iterable[T], name: Callable[[T], str], config) -> list[T]:
    """`models` with, under `--ff`, those that failed last time first (each group in its order)."""
    last = config.last_failed
    items = list(models)
    if last is None or not config.failed_first:
        return items
    return [m for m in items if name(m) in last.models] + [m for m in items if name(m) not in last.models]


# --- what the run left out, and -x / --maxfail N ---------------------------------------------------------

class Tally:
    """A run's selection as it went: models `-k` / `--lf` left out, and `--maxfail N` (`limit`), the run
    stopping once N cases have failed, with what it then did not check. `describe()` is report.json's
    `meta.selection`."""

    def __init__(self, *, limit: int | None = None, asked: dict | None = None, expected=None) -> None:
        self.limit = limit
        self.asked = dict(asked or {})                  # the options, as given
        self.expected = expected                        # --expected-differences: its findings do not count
        self.failing: dict[str, int] = {}               # model -> its failing cases so far
        self.left: dict[str, list[str]] = {}            # model -> its case ids not checked (stopped)
        self.phases: dict[str, list[str]] = {}          # model -> its phases not run (stopped)
        self.not_started: list[str] = []                # models not begun (stopped)
        self.left_out: dict[str, str] = {}              # model -> why the selection left it out

    def count(self, model: str, failing: int) -> None:
        self.failing[model] = failing

    def failing_now(self, result) -> int:
        """`result`'s failing cases, those whose findings `--expected-differences` all names left out."""
        if self.expected is None:
            return len(result.failing)
        return self.expected.unexpected_failing(result)

    @property
    def reached(self) -> bool:
        return self.limit is not None and sum(self.failing.values()) >= self.limit

    @property
    def stopped(self) -> bool:
        return bool(self.left or self.phases or self.not_started)

    def describe(self) -> dict:
        out = {**self.asked, **({"left_out": dict(self.left_out)} if self.left_out else {})}
        if self.stopped:
            out["stopped"] = {"maxfail": self.limit, "failing_cases": sum(self.failing.values()),
                              "cases_not_checked": {m: len(ids) for m, ids in self.left.items()},
                              "phases_not_run": dict(self.phases),
                              "models_not_started": list(self.not_started)}
        return out


def tally_from(args, last: LastRun | None, expected=None) -> Tally | None:
    """The run's `Tally` when -k, --lf, --ff, -x or --maxfail was given (None otherwise); `SetupError` for
    --maxfail below 1."""
    maxfail = getattr(args, "maxfail", None)
    if maxfail is not None and maxfail < 1:
        raise SetupError(f"--maxfail {maxfail}: must be 1 or more (-x is --maxfail 1)")
    lf, ff = bool(getattr(args, "last_failed", False)), bool(getattr(args, "failed_first", False))
    keyword = getattr(args, "keyword", None)
    if maxfail is None and not (lf or ff or keyword):
        return None
    asked: dict = {"keyword": keyword} if keyword else {}
    if lf or ff:
        asked["last_failed" if lf else "failed_first"] = (
            last.describe() if last is not None else "no last run: everything checked")
    if maxfail is not None:
        asked["maxfail"] = maxfail
    return Tally(limit=maxfail, asked=asked, expected=expected)
