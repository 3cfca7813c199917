"""A failing long document cut down to its smallest failing window: by lines, then words, then characters.

Hypothesis shrinks the fuzzer's short inputs; a long document is shrunk here instead, where
each step is one judgement of a shorter window. `smallest_window(value, fails)` moves the
window's start right, then its end left, by binary search over line boundaries; then over
the word boundaries inside the first and last line it kept; then over the characters inside
the first and last word. A window is only ever replaced by one that `fails` too, so the
result always fails; it is the smallest when failing is monotone (any window holding a
failing window fails: a length threshold, or one hard part). About 2 x log2 of the units
per level are judged, so a 1 MB document takes some 60 judgements, not thousands.

`spell(value)` writes a long window as a short Python expression (`'ab ' * 21846 + 'x'`),
the reproduction a report can show.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

# (level, pattern of one unit): every level's units cover the text whole
LEVELS = (("lines", r"[^\n]*\n|[^\n]+"), ("words", r"\s*\S+|\s+"), ("characters", r"(?s)."))
SPELL_LIMIT = 160  # characters of a literal a spelling shows whole
MAX_UNIT = 256  # the longest repeated unit `spell` looks for


@dataclass(frozen=True)
class Window:
    """The smallest failing window found: `value[start:end]`, and how many windows were judged."""

    start: int
    end: int
    value: str | bytes
    judged: int


def smallest_window(value: str | bytes, fails: Callable[[str | bytes], bool], *, budget: int = 120) -> Window:
    """The smallest window of `value` (which fails) that `fails` too; at most `budget` judgements."""
    state = {"judged": 0}

    def judge(start: int, end: int) -> bool:
        if start >= end or state["judged"] >= budget:
            return False  # the empty window passes; budget spent: unseen windows count as passing
        state["judged"] += 1
        return fails(value[start:end])

    start, end = 0, len(value)
    start_pass, end_pass = end, start  # where a window is known (or taken) to pass
    for _, pattern in LEVELS:
        units = _compile(pattern, value)
        starts = [m.start() for m in units.finditer(value, start, start_pass)] or [start]
        start, start_pass = _last_failing(starts, start_pass, partial(judge, end=end))
        ends = [m.end() for m in units.finditer(value, max(end_pass, start), end)] or [end]
        end, end_pass = _last_failing(ends[::-1], end_pass, partial(judge, start))
        start_pass, end_pass = min(start_pass, end), max(end_pass, start)
    return Window(start, end, value[start:end], state["judged"])


def _compile(pattern: str, value: str | bytes) -> re.Pattern:
    return re.compile(pattern.encode() if isinstance(value, bytes) else pattern)


def _last_failing(candidates: list[int], passing: int, fails: Callable[[int], bool]) -> tuple[int, int]:
    """(the last candidate that fails, the one after it, which passes); `candidates[0]` is known to fail.

    Over starts in increasing order it finds the latest start; over ends in decreasing order the earliest end.
    """
    lo, hi = 0, len(candidates)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(candidates[mid]):
            lo = mid
        else:
            hi = mid
    return candidates[lo], candidates[hi] if hi < len(candidates) else passing


# --- spelling a long window ---------------------------------------------------------------------

def spell(value: str | bytes, *, depth: int = 3) -> tuple[str, bool]:
    """(a short Python expression for `value`, whether it builds `value` exactly).

    The longest run of one repeated unit (up to 256 characters) becomes `unit * count`; what is
    before and after it is spelled the same way, `depth` levels down. A literal longer than 160
    characters that repeats nothing is shown cut (`...`), and the spelling is then not exact.

        >>> spell("ab " * 30000 + "x")
        ("'ab ' * 30000 + 'x'", True)
    """
    if len(value) <= SPELL_LIMIT:
        return repr(value), True
    run = _longest_run(value) if depth > 0 else None
    if run is None:
        half = SPELL_LIMIT // 2
        return f"{value[:half]!r} ... {value[-half:]!r} ({len(value):,} in all)", False
    start, unit, count = run
    end = start + len(unit) * count
    pieces, exact = [], True
    for part in (value[:start], None, value[end:]):
        if part is None:
            pieces.append(f"{unit!r} * {count}")
        elif part:
            text, whole = spell(part, depth=depth - 1)
            pieces.append(text)
            exact = exact and whole
    return " + ".join(pieces), exact


def _longest_run(value: str | bytes) -> tuple[int, str | bytes, int] | None:
    """(start, unit, count) of the run of one repeated unit covering most of `value`.

    None when no run of 3 repeats or more covers more than `SPELL_LIMIT` characters (it would not shorten).
    """
    codes = (np.frombuffer(value, dtype=np.uint8) if isinstance(value, bytes)
             else np.frombuffer(value.encode("utf-32-le", "surrogatepass"), dtype="<u4"))
    best: tuple[int, int, int] | None = None  # (covered, start, period)
    for period in range(1, min(MAX_UNIT, len(codes) // 3) + 1):
        start, length = _longest_true(codes[:-period] == codes[period:])
        covered = (length + period) // period * period
        if covered // period >= 3 and covered > SPELL_LIMIT and (best is None or covered > best[0]):
            best = (covered, start, period)
    if best is None:
        return None
    covered, start, period = best
    return start, value[start:start + period], covered // period


def _longest_true(flags: np.ndarray) -> tuple[int, int]:
    """(start, length) of the longest run of True in `flags`; (0, 0) when there is none."""
    if not flags.any():
        return 0, 0
    edges = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    longest = int(np.argmax(ends - starts))
    return int(starts[longest]), int(ends[longest] - starts[longest])
