"""The third side of the per-model check: the model's original tokenizer (`run --reference SPEC`).

With `--reference hf:PATH` or `spm:PATH` every case has three id lists per flag
pair: the engine under test, llama.cpp and the original (run contained by
`harness.references.specs`). `ReferenceSide` asks the original for each case
beside the other two, and for each case:

- counts it (`harness.references.classify.Counts`: per class agree / differ /
  not applicable, and the flag pairs the original could not express), kept in
  `ModelResult.reference` and summed into report.json's `summary.reference`;
- adds a `reference_findings` entry per differing flag pair and class:
  `conversion` (llama.cpp != original; it names the GGUF keys
  `harness.references.gguf_keys` finds) and `engine_vs_original`; a reference
  that fails on a case (an error, a crash, a hang) is a `reference_error` entry;
- gives every finding card of the case (today's parity mismatches too) the three
  rows of tokens (`rows`);
- asks the original to decode llama.cpp's ids (`harness.references.decoding`) and
  holds each of the case's 16 decodes against llama.cpp's detokenize: counted
  under `decode` (agree, explained:..., differ, not applicable, apart), and a
  `differ` is a `decode` finding (one per flag pair, the differing detokenize
  pairs in it, both texts byte-exact).

Today's parity findings (engine != llama.cpp) stay `mismatches`, as without a
reference. Not applicable is never a pass: a model on which the original could
be compared on no case at all is not checked (exit 2). The fuzzer's judge calls
`findings` too, so a conversion finding is shrunk and saved like a parity one.
"""

from __future__ import annotations

import shlex
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..compare import long_inputs
from ..compare.diff import TokenTable, first_diff, visible
from ..compare.findings import EngineError, case_fields, signed
from ..compare.result import ModelResult
from ..compare.subject import Subject
from ..errors import SetupError
from ..inputs import boundaries, derived
from ..models.model import Model
from ..references import added, causes, classify, decoding, gguf_keys, hf, original, specs
from ..subjects.guard import EngineLoadError
from . import sweeps
from .config import RunConfig

KIND = "reference_findings"
CATEGORIES = {"conversion": "conversion", "engine_vs_original": "engine vs original",
              "decode": "decode conversion", "reference_error": "reference error"}
SIDE_NAMES = {"engine": "engine", "llama": "llama.cpp", "reference": "original"}


def check_spec(config: RunConfig) -> None:
    """Fail fast (`SetupError`) on a bad `--reference` or a missing library, before any work."""
    if config.reference:
        factory(config)


def factory(config: RunConfig) -> Callable[[Path], Any]:
    if not config.reference:
        raise ValueError("no reference in this RunConfig")
    return specs.reference_factory(config.reference, args=dict(config.reference_args),
                                   timeout=config.engine_timeout)


def reference_args_line(config: RunConfig) -> list[str]:
    """The `--reference SPEC --reference-arg K=V` words of a reproduce command."""
    if not config.reference:
        return []
    words = ["--reference", config.reference]
    for key, value in config.reference_args:
        words += ["--reference-arg", f"{key}={value}"]
    return words


def three_way(subject: Subject, config: RunConfig) -> Subject:
    """`subject` whose reproduce commands re-run the case three ways (with `--reference`)."""
    tail = shlex.join(reference_args_line(config))
    command = subject.command
    return replace(subject, command=lambda case_id: f"{command(case_id)} {tail}")


@contextmanager
def third_side(config: RunConfig, path: Path, subject: Subject,
               result: ModelResult) -> Iterator[tuple[Subject, ReferenceSide | None]]:
    """(subject, the original's side) for one model's check: with `--reference`, the subject made three-way
    and the original opened, then closed and its counts concluded into `result`; without, (subject, None)."""
    if not config.reference:
        yield subject, None
        return
    third = ReferenceSide.open(config, path)
    try:
        yield three_way(subject, config), third
        third.explain(config, path, result)
    finally:
        third.close()
        third.conclude(result)
        sweeps.attach(config, result)  # what the sweeps' screens found (their differing inputs were cases)


