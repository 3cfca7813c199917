"""One pytest item's verdict, read from the `ModelResult` the harness's own check produced.

The pytest plugin (`harness.pytest_plugin`) does not judge anything: `run`'s
per-model check (`harness.runs.live.check_model`) or `compare`'s
(`harness.runs.replay.compare_golden`) fills a `ModelResult`, and each item looks
its own case, capability or model-level outcome up in it here. A `Verdict` is
plain data (outcome, message, warnings), so this module needs no pytest:

    pass     the case agrees (with `warnings` when a harness fault was absorbed); the `<fuzz>`
             item's `message` says how many inputs ran
    fail     a finding; `message` names each difference (its signature, `harness.compare.signature`)
             with its flag pairs, the per-token diff of its first finding and the reproduce line
    xfail    only a known llama.cpp crash (`harness.oracle.known_crashes`): its id and description; or
             only known differences of the engine (`--parity-expected-differences`, `harness.compare.expected`)
    skip     not checked: the capability is not offered, or the case not applicable to the engine
    flake    an engine flake (`harness.subjects.client`): fails unless flakes are allowed

A failure text is bounded as pytest's `--tb` bounds a traceback, whatever the findings: an item's
findings are grouped by difference, the first `DIFFERENCES_SHOWN` drawn, each with at most
`DIFF_ROWS` token rows around its first difference; `bounded` then cuts the whole text to
`FAILURE_LINES` lines of at most `LINE_CHARS` characters (about 8 KiB; a reproduce line is never cut),
keeping each difference's signature line and reproduce line. report.html and report.json hold the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..subjects.capabilities import CHECKS, FIELD_CHECK
from .diff import visible
from .result import FINDINGS, ModelResult

TRACEBACK_LINES = 12  # of an engine error's traceback shown in the item's message (report.json has it all)
CELL = 30  # width of one side's "id 'text'" column in the token table
DIFFERENCES_SHOWN = 2  # differences drawn in one item's failure text (the rest counted)
DIFF_ROWS = 10  # token rows of a difference's diff: a few before its first differing row, the rest after
FAILURE_LINES = 40  # lines of one item's failure text, at most
LINE_CHARS = 200  # characters of one line of it, at most (a reproduce line is kept whole, up to COMMAND_CHARS)
COMMAND_CHARS = 4000


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
        return Verdict("fail", bounded(_joined([*flakes, findings_text(found)])) or "failing", faults)
    if flakes:
        return Verdict("flake", bounded(_joined(flakes)), faults)
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
        return Verdict("fail", bounded(findings_text(errors)) or f"vocabulary {check}: engine error")
    if row["differ"]:
        rows = [e for e in result.vocab_mismatches if FIELD_CHECK.get(e.get("field", "")) == check
                or e.get("field") == "n_tokens"]
        shown = [_vocab_text(e) for e in rows[:DIFF_ROWS]] + ([f"... and {len(rows) - DIFF_ROWS} more tokens "
                                                               "(report.json)"] if len(rows) > DIFF_ROWS else [])
        return Verdict("fail", bounded("\n".join(shown)) or f"vocabulary {check} differs")
    return Verdict("pass")


def model_verdict(result: ModelResult, *, known: dict | None = None) -> Verdict:
    """The model-level item: loading (both sides), refusals, flakes and faults not tied to a case."""
    faults = tuple(f"harness fault on {f.get('case_id')}: {f['reason']}" for f in result.harness_faults
                   if str(f.get("case_id", "<")).startswith("<"))
    flakes = [_flake_text(f) for f in result.engine_flakes
              if all(str(c).startswith("<") for c in f.get("case_ids", ()))]
    entries = _model_entries(result)
    if result.not_checked and not any(e.get("known_crash") for e in entries):
        return Verdict("fail", bounded(f"{result.model} not checked: {result.not_checked}"), faults)
    if entries:
        return Verdict("fail", bounded(_joined([*flakes, findings_text(entries)])), faults)
    if flakes:
        return Verdict("flake", bounded(_joined(flakes)), faults)
    loads = [e for e in result.known_oracle_crashes if e.get("case_id") == "<load>"]
    if loads:
        return Verdict("xfail", _joined(_known_text(e, known or {}) for e in loads), faults)
    return Verdict("pass", warnings=faults)


def fuzz_inputs(result: ModelResult) -> list[str]:
    """The case ids of the failing inputs the fuzz hunt found, one per difference (the first input
    that showed it, the one the hunt shrinks), in the order found: however many inputs the hunt
    counted under a difference, it is one item."""
    firsts: dict[str, str] = {}
    for entry in _hunted(result):
        firsts.setdefault(str(entry.get("signature") or entry["case_id"]), str(entry["case_id"]))
    return list(dict.fromkeys(firsts.values()))


def fuzz_input_verdict(result: ModelResult, case_id: str) -> Verdict:
    """One failing fuzz input as an item of its own: what it shrank to, then each finding's diff and reproduce line."""
    found = [e for e in _hunted(result) if str(e["case_id"]) == case_id]
    if not found:
        return Verdict("pass")
    first = found[0]
    shown = repr(bytes.fromhex(first["bytes"])) if first.get("bytes") else repr(first.get("text", ""))
    head = f"fuzzing found a failing input, shrunk to {shown} (case {case_id})"
    return Verdict("fail", bounded(_joined([head, findings_text(found)])))


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
        shown = [fuzz_input_verdict(result, c).message for c in unlisted[:DIFFERENCES_SHOWN]]
        more = len(unlisted) - len(shown)
        tail = [f"... and {more} more failing inputs: {', '.join(unlisted[len(shown):][:20])}"] if more else []
        return Verdict("fail", bounded(_joined([f"{ran}{stopped}", *shown, *tail]), FAILURE_LINES * 2))
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
        return Verdict("fail", bounded(_joined([*notes, findings_text(found)])))
    if any("not checked" in n for n in notes):
        return Verdict("skip", bounded(_joined(notes)))
    return Verdict("pass")


