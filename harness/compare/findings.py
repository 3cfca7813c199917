"""How one case is judged: a reference record and the engine's outcome, as findings.

`findings()` turns a reference record (llama.cpp's, live or golden) and the engine's
outcome for one case into a list of `(kind, entry)` findings, kinds as in
`harness.report.build.LISTS`, about a `harness.compare.subject.Subject`; it has no side
effects, so the fuzzer can call it on every example and only keep the minimal failure.
"""

from __future__ import annotations

from ..golden.records import field_bytes, unpack_array
from ..oracle.known_crashes import KnownCrashes
from ..subjects.records import EngineError
from . import long_inputs
from .diff import TokenTable, diff_encoding
from .signature import sign
from .subject import Subject


def case_fields(case: dict, subject: Subject) -> dict:
    """The fields every finding about `case` carries."""
    return {"case_id": case["id"], "text": case.get("text", ""), "bytes": case.get("bytes"),
            "command": subject.command(case["id"])}


def crash_info(crash: dict) -> dict:
    """A worker crash record (live or golden, `harness.oracle.workers`) with a one-line `reason` added."""
    kind, timeout = crash.get("kind"), crash.get("timeout")
    timeout = f"{timeout:g}" if isinstance(timeout, (int, float)) else timeout
    reason = {"signal": f"killed by {crash.get('signal')}", "exit": f"exit status {crash.get('exit')}",
              "timeout": f"timeout after {timeout}s", "error": "llama.cpp error"}.get(str(kind), str(kind))
    return {**crash, "reason": reason}


def crash_finding(known: KnownCrashes, model: str, base: dict, crash: dict) -> tuple[str, dict]:
    """An oracle crash as a finding: `known_oracle_crashes` (with the entry id) when the list has it."""
    info = crash_info(crash)
    entry = known.match(model, info)
    if entry is None:
        return "oracle_crashes", {**base, "crash": info}
    return "known_oracle_crashes", {**base, "crash": info, "known_crash": entry.id}


def detok_map(encoding: dict) -> dict[tuple[bool, bool], bytes]:
    return {(d["remove_special"], d["unparse_special"]): field_bytes(d)
            for d in encoding.get("detokenize", [])}


def findings(subject: Subject, case: dict, expected: dict | None, got: dict | EngineError | None,
             *, crash: dict | None = None) -> list[tuple[str, dict]]:
    """What is wrong with the engine's outcome `got` against llama.cpp's record `expected`, each finding
    signed (`harness.compare.signature`: the difference it shows, whatever the case).

    With a `crash` (llama.cpp's), the case is that crash alone: `expected` and
    `got` are not read, and the engine need not have run (`got` None).
    """
    return signed(subject, _findings(subject, case, expected, got, crash=crash))


def signed(subject: Subject, found: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Each `(kind, entry)` with its signature (an entry already signed is kept as it is)."""
    return [(kind, entry if "signature" in entry else sign(subject.name, kind, entry, subject.table))
            for kind, entry in found]


def _findings(subject: Subject, case: dict, expected: dict | None, got: dict | EngineError | None,
              *, crash: dict | None = None) -> list[tuple[str, dict]]:
    base = case_fields(case, subject)
    if crash is not None:
        return [crash_finding(subject.known, subject.name, base, crash)]
    if isinstance(got, EngineError):
        return [("engine_errors", {**base, "error": got.error, "traceback": got.traceback,
                                   "capability": got.capability})]
    if not isinstance(got, dict):  # not applicable: counted apart, neither passed nor failed
        return []
    if expected is None:
        raise ValueError("findings() needs both outcomes unless llama.cpp crashed")
    out = []
    for exp, eng in zip(expected["encode"], got["encode"], strict=True):
        offered = "detokenize" in eng  # an engine without detokenize is compared on ids only
        detok = (detok_map(exp), detok_map(eng)) if offered else (None, None)
        found: dict | None
        if exp["ids"] is None:  # a document's golden: only the first differing block is known
            found = long_inputs.digest_mismatch(exp, eng["ids"], *detok)
        else:
            found = diff_encoding(exp["ids"], eng["ids"], subject.table, got_table=subject.engine_table,
                                  expected_detok=detok[0], got_detok=detok[1])
        flags = {"add_special": exp["add_special"], "parse_special": exp["parse_special"]}
        if found:
            out.append(("mismatches", long_inputs.trimmed({**base, **flags, **found}, subject.engine_table)))
        if "detokenize_error" in eng:
            out.append(("engine_errors", {**base, **flags, **eng["detokenize_error"], "capability": "detokenize"}))
    return out


def vocab_findings(subject: Subject, expected: dict, got: dict | EngineError) -> list[tuple[str, dict]]:
    """Vocabulary differences (flags, special ids, per-token text/score/attr/pieces) as findings."""
    from ..subjects.records import diff_offered
    if isinstance(got, EngineError):
        return signed(subject, [("engine_errors", {"case_id": "<vocab>", "text": "", "error": got.error,
                                                   "traceback": got.traceback, "command": None,
                                                   "capability": "vocabulary"})])
    rows = diff_offered(expected, got)
    return signed(subject, [("vocab_mismatches", _vocab_entry(subject, row, expected, got)) for row in rows])


def _vocab_entry(subject: Subject, row: dict, expected: dict, got: dict) -> dict:
    token = row.get("token")
    entry = {"field": row["field"], "token": token, "category": "vocabulary"}
    if token is None:
        entry.update(token=row.get("block"), expected=row["expected"], got=row["got"])
        return entry
    entry["sides"] = True
    entry["expected"] = _token_side(subject.table, expected, token, row["expected"])
    entry["got"] = _token_side(subject.engine_table, got, token, row["got"])
    return entry


def _token_side(table: TokenTable, vocab: dict, token: int, value) -> dict:
    """One side of a token's difference; an engine that offers no scores (no `token_score`) shows none."""
    from .diff import visible
    scores = unpack_array(vocab["scores"], "<f4") if "scores" in vocab else ()
    return {"text": visible(table.text(token)), "score": float(scores[token]) if token < len(scores) else None,
            "attr": table.attr(token), "value": value}
