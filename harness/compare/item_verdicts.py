"""One pytest item's verdict, read from the `ModelResult` the harness's own check produced.

The pytest plugin (`harness.pytest_plugin`) does not judge anything: `run`'s
per-model check (`harness.runs.live.check_model`) or `compare`'s
(`harness.runs.replay.compare_golden`) fills a `ModelResult`, and each item looks
its own case, capability or model-level outcome up in it here. A `Verdict` is
plain data (outcome, message, warnings), so this module needs no pytest:

    pass     the case agrees (with `warnings` when a harness fault was absorbed); the `<fuzz>`
             item's `message` says how many inputs ran
    fail     a finding; `message` is the per-token diff in text, with the reproduce line
    xfail    only a known llama.cpp crash (`harness.oracle.known_crashes`): its id and description; or
             only known differences of the engine (`--parity-expected-differences`, `harness.compare.expected`)
    skip     not checked: the capability is not offered, or the case not applicable to the engine
    flake    an engine flake (`harness.subjects.client`): fails unless flakes are allowed
"""

from __future__ import annotations

from dataclasses import dataclass

from ..subjects.capabilities import CHECKS, FIELD_CHECK
from .diff import visible
from .result import FINDINGS, ModelResult

TRACEBACK_LINES = 12  # of an engine error's traceback shown in the item's message (report.json has it all)
CELL = 30  # width of one side's "id 'text'" column in the token table


@dataclass(frozen=True)
class Verdict:
    """How one item ends: outcome (pass, fail, xfail, skip, flake), why, and warnings to raise on a pass."""

    outcome: str
    message: str = ""
    warnings: tuple[str, ...] = ()


def case_verdict(result: ModelResult, case_id: str, *, known: dict | None = None) -> Verdict:
    """The verdict of corpus case `case_id` (`known`: the known-crashes list's definitions by id)."""
    flakes = [_flake_text(f) for f in result.engine_flakes if case_id in f.get("case_ids", ())]
    faults = tuple(f"harness fault: {f['reason']}" for f in result.harness_faults if f.get("case_id") == case_id)
    if case_id in result.failing:
        found = [e for kind in FINDINGS for e in getattr(result, kind) if e.get("case_id") == case_id]
        found = found or _model_entries(result)  # the engine did not load: every case fails with that
        return Verdict("fail", _joined([*flakes, *(entry_text(e) for e in found)]) or "failing", faults)
    if flakes:
        return Verdict("flake", _joined(flakes), faults)
    if case_id in result.known_crash_ids:
        entries = [e for e in result.known_oracle_crashes if e.get("case_id") == case_id]
        return Verdict("xfail", _joined(_known_text(e, known or {}) for e in entries), faults)
    if case_id in result.known_difference_ids:  # --expected-differences (harness.compare.expected)
        named = dict.fromkeys(f"known difference {e.get('expected_difference')!r}: {e.get('signature_title') or ''}"
                              for e in result.known_differences if e.get("case_id") == case_id)
        return Verdict("xfail", _joined(named), faults)
    if case_id in result.not_applicable:
        return Verdict("skip", f"not applicable: the engine does not offer bytes_input, and case {case_id!r} "
                               "is not valid UTF-8")
    if result.not_checked:
        return Verdict("skip", f"not checked: {result.not_checked}")
    return Verdict("pass", warnings=faults)


def vocab_verdict(result: ModelResult, check: str) -> Verdict:
    """The verdict of one vocabulary record check (`harness.subjects.capabilities.VOCAB_CHECKS`)."""
    capability = CHECKS[check][0]
    row = (result.capabilities or {}).get(check)
    if row is None or row["status"] == "not checked":
        why = result.not_checked or "; ".join(entry_text(e) for e in _model_entries(result)) or "nothing compared"
        return Verdict("fail" if _model_entries(result) else "skip", f"vocabulary {check} not checked: {why}")
    if row["status"] == "not offered":
        return Verdict("skip", f"capability {capability} not offered by the engine (vocabulary check {check})")
    if row["errors"]:
        errors = [e for e in result.engine_errors if e.get("case_id") == "<vocab>"]
        return Verdict("fail", _joined(entry_text(e) for e in errors) or f"vocabulary {check}: engine error")
    if row["differ"]:
        rows = [e for e in result.vocab_mismatches if FIELD_CHECK.get(e.get("field", "")) == check
                or e.get("field") == "n_tokens"]
        return Verdict("fail", _joined(_vocab_text(e) for e in rows) or f"vocabulary {check} differs")
    return Verdict("pass")


