"""`--baseline REPORT`: an earlier run's differences carried into this run, checked again, then compared.

`Baseline.read(path, kind)` reads the baseline as `merge-reports` reads a part (`harness.runs.merge_parts`:
a regular file within bounds, its kind's schema, its counts held to its entries): a report.json, or a
chat check's messages.json, or the folder holding one. Its signatures are its `differences` records,
every signature of its `findings/<model>.jsonl` (report.json lists at most 50 differences per model), and
the signatures of its chat findings (`messages`); each signature's representative input is the whole
input of its representative case, from `cases/<model>.jsonl` beside it, else the representative's own
text when the report shows it whole.

In the run, `carry(model, cases)` (`run`: `harness.runs.live.gather_cases`) adds each representative input
of that model's signatures that the cases do not already hold, and notes which case checks each
signature; `note(model, cases)` (`compare`, whose cases are the goldens') only notes which of them the
goldens hold. At the end `compare(report, results)` gives the report's `baseline` block
(`harness.report.baseline.sort`): a baseline signature the run does not show is "fixed" only when its
case was checked and compared (its model checked, the engine loaded, the case owned by this shard, not
a known llama.cpp crash or not applicable).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare.result import ModelResult
from ..errors import SetupError
from ..files import input_limits, jsonl
from ..report import baseline as sorting
from ..report.baseline import conversation_digest, input_digest
from . import merge_parts

MAX_LINE = 4 << 20  # one case of the baseline's cases file (a long document's whole input)
CHAT = "chat"


def _safe_name(model: str) -> bool:
    """A model name usable as a file name in the baseline's folders (no path, no hidden file)."""
    return bool(model) and model == Path(model).name and not model.startswith(".") and "\x00" not in model


@dataclass
class Planned:
    """Where a baseline signature is checked in this run: the case id and its input's digest."""

    case_id: str
    input: str


