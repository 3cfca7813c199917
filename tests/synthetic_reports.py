"""Synthetic findings and reports for the page and the failure texts: made by the real comparator and judge
(`harness.compare.diff.diff_encoding`, `harness.compare.signature.sign`) on a toy byte-level vocabulary.

The vocabulary spells its tokens as GPT-2's byte-level BPE does (`Ġ` for a space, `ĉ` for a tab, `ØŃ` for
the two bytes of `ح`), so that a page drawing a token's text instead of the bytes it stands for is seen.
"""

from __future__ import annotations

from harness.compare import long_inputs
from harness.compare.diff import TokenTable, diff_encoding
from harness.compare.result import ModelResult
from harness.compare.signature import sign

PIECES = [b"", b"a", b"\t", b"\n", b"048", b"04", b"8", b"b", b" x", " ح".encode(), b" ", b"y"]
BOS, A, TAB, NEWLINE, D048, D04, D8, B, SPACE_X, SPACE_HA, SPACE, Y = range(len(PIECES))
DUPLICATES = 10_000   # ids after the named ones: each spells `a` again (a difference of kind `id` each)
FLAG_PAIRS = ((False, False), (False, True), (True, False), (True, True))


def byte_level(piece: bytes) -> str:
    """`piece` in GPT-2's byte-to-unicode alphabet (`b" \\xd8\\xad"` -> `ĠØŃ`)."""
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
    alphabet, extra = {}, 0
    for b in range(256):
        if b in keep:
            alphabet[b] = chr(b)
        else:
            alphabet[b] = chr(256 + extra)
            extra += 1
    return "".join(alphabet[b] for b in piece)


def table(duplicates: int = 0) -> TokenTable:
    """The toy vocabulary; `duplicates` more tokens spelling `a` (ids from `len(PIECES)` on)."""
    pieces = PIECES + [b"a"] * duplicates
    texts = [b"<s>", *(byte_level(p).encode() for p in pieces[1:])]
    attrs = [8] + [4] * (len(pieces) - 1)
    return TokenTable(texts=texts, pieces=pieces, attrs=attrs, edge_ids=frozenset({BOS}))


TABLE = table()
BIG_TABLE = table(DUPLICATES)


def finding(model: str, case_id: str, text: str, expected: list[int], got: list[int], *,
            flags: tuple[bool, bool] = (False, False), category: str | None = None,
            tokens: TokenTable = TABLE, **extra) -> dict:
    """A mismatch entry as the judge makes it (signed); `category` replaces the comparator's guess."""
    bos = [BOS] if flags[0] else []
    found = diff_encoding(bos + expected, bos + got, tokens)
    assert found is not None, "the two id lists agree"
    if category:
        found["category"] = category
    entry = {"case_id": case_id, "text": text, "add_special": flags[0], "parse_special": flags[1],
             "command": f"python -m harness run --model {model} --case {case_id} --report reports/reproduce/{case_id}",
             **found, **extra}
    return sign(model, "mismatches", long_inputs.trimmed(entry, tokens), tokens)


def tab_bug(model: str, case: int, flags: tuple[bool, bool], *, words: int = 0) -> dict:
    """A lone tab given the newline's id, on `a⇥b` and `words` more words (the comparator's guess varies by pair)."""
    tail = [SPACE_X] * words
    guess = "normalisation" if flags[1] else "special-token partition"
    return finding(model, f"tab-{case:05d}", "a\tb" + " x" * words, [A, TAB, B, *tail], [A, NEWLINE, B, *tail],
                   flags=flags, category=guess)


def digit_split(model: str, case: int, flags: tuple[bool, bool] = (False, False), *, before: int = 0) -> dict:
    """`048` cut `04|8` by the engine, twice, after `before` tokens of ` x`: a split, bytes alike."""
    head = [SPACE_X] * before
    return finding(model, f"digits-{case:05d}", " x" * before + "048 048y ح",
                   [*head, D048, SPACE, D048, Y, SPACE_HA], [*head, D04, D8, SPACE, D04, D8, Y, SPACE_HA], flags=flags)


def failing_result(model: str, cases: int, *, distinct: bool = False, long: bool = False) -> ModelResult:
    """`cases` failing cases under all four flag pairs: the tab bug and the digit split in turn, or with
    `distinct` a difference of its own each (the same piece under another id); with `long`, each input
    60 KB and its ids 20,000 long, parting in the middle.

    A few findings are judged, and each case takes a copy of one with its own case id and input (and with
    `distinct` its own signature, as the judge gives the same piece under the case's own id): judging
    40,000 findings would take the test minutes."""
    result = ModelResult(model, "bpe", cases=cases + 5)
    pad = 10_000 if long else 0
    dup = len(PIECES)
    bases = {"tab": tab_bug(model, 0, (False, False), words=pad), "digits": digit_split(model, 0, before=pad),
             "dup": finding(model, "dup", " x" * pad + "a" + " x" * pad, [SPACE_X] * pad + [A] + [SPACE_X] * pad,
                            [SPACE_X] * pad + [dup] + [SPACE_X] * pad, tokens=BIG_TABLE)}
    for case in range(cases):
        kind = "dup" if distinct else ("tab", "digits")[case % 2 == 0]
        entry = {**bases[kind], "case_id": f"{kind}-{case:05d}", "text": bases[kind]["text"] + " y" * (case % 50)}
        if distinct:
            entry.update(signature=f"d-{case:012x}", signature_title=f"ids: id a / {A} / {dup + case}")
        for add_special, parse_special in FLAG_PAIRS:
            result.add("mismatches", {**entry, "add_special": add_special, "parse_special": parse_special})
    return result