def model_verdict(result: ModelResult, *, known: dict | None = None) -> Verdict:
    """The model-level item: loading (both sides), refusals, flakes and faults not tied to a case."""
    faults = tuple(f"harness fault on {f.get('case_id')}: {f['reason']}" for f in result.harness_faults
                   if str(f.get("case_id", "<")).startswith("<"))
    flakes = [_flake_text(f) for f in result.engine_flakes
              if all(str(c).startswith("<") for c in f.get("case_ids", ()))]
    entries = _model_entries(result)
    if result.not_checked and not any(e.get("known_crash") for e in entries):
        return Verdict("fail", f"{result.model} not checked: {result.not_checked}", faults)
    if entries:
        return Verdict("fail", _joined([*flakes, *(entry_text(e) for e in entries)]), faults)
    if flakes:
        return Verdict("flake", _joined(flakes), faults)
    loads = [e for e in result.known_oracle_crashes if e.get("case_id") == "<load>"]
    if loads:
        return Verdict("xfail", _joined(_known_text(e, known or {}) for e in loads), faults)
    return Verdict("pass", warnings=faults)


def fuzz_inputs(result: ModelResult) -> list[str]:
    """The case ids of the failing inputs the fuzz hunt found (each shrunk), in the order found.

    The hunt stops at its first failure, so there is one, or two when the first was only a new
    llama.cpp crash and the hunt went on past crashes (`harness.runs.live`).
    """
    return list(dict.fromkeys(str(e["case_id"]) for e in _hunted(result)))


def fuzz_input_verdict(result: ModelResult, case_id: str) -> Verdict:
    """One failing fuzz input as an item of its own: what it shrank to, then each finding's diff and reproduce line."""
    found = [e for e in _hunted(result) if str(e["case_id"]) == case_id]
    if not found:
        return Verdict("pass")
    first = found[0]
    shown = repr(bytes.fromhex(first["bytes"])) if first.get("bytes") else repr(first.get("text", ""))
    head = f"fuzzing found a failing input, shrunk to {shown} (case {case_id})"
    return Verdict("fail", _joined([head, *(entry_text(e) for e in found)]))


def fuzz_verdict(result: ModelResult, *, itemized: frozenset[str] = frozenset()) -> Verdict:
    """The `<fuzz>` item: the hunt as a whole, how many inputs ran and why it stopped.

    Passes when every failing input it found is an item of its own (`itemized`, its case ids),
    the message then saying how many inputs ran; fails listing, in full, each failing input
    that has no item (`fuzz_input_verdict`'s message). Skipped when the hunt never ran (the
    model was not checked: its `<model>` item says why).
    """
    if not result.fuzz:
        why = result.not_checked or "the model did not load on both sides (see its <model> item)"
        return Verdict("skip", f"not fuzzed: {why}")
    failing = fuzz_inputs(result)
    ran = f"{result.fuzz['ran']} of {result.fuzz['asked']} fuzzed inputs ran"
    stopped = f" (stopped: {result.fuzz['stopped']})" if result.fuzz.get("stopped") else ""
    unlisted = [case_id for case_id in failing if case_id not in itemized]
    if unlisted:
        return Verdict("fail", _joined([f"{ran}{stopped}", *(fuzz_input_verdict(result, c).message for c in unlisted)]))
    if failing:
        return Verdict("pass", f"{ran}{stopped}; failing: {', '.join(failing)}, each an item of its own")
    return Verdict("pass", f"{ran}{stopped}; none failed")


def _hunted(result: ModelResult) -> list[dict]:
    """The findings of the fuzz hunt (not of the long documents, which are generated too)."""
    return [e for kind in FINDINGS for e in getattr(result, kind) if e.get("fuzz") and not e.get("long")]