@dataclass
class Baseline:
    """A baseline report read for `--baseline` (see the module)."""

    path: Path
    sha256: str
    meta: dict[str, Any]
    records: list[dict[str, Any]]              # token-level signatures (report.json's differences and findings)
    chat_records: list[dict[str, Any]]         # chat signatures (harness.chat.signature.group)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # signature -> representative case
    planned: dict[str, Planned] = field(default_factory=dict)         # signature -> its case in this run
    added: set[tuple[str, str]] = field(default_factory=set)  # (model, case id) of each input carried in
    own: dict[str, Any] = field(default_factory=dict)  # the report's own `baseline` block, when it has one
    models: set[str] = field(default_factory=set)      # the models the report checked
    has_chat: bool = False                             # it holds a chat check (messages.json, or `messages`)
    owns: Callable[[str, str], bool] | None = None  # `--shard`: whether this shard checks (model, case id)
    chat_evidence: Callable[[dict[str, Any] | None], tuple[dict[str, dict], dict[str, str]]] | None = None

    @classmethod
    def read(cls, path: Path, prefer: str = "report.json") -> Baseline:
        """The baseline at `path`: a report.json or messages.json file, or a folder holding one (`prefer`
        first); `SetupError` (exit 2, one line) for anything that is not such a report."""
        kind = "messages.json" if path.name == "messages.json" else "report.json"
        if path.is_dir():
            other = "messages.json" if prefer == "report.json" else "report.json"
            kind = other if not (path / prefer).is_file() and (path / other).is_file() else prefer
        data = (part := merge_parts.read(path, kind)).data
        meta: dict[str, Any] = data["meta"] if isinstance(data.get("meta"), dict) else {}
        messages = data if kind == "messages.json" else data.get("messages")
        records: list[dict[str, Any]] = [] if kind == "messages.json" else list(data.get("differences") or [])
        found = cls(part.file.absolute(), part.digest, meta, records, _chat_records(messages),
                    own=data["baseline"] if isinstance(data.get("baseline"), dict) else {},
                    models=_checked_models(data) if kind == "report.json" else set(),
                    has_chat=isinstance(messages, dict))
        if kind == "report.json":
            found._read_findings(part.file.parent, data)
        return found

    # --- reading -------------------------------------------------------------------------------

    def _read_findings(self, folder: Path, data: dict[str, Any]) -> None:
        """Signatures only findings/<model>.jsonl names (report.json cut its list), then each input."""
        known = {r["id"] for r in self.records}
        for model in data["summary"]["per_model"]:
            path = folder / "findings" / f"{model}.jsonl"
            if not _safe_name(model) or not path.is_file():
                continue
            for line in _lines(path):
                sig, case_id = line.get("signature"), line.get("case_id")
                if isinstance(sig, str) and sig not in known:
                    known.add(sig)
                    self.records.append({"id": sig, "title": f"{sig} (not listed in the baseline's report.json)",
                                         "model": model, "cases": 1, "representative": {"case_id": case_id},
                                         "reproduce": None})
        by_model: dict[str, list[dict[str, Any]]] = {}
        for record in self.records:
            by_model.setdefault(str(record.get("model", "")), []).append(record)
        for model, records in by_model.items():
            wanted = {c for r in records if (c := _case_id(r)) is not None}
            whole = _cases(folder / "cases" / f"{model}.jsonl", wanted) if _safe_name(model) else {}
            for record in records:
                case = _input_of(record, whole)
                if case is not None:
                    self.inputs[record["id"]] = case

    def digest(self, sig: str) -> str | None:
        """The digest of signature `sig`'s representative input (a case's bytes, a chat conversation)."""
        if sig in self.inputs:
            return input_digest(self.inputs[sig])
        chat = next((r for r in self.chat_records if r["id"] == sig), None)
        conv = (chat or {}).get("representative", {}).get("conversation")
        if isinstance(conv, dict):
            return conversation_digest(conv.get("messages"), conv.get("tools"), conv.get("add_generation_prompt"))
        return None

    def rechecked(self) -> dict[str, str | None]:
        """Signature -> input digest of what this report's own `--baseline` run checked again and found
        fixed or unchanged (from its `baseline` block; empty without one)."""
        out: dict[str, str | None] = {}
        for name in ("fixed", "unchanged"):
            items = self.own.get(name)
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and isinstance(item.get("id"), str):
                    out[item["id"]] = item["input"] if isinstance(item.get("input"), str) else None
        return out

    # --- in the run ----------------------------------------------------------------------------

    def carry(self, model: str, cases: list[dict]) -> list[dict]:
        """`cases` with the representative input of each of `model`'s baseline signatures added (once)."""
        return self._map(model, cases, add=True)

    def note(self, model: str, cases: list[dict]) -> None:
        """Note which of `model`'s baseline representatives `cases` hold (nothing is added: the goldens')."""
        self._map(model, cases, add=False)

    def _map(self, model: str, cases: list[dict], *, add: bool) -> list[dict]:
        by_input = {d: str(c["id"]) for c in cases if (d := input_digest(c)) is not None}
        ids = {str(c["id"]) for c in cases}
        out = list(cases)
        for record in self.records:
            case = self.inputs.get(record["id"])
            if record.get("model") != model or case is None:
                continue
            digest = input_digest(case)
            if digest is None:
                continue
            if digest not in by_input and add:
                case_id = str(case["id"])
                while case_id in ids:  # an id the run's cases use for another input
                    case_id = f"baseline:{case_id}"
                out.append({"id": case_id, **{k: case[k] for k in ("text", "bytes") if k in case}})
                by_input[digest] = case_id
                ids.add(case_id)
                self.added.add((model, case_id))
            if digest in by_input:
                self.planned[record["id"]] = Planned(by_input[digest], digest)
        return out

    # --- at the end ----------------------------------------------------------------------------

    def compare(self, report: dict[str, Any], results: Iterable[ModelResult] | None, *,
                left: dict[str, list[str]] | None = None) -> dict[str, Any]:
        """The report's `baseline` block for a run whose models' results are `results`; None for a chat
        check (`chat --baseline`), which compares only the chat signatures (`report` holds its `messages`).
        `left`: model -> case ids the run did not check (`--maxfail` stopped it first)."""
        results = None if results is None else list(results)
        before = self.chat_records if results is None else self.records + self.chat_records
        rechecked, reasons = ({}, {}) if results is None else self._evidence(
            {r.model: r for r in results}, self.owns, left or {})
        known = {str(e.get("signature")) for r in results or [] for e in getattr(r, "known_differences", None) or []}
        messages = report.get("messages")
        if self.chat_records:
            got, why = self.chat_evidence(messages) if self.chat_evidence else ({}, {})
            rechecked.update(got)
            reasons.update({r["id"]: why.get(r["id"], "the run checked no chat templates")
                            for r in self.chat_records if r["id"] not in got})
        block = sorting.sort(before, list(report.get("differences") or []) + _chat_records(messages), rechecked,
                             reasons, known)
        return {"report": str(self.path), "sha256": self.sha256, "meta": sorting.identity(self.meta),
                "carried": len(self.added), **block, **_blocking(messages)}

    def _evidence(self, results: dict[str, ModelResult], owns: Callable[[str, str], bool] | None,
                  left: dict[str, list[str]]) -> tuple[dict[str, dict], dict[str, str]]:
        rechecked: dict[str, dict] = {}
        reasons: dict[str, str] = {}
        for record in self.records:
            sig, model = record["id"], str(record.get("model", ""))
            why = _model_unchecked(results.get(model), model)
            case_id = _case_id(record)
            plan = self.planned.get(sig)
            if why is None and case_id is not None:  # a case-level difference: its case, checked and compared
                why = self._case_unchecked(sig, results[model], plan, owns, set(left.get(model) or ()))
            if why is None:
                rechecked[sig] = {"case_id": plan.case_id, "input": plan.input} if plan and case_id else {}
            else:
                reasons[sig] = why
        return rechecked, reasons

    def _case_unchecked(self, sig: str, result: ModelResult, plan: Planned | None,
                        owns: Callable[[str, str], bool] | None, left: set[str]) -> str | None:
        if sig not in self.inputs:
            return "its input is neither in the baseline's cases file nor whole in its report"
        if plan is None:
            return "its input was not among this run's cases"
        if plan.case_id in left:
            return f"its case {plan.case_id} was not checked (the run stopped first: --maxfail)"
        if owns is not None and not owns(result.model, plan.case_id):
            return f"its case {plan.case_id} belongs to another shard"
        if plan.case_id in result.known_crash_ids - result.failing:
            return f"its case {plan.case_id} is a known llama.cpp crash: nothing compared"
        if plan.case_id in result.not_applicable - result.failing:
            return f"its case {plan.case_id} is not applicable to this engine"
        if any(str(e.get("case_id")) == plan.case_id for e in result.engine_errors + result.oracle_crashes):
            return f"its case {plan.case_id} ended in an engine error or a llama.cpp crash: its ids were not compared"
        return None


