"""Three truths on one case: the engine under test, llama.cpp and the original tokenizer (pure functions).

Each case is tokenized under llama.cpp's four (add_special, parse_special)
pairs by three parties. Any of them may have nothing for a pair: missing, an
error, or not applicable (a pair the reference cannot express, bytes input).
Three comparisons are made, and each is its own class of finding:

    parity              engine != llama.cpp       today's parity finding
    conversion          llama.cpp != original     the GGUF or llama.cpp misrepresents the model
    engine_vs_original  engine != original        the engine against the model's own tokenizer

A comparison is `agree`, `differ` or `not_applicable` (either side has
nothing). For a case, a class differs when any pair differs, agrees when
every pair both sides have agrees and at least one was compared, and is not
applicable when no pair could be compared.

    >>> classify_case([[1, 2]] * 4, [[1, 2]] * 4, [[1, 2], None, [1, 2], None])
    {'parity': 'agree', 'conversion': 'agree', 'engine_vs_original': 'agree'}

`Counts` adds cases up into the `summary.reference` block of report.json.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

CLASSES = ("parity", "conversion", "engine_vs_original")
# class -> the two sides it compares (names of classify_pair's arguments)
SIDES = {"parity": ("engine", "llama"), "conversion": ("llama", "reference"),
         "engine_vs_original": ("engine", "reference")}
OUTCOMES = ("agree", "differ", "not_applicable")
FLAG_PAIRS = ((False, False), (False, True), (True, False), (True, True))

Ids = Sequence[int] | None


def compare(a: Ids, b: Ids) -> str:
    """agree, differ, or not_applicable when either side has no ids."""
    if a is None or b is None:
        return "not_applicable"
    return "agree" if list(a) == list(b) else "differ"


def classify_pair(engine: Ids, llama: Ids, reference: Ids) -> dict[str, str]:
    """class -> outcome for one flag pair."""
    sides = {"engine": engine, "llama": llama, "reference": reference}
    return {cls: compare(sides[a], sides[b]) for cls, (a, b) in SIDES.items()}


def combine(outcomes: Sequence[str]) -> str:
    """A case's outcome from its pairs' outcomes."""
    if "differ" in outcomes:
        return "differ"
    return "agree" if "agree" in outcomes else "not_applicable"


def _per_pair(values: Sequence[Ids] | None) -> list[Ids]:
    if values is None:
        return [None] * len(FLAG_PAIRS)
    if len(values) != len(FLAG_PAIRS):
        raise ValueError(f"expected ids for {len(FLAG_PAIRS)} flag pairs, got {len(values)}")
    return list(values)


def pair_outcomes(engine: Sequence[Ids] | None, llama: Sequence[Ids] | None,
                  reference: Sequence[Ids] | None) -> list[dict[str, str]]:
    """classify_pair for each of FLAG_PAIRS (a side given as None has nothing for any pair)."""
    return [classify_pair(e, g, r) for e, g, r in zip(_per_pair(engine), _per_pair(llama), _per_pair(reference),
                                                      strict=True)]


def classify_case(engine: Sequence[Ids] | None, llama: Sequence[Ids] | None,
                  reference: Sequence[Ids] | None) -> dict[str, str]:
    """class -> outcome for a case, from each side's ids per flag pair (in FLAG_PAIRS order)."""
    pairs = pair_outcomes(engine, llama, reference)
    return {cls: combine([p[cls] for p in pairs]) for cls in CLASSES}


def finding_classes(outcomes: dict[str, str]) -> list[str]:
    """The classes a case is a finding of, in CLASSES order."""
    return [cls for cls in CLASSES if outcomes.get(cls) == "differ"]


def outcome_ids(outcome: object) -> list[list[int] | None] | None:
    """Ids per flag pair from any side's outcome for a case: a record (llama.cpp's, an engine's, a
    reference's) gives its `encode` ids; an answer with `pairs` (a reference that could answer
    some pairs only, `specs.PartlyApplicable`) those; anything else (an error, a crash, not
    applicable) None. The result is what `classify_case` and `Counts.add_case` take per side.
    """
    if isinstance(outcome, dict) and isinstance(outcome.get("encode"), list):
        return [list(item["ids"]) for item in outcome["encode"]]
    pairs = getattr(outcome, "pairs", None)
    if pairs:
        return [None if ids is None else list(ids) for ids in pairs]
    return None


# --- decoding ------------------------------------------------------------------------------------