def phase_verdict(result: ModelResult, phase: str) -> Verdict:
    """The `<long>` or `<calls>` item (`harness.runs.documents`, `harness.runs.calls`): its findings, with the note."""
    found = [e for kind in FINDINGS for e in getattr(result, kind) if e.get(phase)]
    prefix = {"long": "long documents:", "calls": "calls:"}[phase]
    notes = [n for n in result.notes if n.startswith(prefix)]
    if found:
        return Verdict("fail", _joined([*notes, *(entry_text(e) for e in found)]))
    if any("not checked" in n for n in notes):
        return Verdict("skip", _joined(notes))
    return Verdict("pass")


def _model_entries(result: ModelResult) -> list[dict]:
    """Findings about the model rather than a case (`<load>`: the engine or llama.cpp failed to load it)."""
    return [e for kind in FINDINGS for e in getattr(result, kind)
            if e.get("case_id") == "<load>" or (kind == "vocab_mismatches" and e.get("field") == "load")]


def entry_text(entry: dict) -> str:
    """A finding as text: the per-token diff for a mismatch, the error or crash otherwise; the reproduce line."""
    if "first_diff" in entry:
        body = mismatch_text(entry)
    elif "crash" in entry:
        body = f"llama.cpp crashed on this input ({entry['crash'].get('reason')}): a new crash, not a known one"
    elif "error" in entry:
        body = _error_text(entry)
    else:
        body = _vocab_text(entry)
    command = entry.get("command")
    return f"{body}\nreproduce: {command}" if command else body


def mismatch_text(entry: dict) -> str:
    """One mismatch (`harness.compare.diff.diff_encoding` output) as the rows the HTML report draws."""
    flags = f"add_special={entry['add_special']} parse_special={entry['parse_special']}"
    lines = [f"input {_shown(entry)}", f"{flags}: differs from llama.cpp ({entry.get('category', '?')})"]
    if entry.get("first_diff") is None:
        lines.append("token ids agree")
    else:
        lines.append(f"first differing position: {entry['first_diff']}")
        lines.append(f"  {'pos':>5}  {'llama.cpp':<{CELL}}  engine")
        for row in entry.get("aligned", []):
            mark = ">" if row["differs"] else " "
            lines.append(f"{mark} {row['index']:>5}  {_cell(row['expected'], row['expected_text']):<{CELL}}  "
                         f"{_cell(row['got'], row['got_text'])}")
        lines.append(f"differing piece: llama.cpp {entry.get('expected_piece')!r}, engine {entry.get('got_piece')!r}")
    for d in entry.get("detokenize", []):
        lines.append(f"detokenize remove_special={d['remove_special']} unparse_special={d['unparse_special']}: "
                     f"llama.cpp {d['expected']!r}, engine {d['got']!r}")
    return "\n".join(lines)


def _cell(token: int | None, text: str | None) -> str:
    return "-" if token is None else f"{token} {text!r}"


def _shown(entry: dict) -> str:
    if entry.get("bytes"):
        return f"bytes {bytes.fromhex(entry['bytes'])!r}"
    return repr(visible(entry.get("text", "")))


def _error_text(entry: dict) -> str:
    where = "loading the model" if entry.get("case_id") == "<load>" else entry.get("capability", "tokenize")
    tail = [line for line in str(entry.get("traceback") or "").splitlines() if line.strip()][-TRACEBACK_LINES:]
    return "\n".join([f"engine error ({where}): {entry['error']}", *tail])


def _vocab_text(entry: dict) -> str:
    return (f"vocabulary {entry.get('field')} differs at token {entry.get('token')}: "
            f"llama.cpp {entry.get('expected')!r}, engine {entry.get('got')!r}")


def _known_text(entry: dict, known: dict) -> str:
    definition = known.get(entry.get("known_crash"), {})
    reason = entry.get("crash", {}).get("reason", "crash")
    return (f"known llama.cpp crash {entry.get('known_crash')} ({reason}): "
            f"{definition.get('description', 'on the known-crashes list')}")


def _flake_text(flake: dict) -> str:
    return f"engine flake on {flake.get('op')}: {flake.get('first')}; {flake.get('recheck')}"


def _joined(parts) -> str:
    return "\n\n".join(p for p in parts if p)