def _checked_models(data: dict[str, Any]) -> set[str]:
    """The models a report checked: its per_model entries, less those not checked or refused."""
    return {m for m, c in data["summary"]["per_model"].items()
            if not (c.get("not_checked") or c.get("expected_refusal")) and c.get("cases")}


def _model_unchecked(result: ModelResult | None, model: str) -> str | None:
    """Why nothing of `model` can count as checked again, or None."""
    if result is None:
        return f"model {model} was not in this run"
    if result.not_checked or result.expected_refusal:
        return f"model {model} was not checked ({result.not_checked or result.expected_refusal})"
    if any(str(e.get("case_id")) == "<load>" for e in result.engine_errors + result.oracle_crashes
           + result.known_oracle_crashes):
        return f"model {model}: a side did not load it, so nothing was compared"
    return None


def _case_id(record: dict[str, Any]) -> str | None:
    """The representative's case id; None for a difference about the model (`<load>`, `<vocab>`, none)."""
    rep = record.get("representative")
    case_id = rep.get("case_id") if isinstance(rep, dict) else None
    if case_id is None or str(case_id).startswith("<"):
        return None
    return str(case_id)


def _input_of(record: dict[str, Any], whole: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The representative's whole input: from the cases file, else the representative when not windowed."""
    case_id = _case_id(record)
    if case_id is None:
        return None
    if case_id in whole:
        return whole[case_id]
    rep = record["representative"]
    if rep.get("text_window") or rep.get("digest_diff") is not None:
        return None
    if isinstance(rep.get("bytes"), str) and rep["bytes"]:
        return {"id": case_id, "bytes": rep["bytes"]}
    if isinstance(rep.get("text"), str):
        return {"id": case_id, "text": rep["text"]}
    return None


def _lines(path: Path) -> Iterable[dict[str, Any]]:
    """The objects of a JSON Lines file, streamed within the report bounds; `SetupError` on a bad one."""
    try:
        for _, item in jsonl.read(path, max_bytes=input_limits.MAX_REPORT_BYTES, max_line=MAX_LINE):
            if isinstance(item, dict):
                yield item
    except jsonl.JSONLError as exc:
        raise SetupError(f"--baseline: {exc}") from None


def _cases(path: Path, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """The cases of the baseline's cases file with an id in `wanted` (each checked: an id and one input)."""
    if not wanted or not path.is_file():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for item in _lines(path):
        case_id = item.get("id")
        if isinstance(case_id, str) and case_id in wanted and input_digest(item) is not None \
                and ("text" in item) != ("bytes" in item):
            out[case_id] = {"id": case_id, **{k: item[k] for k in ("text", "bytes") if k in item}}
    return out


def _chat_records(messages: Any) -> list[dict[str, Any]]:
    """The chat signatures of a messages section: the `signature` each finding carries, grouped."""
    if not isinstance(messages, dict):
        return []
    records: dict[str, dict[str, Any]] = {}
    for kind in ("findings", "oracle_crashes"):
        for finding in messages.get(kind) or []:
            sig = finding.get("signature") if isinstance(finding, dict) else None
            if not isinstance(sig, str):
                continue
            record = records.setdefault(sig, {"id": sig, "title": str(finding.get("signature_title") or sig),
                                              "model": str(finding.get("target") or ""), "layer": CHAT,
                                              "cases": 0, "representative": finding,
                                              "reproduce": finding.get("reproduce")})
            record["cases"] += 1
    return list(records.values())


def _blocking(messages: Any) -> dict[str, Any]:
    """What keeps a run failing whatever its baseline (`harness.report.baseline.exit_status`): findings
    without a signature (a three-way chat block's), and a chat check that did not ask every case."""
    if not isinstance(messages, dict):
        return {}
    unsigned = sum(1 for b in messages.get("three_way") or [] if isinstance(b, dict) and not b.get("ok", True))
    unsigned += sum(1 for kind in ("findings", "oracle_crashes") for f in messages.get(kind) or []
                    if not (isinstance(f, dict) and isinstance(f.get("signature"), str)))
    incomplete = ("interrupted" if messages.get("interrupted") else "its deadline passed"
                  if messages.get("deadline_passed") else "cases were not asked" if messages.get("not_asked") else None)
    return {**({"unsigned": unsigned} if unsigned else {}),
            **({"incomplete": f"the chat check is incomplete: {incomplete}"} if incomplete else {})}
