"""The long-document phase of the live run: documents past 64 KiB, a failure cut to its smallest window.

After the corpora and the fuzz, `check_documents` lets Hypothesis compose `long_docs`
documents per model (`harness.inputs.strategies.long_documents`: short parts, the corpus's
own among them, repeated, numbered or cycled, one hard part planted), of 66,000 bytes and up
(`long_bytes`, the largest), each judged against live llama.cpp like a fuzz input. The first
failing document is cut to its smallest failing window (`harness.inputs.shrink`: by lines,
then words, then characters), and that window is the finding: the report shows its size,
where it sat in the document, and a short spelling of it (`'ab ' * 21846 + 'x'`), and the
cases file beside the report holds it whole for the reproduce command.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from hypothesis.errors import HypothesisWarning

from ..compare.result import ModelResult
from ..inputs import strategies
from ..inputs.fuzz import hunt
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
                    result: ModelResult, *, docs: int, max_bytes: int, seed: int | None) -> int:
    """`docs` long documents judged, the first failing one shrunk to its smallest failing window; how many judged."""
    if docs <= 0:
        return 0
    memo: dict[str, list] = {}

    def judged(case: dict) -> list:
        if case["id"] not in memo:
            memo[case["id"]] = judge(case)
        return memo[case["id"]]

    low = strategies.LONG_MIN_BYTES
    strategy = strategies.long_documents(view, texts=texts, max_bytes=max_bytes)
    with warnings.catch_warnings():  # Hypothesis warns that a 66 kB example's repr is large: it is meant to be
        warnings.simplefilter("ignore", HypothesisWarning)
        outcome = hunt(strategy, judged, n=docs, seed=seed, key=f"{name}:long", shrink=False)
    result.cases += outcome.generated
    if outcome.case is None:
        why = "".join(f"; {text}" for kind, text in outcome.findings if kind == "note")
        result.notes.append(f"long documents: {outcome.generated} of {low:,} to {max(low, max_bytes):,} bytes "
                            f"agreed{why}")
        return outcome.generated
    document = strategies.case_input(outcome.case)
    window = smallest_window(document, lambda value: bool(judged(strategies.as_case(value, prefix="long"))),
                             budget=SHRINK_BUDGET)
    case = strategies.as_case(window.value, prefix="long")
    spelled, exact = spell(window.value)
    size = len(strategies.input_bytes(window.value))
    shown = {"document_bytes": len(strategies.input_bytes(document)), "window_bytes": size,
             "window": [window.start, window.end], "spelled": spelled, "exact": exact}
    result.inputs[case["id"]] = case
    for kind, entry in judged(case):
        result.add(kind, {**bounded(entry), "fuzz": True, "long": shown})
    result.notes.append(
        f"long documents: the first failing document ({shown['document_bytes']:,} bytes, after "
        f"{outcome.generated}) shrinks to a {size:,}-byte window at characters {window.start:,}..{window.end:,} "
        f"({window.judged} windows judged): {spelled}{'' if exact else ' (cut; the cases file holds it whole)'}")
    return outcome.generated


def bounded(entry: dict) -> dict:
    """`entry` with its display fields cut to `FIELD_LIMIT` characters, so a long window's report stays small."""
    def cut(key: str, value):
        if key in WHOLE or not isinstance(value, str) or len(value) <= FIELD_LIMIT:
            return value
        return f"{value[:FIELD_LIMIT]}... ({len(value):,} characters in all)"
    return {key: cut(key, value) for key, value in entry.items()}