class ReferenceSide:
    """The original tokenizer beside llama.cpp and the engine, for one model."""

    def __init__(self, engine: Any, *, spec: str, keys: list[str], config: dict | None = None) -> None:
        self.engine = engine
        self.spec = spec
        self.keys = keys  # gguf_keys discrepancy lines, named by every conversion finding
        self.counts = classify.Counts()
        self.errors = 0
        self.seen: dict[str, Any] = {}  # fuzz: case id -> (reference outcome, its decode of llama.cpp's ids)
        self.causes: Counter[str] = Counter()  # cause -> conversion findings (cases) it explains
        self.classes: Counter[str] = Counter()  # class of difference -> conversion findings (cases) of that class
        self.config = config or {}  # the original's tokenizer_config.json (what it asks of its decode)
        self.inputs: dict[str, str] = {}  # case id -> the whole text of a long case (its findings show a window)

    @classmethod
    def open(cls, config: RunConfig, path: Path) -> ReferenceSide:
        """The reference started for the GGUF at `path`; `SetupError` if it cannot load."""
        spec = str(config.reference)
        try:
            engine = factory(config)(path)
        except EngineLoadError as exc:
            raise SetupError(f"reference {spec}: could not load: {exc}") from None
        return cls(engine, spec=spec, keys=_keys(path, spec), config=_config(spec))

    def outcomes(self, cases: list[dict]) -> list[Any]:
        """The reference's outcome for every case (a record, `NotApplicable`, or an `EngineError`)."""
        return self.engine.evaluate_many(list(cases)) if cases else []

    def outcome(self, case: dict) -> Any:
        return self.engine.evaluate_one(case)

    def decoded(self, record: dict | None) -> decoding.CaseDecode | EngineError | None:
        """The original's decode of llama.cpp's ids in `record` (None when llama.cpp has none: it crashed)."""
        return decoding.ask(self.engine, record)

    def count(self, record: dict | None, got: Any, ours: Any, decoded: Any = None) -> None:
        """Count one case (`classify.Counts`), its decodes, and a reference that failed on it."""
        if isinstance(ours, EngineError) or isinstance(decoded, EngineError):
            self.errors += 1
        self.counts.add_case(classify.outcome_ids(got), classify.outcome_ids(record), classify.outcome_ids(ours))
        if isinstance(decoded, decoding.CaseDecode):
            for outcome in decoded.outcomes():
                self.counts.add_decode(outcome)

    def judge(self, subject: Subject, case: dict, record: dict | None, got: Any, ours: Any,
              found: list[tuple[str, dict]]) -> tuple[list[tuple[str, dict]], Any]:
        """One case three ways, in one call: the original decodes llama.cpp's ids in `record`, and `found`
        (the case's parity findings) comes back with the reference's own findings; with the decode,
        which `count` takes."""
        decoded = self.decoded(record)
        return signed(subject, self.findings(subject, case, record, got, ours, found, decoded)), decoded

    def findings(self, subject: Subject, case: dict, record: dict | None, got: Any, ours: Any,
                 found: list[tuple[str, dict]], decoded: Any = None) -> list[tuple[str, dict]]:
        """`found` (the case's parity findings) with three rows each, plus the reference's own findings.

        `decoded` is `decoded(record)`: its differing decodes are `decode` findings, and a reference that
        failed decoding a `reference_error` (capability decode).
        """
        sides = {"engine": _per_pair(got), "llama": _per_pair(record), "reference": _per_pair(ours)}
        tables = {"engine": subject.engine_table, "llama": subject.table, "reference": subject.table}
        rows: dict[int, list[dict]] = {}  # flag pair -> its rows, the same for every finding of that pair

        def rows_of(pair: int) -> list[dict]:
            if pair not in rows:
                rows[pair] = _rows(sides, tables, pair)
            return rows[pair]

        out = []
        for kind, entry in found:
            pair = _pair_index(entry)
            if pair is not None:
                entry = {**entry, "rows": rows_of(pair)}
            out.append((kind, entry))
        out += self._decode_findings(subject, case, sides, tables, decoded)
        if isinstance(ours, EngineError):
            out.append((KIND, {**case_fields(case, subject), "class": "reference_error",
                               "category": CATEGORIES["reference_error"], "error": ours.error}))
            return out
        for pair, (add_special, parse_special) in enumerate(classify.FLAG_PAIRS):
            outcome = classify.classify_pair(*(sides[s][pair] for s in ("engine", "llama", "reference")))
            for cls in ("conversion", "engine_vs_original"):
                if outcome[cls] != "differ":
                    continue
                a, b = classify.SIDES[cls]
                expected, got_ids = sides[a][pair], sides[b][pair]
                entry = {**case_fields(case, subject), "class": cls, "category": CATEGORIES[cls],
                         "add_special": add_special, "parse_special": parse_special,
                         "compared": [SIDE_NAMES[a], SIDE_NAMES[b]], "expected": expected, "got": got_ids,
                         "first_diff": first_diff(expected or [], got_ids or [])}
                entry = {**long_inputs.trimmed(entry, tables[b]), "rows": rows_of(pair)}
                if cls == "conversion":
                    entry["gguf_keys"] = list(self.keys)
                    self._keep_whole(case)
                out.append((KIND, entry))
        return out

    def _decode_findings(self, subject: Subject, case: dict, sides: dict[str, list], tables: dict[str, TokenTable],
                         decoded: Any) -> list[tuple[str, dict]]:
        """A `decode` finding per flag pair whose ids the original decodes otherwise than llama.cpp."""
        if isinstance(decoded, EngineError):
            return [(KIND, {**case_fields(case, subject), "class": "reference_error", "capability": "decode",
                            "category": CATEGORIES["reference_error"], "error": decoded.error})]
        if not isinstance(decoded, decoding.CaseDecode):
            return []
        out = []
        for pair, ((add_special, parse_special), detoks) in enumerate(zip(classify.FLAG_PAIRS, decoded.pairs,
                                                                           strict=True)):
            parted = [d for d in detoks if classify.decode_differs(d.outcome)]
            if not parted:
                continue
            differ = [{**decoding.shown(d), "outcome": d.outcome} for d in parted]
            entry = {**case_fields(case, subject), "class": "decode", "category": CATEGORIES["decode"],
                     "add_special": add_special, "parse_special": parse_special,
                     "compared": [SIDE_NAMES["llama"], SIDE_NAMES["reference"]],
                     "ids": sides["llama"][pair], "decode": differ,
                     "cause": decode_cause([d.outcome for d in parted], self.config)}
            entry = long_inputs.trimmed_decode(entry, tables["llama"])
            entry = {**entry, "rows": _rows(sides, tables, pair, at=entry.get("decode_at")),
                     "gguf_keys": list(self.keys)}
            out.append((KIND, entry))
        return out

    def _keep_whole(self, case: dict) -> None:
        """A long case's input, kept whole for the cause search of its conversion findings (they show a
        window of it)."""
        text = case.get("text")
        if isinstance(text, str) and len(text) > long_inputs.LONG_TEXT:
            self.inputs[str(case.get("id"))] = text

    def explain(self, config: RunConfig, path: Path, result: ModelResult) -> None:
        """Each conversion finding of `result` given its cause by experiment (`causes.explain_findings`).

        A search that cannot run says so on the findings (`not traced`); it never fails the run.
        """
        entries = [e for e in result.reference_findings if e.get("class") == "conversion"]
        if not entries:
            return
        try:
            with tempfile.TemporaryDirectory(prefix="gguf-parity-causes-") as tmp, \
                    causes.Finder(path, self.spec, Path(tmp), args=dict(config.reference_args),
                                  timeout=config.engine_timeout) as finder:
                self.causes = causes.explain_findings(entries, finder, texts=self.inputs)
        except Exception as exc:  # noqa: BLE001 - a cause is a lead for the reader, never the run's failure
            why = f"the cause search could not run: {type(exc).__name__}: {exc}"[:300]
            for entry in entries:
                entry.setdefault("cause", {"cause": causes.NOT_TRACED, "why": why})
            self.causes = Counter({str(e.get("case_id")): e["cause"]["cause"] for e in entries}.values())
        self.classes = count_classes(result.reference_findings)

    def conclude(self, result: ModelResult) -> None:
        """The counts into `result.reference`; not checked when the original was compared on nothing."""
        result.reference = {**self.counts.as_dict(), "spec": self.spec, "errors": self.errors,
                            "gguf_keys": list(self.keys), "causes": dict(self.causes),
                            "cause_classes": dict(self.classes)}
        compared = self.counts.classes["conversion"]["checked"]
        if result.cases and not compared and not result.not_checked:
            result.not_checked = (f"the reference {self.spec} could be compared on no case "
                                  f"({self.counts.cases} not applicable or failed)")

    def close(self) -> None:
        self.engine.close()