def _model_entries(result: ModelResult) -> list[dict]:
    """Findings about the model rather than a case (`<load>`: the engine or llama.cpp failed to load it)."""
    return [e for kind in FINDINGS for e in getattr(result, kind)
            if e.get("case_id") == "<load>" or (kind == "vocab_mismatches" and e.get("field") == "load")]


def findings_text(entries: list[dict]) -> str:
    """Findings as text, one block per difference (signature): its first `DIFFERENCES_SHOWN`, each with its
    flag pairs, the diff of its first finding and the reproduce line; how many more differences there are."""
    groups: dict[str, list[dict]] = {}
    for entry in entries:
        groups.setdefault(str(entry.get("signature") or id(entry)), []).append(entry)
    blocks = [difference_text(mine) for mine in list(groups.values())[:DIFFERENCES_SHOWN]]
    if len(groups) > DIFFERENCES_SHOWN:
        blocks.append(f"... and {len(groups) - DIFFERENCES_SHOWN} more differences here (report.html, report.json)")
    return _joined(blocks)


def difference_text(entries: list[dict]) -> str:
    """One difference shown by `entries` (findings of one signature): a line naming it and its flag pairs,
    then its first finding's text and reproduce line."""
    first = entries[0]
    pairs = list(dict.fromkeys(_short_pair(e) for e in entries if e.get("add_special") is not None))
    under = f" under {len(pairs)} flag pair{'s' if len(pairs) > 1 else ''} (add_special,parse_special " \
            f"{' '.join(pairs)})" if pairs else ""
    name = " ".join(str(first[k]) for k in ("signature", "signature_title") if first.get(k))
    head = f"difference {name}{under}" if name else ""
    return _joined(["\n".join(filter(None, [head, entry_text(first)]))])


