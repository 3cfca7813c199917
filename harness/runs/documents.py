"""The long-document phase of the live run: documents past 64 KiB, each new difference cut to its smallest window.

After the corpora and the fuzz, whatever they found, `check_documents` lets Hypothesis compose
`long_docs` documents per model (`harness.inputs.strategies.long_documents`: short parts, the
corpus's own among them, repeated, numbered or cycled, one hard part planted), of 66,000 bytes and
up (`long_bytes`, the largest), each judged against live llama.cpp like a fuzz input. A failing
document's findings are recorded as any case's, shown windowed around the first difference
(`harness.compare.long_inputs`, display fields cut by `bounded`). A document that shows a
difference the run had not seen (a signature not in `known`: not the corpus's, not the fuzz's, not
an earlier document's) is cut to its smallest window still showing it (`harness.inputs.shrink`: by
lines, then words, then characters), and that window is a finding too: the report shows its size,
where it sat in the document, and a short spelling of it (`'ab ' * 21846 + 'x'`), and the cases
file beside the report holds it whole for the reproduce command. A document that only repeats
known differences is not cut: each window would cost a document's judgement to show again what a
shorter case shows already.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

from hypothesis.errors import HypothesisWarning

from ..compare.result import ModelResult
from ..inputs import strategies
from ..inputs.fuzz import Found, finding_signature, hunt
from ..inputs.shrink import smallest_window, spell

Judge = Callable[[dict], list]
SHRINK_BUDGET = 120  # windows judged at most while shrinking one document
MAX_TEXTS = 400  # corpus texts the documents draw their parts from
MAX_TEXT_CHARS = 400
FIELD_LIMIT = 2000  # characters of a finding's display fields (ids, detokenizations) kept for a long window
WHOLE = ("text", "bytes", "command")  # kept whole: the cases file and the reproduce command need them


def corpus_texts(cases: list[dict]) -> tuple[str, ...]:
    """Short texts of the corpus cases, the material the documents are composed of."""
    texts = [c["text"] for c in cases if isinstance(c.get("text"), str) and 0 < len(c["text"]) <= MAX_TEXT_CHARS]
    return tuple(dict.fromkeys(texts))[:MAX_TEXTS]


def check_documents(name: str, judge: Judge, view: strategies.VocabView | None, texts: tuple[str, ...],
                    result: ModelResult, *, docs: int, max_bytes: int, seed: int | None, database: bool | None = None,
                    database_dir: Path | None = None, known: Iterable[str] = (),
                    on_example: Callable[[dict, list], None] | None = None) -> int:
    """`docs` long documents judged, each new difference's first document cut to its smallest window; how many
    documents were judged. `on_example(case, findings)` sees each document (not the windows); `database_dir`
    is the example database's folder (`hunt`)."""
    if docs <= 0:
        return 0
    memo: dict[str, list] = {}

    def judged(case: dict) -> list:
        if case["id"] not in memo:
            memo[case["id"]] = judge(case)
        return memo[case["id"]]

    def generated(case: dict, findings: list) -> None:
        if on_example:
            on_example(case, findings)
        if findings:
            value = strategies.case_input(case)
            _record(result, case, findings, _shown(value, value, 0, len(value)))

    found: list[Found] = []
    strategy = strategies.long_documents(view, texts=texts, max_bytes=max_bytes)
    with warnings.catch_warnings():  # Hypothesis warns that a 66 kB example's repr is large: it is meant to be
        warnings.simplefilter("ignore", HypothesisWarning)
        outcome = hunt(strategy, judged, n=docs, seed=seed, database=database, database_dir=database_dir,
                       key=f"{name}:long", shrink=False, known=known, prefix="long", on_example=generated,
                       on_found=found.append)
    for new in found:
        _cut(new, judged, result, after=outcome.generated)
    if not outcome.failing:
        low = strategies.LONG_MIN_BYTES
        why = "".join(f"; {text}" for text in outcome.notes)
        result.notes.append(f"long documents: {outcome.generated} of {low:,} to {max(low, max_bytes):,} bytes "
                            f"agreed{why}")
    elif not found:
        result.notes.append(f"long documents: {outcome.failing} of {outcome.generated} differ, each only as "
                            "shorter cases differ already (not cut to a window)")
    return outcome.generated


def _cut(found: Found, judged: Judge, result: ModelResult, *, after: int) -> None:
    """A document that showed a new difference, cut to its smallest window showing one of its new signatures."""
    wanted = set(found.new)
    document = strategies.case_input(found.case)
    window = smallest_window(document, lambda value: bool(
        wanted & {finding_signature(f) for f in judged(strategies.as_case(value, prefix="long"))}),
        budget=SHRINK_BUDGET)
    case = strategies.as_case(window.value, prefix="long")
    shown = _shown(document, window.value, window.start, window.end)
    _record(result, case, judged(case), shown)
    size = shown["window_bytes"]
    result.notes.append(
        f"long documents: a new difference in document {found.after} of {after} ({shown['document_bytes']:,} "
        f"bytes) shrinks to a {size:,}-byte window at characters {window.start:,}..{window.end:,} "
        f"({window.judged} windows judged): {shown['spelled']}"
        f"{'' if shown['exact'] else ' (cut; the cases file holds it whole)'}")


def _shown(document: str | bytes, value: str | bytes, start: int, end: int) -> dict:
    """The `long` field of a finding: the document's size, the window's size and place, its spelling."""
    spelled, exact = spell(value)
    return {"document_bytes": len(strategies.input_bytes(document)), "window_bytes": len(strategies.input_bytes(value)),
            "window": [start, end], "spelled": spelled, "exact": exact}


def _record(result: ModelResult, case: dict, findings: list, shown: dict) -> None:
    """A failing document or window: its whole input kept for the cases file, its findings cut for display."""
    if case["id"] in result.inputs:
        return
    result.inputs[case["id"]] = case
    for kind, entry in findings:
        result.add(kind, {**bounded(entry), "fuzz": True, "long": shown})


def bounded(entry: dict) -> dict:
    """`entry` with its display fields cut to `FIELD_LIMIT` characters, so a long window's report stays small."""
    def cut(key: str, value):
        if key in WHOLE or not isinstance(value, str) or len(value) <= FIELD_LIMIT:
            return value
        return f"{value[:FIELD_LIMIT]}... ({len(value):,} characters in all)"
    return {key: cut(key, value) for key, value in entry.items()}