def _config(spec: str) -> dict:
    """The original's tokenizer_config.json ({} for tekken, or none beside it): what it asks of its decode."""
    ref = specs.parse(spec)
    return hf.config_beside(ref.path) if ref.kind in specs.WITH_CONFIG else {}


DECODE_CAUSES = {
    "clean_up_tokenization_spaces": "llama.cpp's detokenize cleans up the spaces before ? ! . , and in "
                                    "contractions (its clean_spaces, set by the pre-tokenizer name)",
    "leading_space": "one leading space apart: llama.cpp keeps the first piece's space prefix (after a BOS, or "
                     "a word-start marker) where the original's decode drops it, or the other way round",
}


def decode_cause(outcomes: list[str], config: dict) -> dict:
    """A decode finding's cause: the known llama.cpp behaviours its detokenizations part by, and why they
    stay findings (the original's own configuration does not ask for them); `unexplained` when any part
    otherwise. A decode difference is set aside only where the original's configuration asks for llama.cpp's
    behaviour, and then its decode agrees (`hf`, `spm`: `applied` follows `clean_up_tokenization_spaces`)."""
    if "differ" in outcomes:
        return {"cause": causes.UNEXPLAINED, "class": "unexplained"}
    names = sorted({part for o in outcomes for part in o.removeprefix("explained:").split("+")})
    said = config.get("clean_up_tokenization_spaces", "absent")
    why = [DECODE_CAUSES.get(n, n) for n in names]
    if "clean_up_tokenization_spaces" in names:
        why.append(f"the original's tokenizer_config.json has clean_up_tokenization_spaces: {said!r}, so its own "
                   "decode keeps them")
    return {"cause": "+".join(names), "class": "llama.cpp-behaviour", "why": "; ".join(why)}