def _short_pair(entry: dict) -> str:
    return f"{str(entry['add_special'])[0]},{str(entry['parse_special'])[0]}"


def _pairs(entry: dict) -> str:
    return f"add_special={entry['add_special']} parse_special={entry['parse_special']}"


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
    """One mismatch (`harness.compare.diff.diff_encoding` output) as rows of tokens, both sides aligned by
    bytes (`by_bytes`; by index for a finding written before it), around the first difference."""
    lines = [f"input {_shown(entry)}", f"{_pairs(entry)}: differs from llama.cpp"]
    if entry.get("first_diff") is None:
        lines.append("token ids agree")
    else:
        lines.append(f"first differing position: {entry['first_diff']}")
        lines.append(f"  {'llama.cpp':<{CELL}}  engine")
        lines += [f"{'>' if differs else ' '} {left:<{CELL}}  {right}" for left, right, differs in _rows(entry)]
        lines.append(_differing_pieces(entry))
    for d in entry.get("detokenize", [])[:4]:
        lines.append(f"detokenize remove_special={d['remove_special']} unparse_special={d['unparse_special']}: "
                     f"llama.cpp {d['expected']!r}, engine {d['got']!r}")
    return "\n".join(lines)


def _rows(entry: dict) -> list[tuple[str, str, bool]]:
    """(llama.cpp's tokens, the engine's, differs) for at most `DIFF_ROWS` rows around the first differing one."""
    found = entry.get("by_bytes")
    if isinstance(found, dict) and isinstance(found.get("segments"), list):
        rows = [(_tokens(s.get("expected") or []), _tokens(s.get("got") or []), bool(s.get("differs")))
                for s in found["segments"]]
    else:  # a finding written before the sides were aligned by bytes: its rows by index
        rows = [(_cell(r.get("expected"), r.get("expected_text")), _cell(r.get("got"), r.get("got_text")),
                 bool(r.get("differs"))) for r in entry.get("aligned") or []]
    first = next((k for k, row in enumerate(rows) if row[2]), 0)
    start = max(first - 2, 0)
    return rows[start:start + DIFF_ROWS]


def _differing_pieces(entry: dict) -> str:
    """Each side's own pieces where they first differ (`048` against `04` `8`); for a finding written before
    the sides were aligned by bytes, the differing span spelled."""
    segments = (entry.get("by_bytes") or {}).get("segments") or []
    first = next((s for s in segments if s.get("differs")), None)
    if first is None:
        return f"differing piece: llama.cpp {entry.get('expected_piece')!r}, engine {entry.get('got_piece')!r}"
    sides = [" ".join(repr(str(t.get("piece", t.get("text", "")))) for t in first.get(k) or []) or "nothing"
             for k in ("expected", "got")]
    return f"differing pieces: llama.cpp {sides[0]}, engine {sides[1]}"


def _tokens(tokens: list[dict]) -> str:
    return " ".join(f"{t.get('id')} {str(t.get('piece', t.get('text', '')))!r}" for t in tokens) or "-"


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


def bounded(text: str, lines: int = FAILURE_LINES) -> str:
    """`text` cut to `lines` lines of at most `LINE_CHARS` characters each. Past the cut, the lines that name
    a difference and its reproduce line are kept (as many as fit), then a line saying how many were left out."""
    rows = [row if len(row) <= LINE_CHARS or (row.startswith("reproduce: ") and len(row) <= COMMAND_CHARS)
            else row[:LINE_CHARS - 1] + "…" for row in text.splitlines()]
    if len(rows) <= lines:
        return "\n".join(rows)
    head, rest = rows[:lines // 2], rows[lines // 2:]
    keep = [row for row in rest if row.startswith(("difference ", "reproduce: ", "... and "))][:lines // 2 - 1]
    left = len(rest) - len(keep)
    return "\n".join([*head, *keep, f"... ({left} more lines: report.html and report.json have them)"])