def decode_outcome(llama: bytes | None, reference: dict[str, str] | None) -> str:
    """The reference's decode against llama.cpp's detokenize, for one id list and flag pair.

    `reference` is the reference's `decode` result: `applied` (what its library
    returns), `raw` and `cleaned` (without and with transformers'
    clean_up_tokenization). `agree`; `explained:clean_up_tokenization_spaces`
    when the texts part only by that clean-up; `explained:leading_space` when
    one has one leading space more than the other (SentencePiece strips the
    space prefix on decode, llama.cpp keeps it after a BOS; llama.cpp's WordPiece
    pieces begin with a space); `explained:clean_up_tokenization_spaces+leading_space`
    when only by both; `differ`; or `not_applicable` (either side has nothing,
    or llama.cpp's bytes are not UTF-8: the libraries return str, and cannot
    express them). An `explained:` outcome names the cause of a difference; it is
    a decode finding all the same (`decode_differs`): the reference's `applied`
    text already follows what the original's configuration asks for.

        >>> decode_outcome(b"  ", {"raw": " ", "cleaned": " ", "applied": " "})
        'explained:leading_space'
    """
    if llama is None or reference is None or not _utf8(llama):
        return "not_applicable"
    applied = reference["applied"].encode("utf-8", "surrogatepass")
    if llama == applied:
        return "agree"
    variants = {reference[k].encode("utf-8", "surrogatepass") for k in ("raw", "cleaned")} - {applied}
    if llama in variants:
        return "explained:clean_up_tokenization_spaces"
    if _one_space_apart(llama, applied):
        return "explained:leading_space"
    if any(_one_space_apart(llama, v) for v in variants):
        return "explained:clean_up_tokenization_spaces+leading_space"
    return "differ"


def decode_differs(outcome: str) -> bool:
    """A decode finding: `differ`, or a difference explained by a known llama.cpp behaviour (it stays a
    finding, with that behaviour as its cause: the original's own configuration did not ask for it)."""
    return outcome == "differ" or outcome.startswith("explained:")


def _one_space_apart(a: bytes, b: bytes) -> bool:
    """One of the two is the other with one more leading space."""
    return a == b" " + b or b == b" " + a


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --- counting ------------------------------------------------------------------------------------

def _row() -> dict[str, int]:
    return {"checked": 0, **dict.fromkeys(OUTCOMES, 0)}


@dataclass
class Counts:
    """Per-class case counts, pairs not applicable per flag pair, decode outcomes: `summary.reference`."""

    cases: int = 0
    classes: dict[str, dict[str, int]] = field(default_factory=lambda: {c: _row() for c in CLASSES})
    pairs_not_applicable: dict[str, int] = field(default_factory=dict)
    decode: dict[str, int] = field(default_factory=dict)

    def add_case(self, engine: Sequence[Ids] | None, llama: Sequence[Ids] | None,
                 reference: Sequence[Ids] | None) -> dict[str, str]:
        """Count one case; returns its outcomes (as `classify_case`)."""
        pairs = pair_outcomes(engine, llama, reference)
        self.cases += 1
        for (add_special, parse_special), pair in zip(FLAG_PAIRS, pairs, strict=True):
            if pair["conversion"] == "not_applicable" and llama is not None:
                key = f"add_special={add_special},parse_special={parse_special}"
                self.pairs_not_applicable[key] = self.pairs_not_applicable.get(key, 0) + 1
        outcomes = {cls: combine([p[cls] for p in pairs]) for cls in CLASSES}
        for cls, outcome in outcomes.items():
            row = self.classes[cls]
            row[outcome] += 1
            if outcome != "not_applicable":
                row["checked"] += 1
        return outcomes

    def add_decode(self, outcome: str) -> None:
        self.decode[outcome] = self.decode.get(outcome, 0) + 1

    def as_dict(self) -> dict:
        """The `summary.reference` block: plain JSON."""
        return {"cases": self.cases, "classes": {c: dict(r) for c, r in self.classes.items()},
                "pairs_not_applicable": dict(sorted(self.pairs_not_applicable.items())),
                "decode": dict(sorted(self.decode.items()))}

    def all_agree(self) -> bool:
        """True when something was compared, no class differs and no decode differs, explained or not (exit 0)."""
        rows = self.classes.values()
        return (any(r["checked"] for r in rows) and not any(r["differ"] for r in rows)
                and not any(decode_differs(outcome) and n for outcome, n in self.decode.items()))