def count_classes(findings: list[dict]) -> Counter[str]:
    """Conversion cases per class of difference (each case's `cause["class"]`, as `causes` counts its cause;
    a decode finding names its class on the entry). A case no experiment was run on is `not traced`, not
    unexplained: past the search's limit, nothing is known about it."""
    seen = {str(e.get("case_id")): _class_of(e["cause"])
            for e in findings if e.get("class") == "conversion" and isinstance(e.get("cause"), dict)}
    return Counter(seen.values())


def _class_of(cause: dict) -> str:
    if cause.get("cause") == causes.NOT_TRACED:
        return causes.NOT_TRACED
    return str(cause.get("class") or causes.UNEXPLAINED)


def _keys(path: Path, spec: str) -> list[str]:
    """gguf_keys' discrepancy lines and the converter's own warnings (its X.convert.json); a check that cannot
    run says so in one line (it names keys, decides nothing)."""
    warnings = [f"converter (X.convert.json): {line}" for line in gguf_keys.converter_warnings(path)]
    try:
        return [d.line() for d in gguf_keys.discrepancies(path, spec)] + warnings
    except Exception as exc:  # noqa: BLE001 - a lead for the cards, never the run's failure
        return [f"(gguf_keys could not check this file: {type(exc).__name__}: {exc})", *warnings]


def _per_pair(outcome: Any) -> list[list[int] | None]:
    """Ids per flag pair from any side's outcome; None for each pair where it has nothing."""
    ids = classify.outcome_ids(outcome)
    return ids if ids is not None else [None] * len(classify.FLAG_PAIRS)


def _pair_index(entry: dict) -> int | None:
    key = (entry.get("add_special"), entry.get("parse_special"))
    return classify.FLAG_PAIRS.index(key) if key in classify.FLAG_PAIRS else None


def _rows(sides: dict[str, list], tables: dict[str, TokenTable], pair: int, at: int | None = None) -> list[dict]:
    """The three rows of tokens of a card: engine, llama.cpp, original; each id with its text. On a long
    case each row keeps the ids around the sides' first difference (`long_inputs.rows_window`), with how
    many it left out `before` and `after` (`at`: the index to keep when the sides' ids agree)."""
    order = ("engine", "llama", "reference")
    window = long_inputs.rows_window([sides[side][pair] for side in order], at)
    rows: list[dict[str, Any]] = []
    for side in order:
        ids = sides[side][pair]
        if ids is None:
            rows.append({"side": SIDE_NAMES[side], "ids": None, "tokens": None})
            continue
        lo, hi = window or (0, len(ids))
        kept = list(ids[lo:hi])
        row: dict[str, Any] = {"side": SIDE_NAMES[side], "ids": kept,
                               "tokens": [_token(tables[side], i) for i in kept]}
        if window:
            row.update(before=min(lo, len(ids)), after=max(len(ids) - hi, 0))
        rows.append(row)
    return rows


def _token(table: TokenTable, token: int) -> dict:
    """An id with its text; where llama.cpp's piece differs from the token's text (a byte-level BPE token
    `à¤ķ`, a `▁word`), the piece too, as the text it stands for (`piece`), with its bytes when they are not
    ASCII (`bytes`)."""
    try:
        text, piece = table.text(token), table.piece(token)
    except Exception:  # noqa: BLE001 - display only: an id the GGUF's table lacks
        return {"id": token, "text": "?"}
    out = {"id": token, "text": visible(text)}
    if piece != text:
        out["piece"] = visible(piece)
        if not piece.isascii():
            out["bytes"] = piece.hex(" ")
    return out


def boundary_cases(config: RunConfig, model: Model) -> list[dict]:
    """With `--reference` and the default corpora: boundary cases from the original's own special and added
    tokens that the GGUF does not hold the same way (`boundaries.reference_cases`, ids `bnd-ref-...`), and
    the cases derived from the original's rules (`derived.derived_cases`, ids `bnd-orig-...`)."""
    if not config.reference or not config.default_corpora:
        return []
    level = boundaries.level()
    return (boundaries.reference_cases(model, added.texts(config.reference), level)
            + derived.derived_cases(original.read(config.reference), level))


def fuzz_specials(config: RunConfig, model: Model) -> tuple[str, ...]:
    """With `--reference`: the same tokens for the fuzzer's special-token strategy, beside the GGUF's own."""
    if not config.reference:
        return ()
    return tuple(boundaries.reference_specials(model, added.texts(config.reference)))
