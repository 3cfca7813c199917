"""The bounds of a whole chat check: a deadline over all its cases, and a template that hangs asked no more.

Each request already has its limits (the helper's and the transformers child's `--timeout`, ours
`tokenizer.chat.budget`), but a chat-template bomb (a loop of 10^10, a CPU bomb) costs each side
its whole limit on every case: 48 cases and more per template. `Bounds` caps that:

- a side that ran into its limits `STRIKES` times on one template (llama.cpp's helper or
  transformers answering "hang", ours stopped by its render budget: `OVER_BUDGET`, always a
  finding, never a refusal both sides share) is not asked that template again: its remaining
  cases are *not asked*, counted apart and named with the case that hung first; the hangs
  themselves are the template's findings;
- the whole check has a deadline (`chat --deadline`, `DEFAULT_DEADLINE`): past it, every case
  left is not asked, and the check says so (the command's exit status is then 2: not all was
  checked).

A case not asked is never counted as a match.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from tokenizer.chat.budget import TIME_EXCEEDED

from .oracle import ChatAnswer

STRIKES = 2  # requests of one template that may run into a side's time limit before it is asked no more
DEFAULT_DEADLINE = 3600.0  # seconds for a whole check (the nightly's 19,096 cases take about 500 s)
MAX_DEADLINE = 7 * 24 * 3600.0
NOT_ASKED = "not asked"  # the status of a case's answer that was never asked for
OVER_BUDGET = "over its budget"  # the status of our render stopped by tokenizer.chat.budget (a bomb on our side)


def check_deadline(seconds: float) -> float:
    """`seconds` if a usable deadline for a whole check; `ValueError` naming the range otherwise."""
    if not 0 < seconds <= MAX_DEADLINE:  # also refuses nan
        raise ValueError(f"--deadline {seconds:g} is out of range: more than 0 and at most {MAX_DEADLINE:g} s")
    return seconds


def timed_out(answer: ChatAnswer) -> bool:
    """Whether `answer` is a side running into its limits: a hang, or our render stopped by its budget."""
    if answer.status in ("hang", OVER_BUDGET):
        return True
    return answer.status == "error" and answer.error.startswith(TIME_EXCEEDED)


def our_answer(answer: ChatAnswer) -> ChatAnswer:
    """Our side's answer (`harness.chat.diff.product_answer`) with a render our budget stopped told apart
    from a refusal: status `OVER_BUDGET`, a finding whatever llama.cpp says (a bomb is never "both refuse").

    `tokenizer.chat` names every `ChatBudgetExceeded` "chat template ..." (time, memory, size, power,
    recursion); its other errors are "chat template error: ..." and "chat template failed: ..." or
    say something else."""
    text = answer.error
    stopped = text.startswith("chat template ") and not text.startswith(("chat template error:",
                                                                          "chat template failed:"))
    return ChatAnswer(OVER_BUDGET, error=text) if answer.status == "error" and stopped else answer


@dataclass
class Bounds:
    """A deadline for the whole check and, per template and side, the requests that hung."""

    seconds: float = DEFAULT_DEADLINE
    deadline: float = field(default=0.0)
    hangs: Counter[tuple[str, str]] = field(default_factory=Counter)
    first: dict[tuple[str, str], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    @property
    def passed(self) -> bool:
        return time.monotonic() > self.deadline

    def why_not(self, template: str) -> str | None:
        """Why the next case of `template` is not asked (the deadline, or a side that hung), or None."""
        if self.passed:
            return f"the check's deadline of {self.seconds:g} s passed"
        for (name, side), count in self.hangs.items():
            if name == template and count >= STRIKES:
                first = self.first[name, side]
                return f"{side} ran into its limits on {count} cases of this template (first {first})"
        return None

    def note(self, template: str, side: str, case: str, answer: ChatAnswer) -> None:
        """Count `answer` of `side` on `template`'s case `case` if it ran into its time limit."""
        if timed_out(answer):
            self.hangs[template, side] += 1
            self.first.setdefault((template, side), case)


def not_asked(why: str) -> ChatAnswer:
    """The answer of a case that was not asked: never a match, never a side's finding."""
    return ChatAnswer(NOT_ASKED, error=why)
