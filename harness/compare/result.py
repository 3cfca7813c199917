"""What one run found on one vocabulary (`ModelResult`), and which of its lists are findings.

The live run and the golden replay fill a `ModelResult` per model; `harness.compare.verdict`
judges it, `harness.report.build` turns the results into report.json. `FINDINGS` is the one
list of what makes a run exit 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# reference_findings: `run --reference` (harness.runs.third_side): conversion, engine vs original, reference errors
FINDINGS = ("mismatches", "oracle_crashes", "engine_errors", "vocab_mismatches", "reference_findings")
# known_differences: findings an `--expected-differences` entry names (harness.compare.expected): listed, not failing
LISTS = (*FINDINGS, "known_oracle_crashes", "known_differences")
# Worker deaths a fresh worker did not repeat (harness.oracle.workers): listed and counted, never
# a llama.cpp crash; the case's answer came from the fresh worker, so the verdict stands.
# Engine flakes: the engine under test's child failed once, a fresh child answered
# (harness.subjects.client): the answer is used, but the run exits 1 unless --allow-flakes.
SIDE_LISTS = ("harness_faults", "engine_flakes")


@dataclass
class ModelResult:
    """What one run found on one vocabulary; the run fills it, `build()` turns it into a report."""

    model: str
    family: str
    cases: int = 0
    failing: set[str] = field(default_factory=set)
    mismatches: list[dict] = field(default_factory=list)
    oracle_crashes: list[dict] = field(default_factory=list)
    engine_errors: list[dict] = field(default_factory=list)
    vocab_mismatches: list[dict] = field(default_factory=list)
    known_oracle_crashes: list[dict] = field(default_factory=list)
    known_crash_ids: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    harness_faults: list[dict] = field(default_factory=list)
    engine_flakes: list[dict] = field(default_factory=list)
    not_checked: str | None = None       # why nothing was compared (`harness.compare.verdict`)
    expected_refusal: str | None = None  # both refused, as the run was told to expect
    capabilities: dict = field(default_factory=dict)  # check -> counts (harness.subjects.capabilities)
    not_applicable: set[str] = field(default_factory=set)  # cases the engine cannot take (str-only)
    source: dict | None = None  # a URL or cut file checked through its header (harness.models.paths.source_of)
    reference_findings: list[dict] = field(default_factory=list)  # `run --reference` (harness.runs.third_side)
    reference: dict = field(default_factory=dict)  # its classify.Counts block, for summary.reference
    fuzz: dict = field(default_factory=dict)  # --fuzz N: {"asked", "ran", "stopped"} (harness.report.fuzz_summary)
    # case id -> the whole input of a generated failing case (a fuzz input, a long window), whose findings may
    # show a window of it: the cases file beside the report is written from it (never into report.json)
    inputs: dict[str, dict] = field(default_factory=dict)
    known_differences: list[dict] = field(default_factory=list)  # findings `--expected-differences` names
    known_difference_ids: set[str] = field(default_factory=set)  # cases with only such findings
    expected: dict[str, dict] = field(default_factory=dict)  # entry -> its status here (harness.compare.expected)

    def add(self, kind: str, entry: dict) -> None:
        """Record an entry of `kind` (one of LISTS); a case with any finding counts as failing.

        A known llama.cpp crash is listed but is no finding: its case is set aside
        (`known_crash_ids`), neither failing nor passed.
        """
        entry = {"model": self.model, "family": self.family, **entry}
        getattr(self, kind).append(entry)
        case_id = entry.get("case_id")
        if case_id is None or str(case_id).startswith("<") or kind == "vocab_mismatches":
            return  # "<load>", "<vocab>" are about the model, not a case
        (self.known_crash_ids if kind == "known_oracle_crashes" else self.failing).add(str(case_id))

    def counts(self) -> dict:
        return {"family": self.family, "cases": self.cases, "failing_cases": len(self.failing),
                "mismatches": len(self.mismatches), "oracle_crashes": len(self.oracle_crashes),
                "engine_errors": len(self.engine_errors),
                "vocab_mismatches": len(self.vocab_mismatches),
                "known_oracle_crashes": len(self.known_oracle_crashes),
                "known_crash_cases": len(self.known_crash_ids - self.failing),
                "harness_faults": len(self.harness_faults), "engine_flakes": len(self.engine_flakes),
                "notes": list(self.notes),
                "not_checked": self.not_checked, "expected_refusal": self.expected_refusal,
                "not_applicable": len(self.not_applicable - self.failing), "capabilities": self.capabilities,
                **({"source": self.source} if self.source else {}),
                "reference_findings": len(self.reference_findings),
                "known_differences": len(self.known_differences),
                "known_difference_cases": len(self.known_difference_ids - self.failing),
                **({"expected_differences": self.expected} if self.expected else {}),
                **({"reference": self.reference} if self.reference else {}),
                **({"fuzz": self.fuzz} if self.fuzz else {})}

    def add_fault(self, fault: dict) -> None:
        """A harness fault (`harness.oracle.workers.fault_record`): listed, and named in the notes."""
        self.harness_faults.append({"model": self.model, **fault})
        self.notes.append(f"harness fault on {fault['case_id']}: {fault['reason']}")

    def add_flake(self, flake: dict) -> None:
        """An engine flake (`harness.subjects.client.flake_record`): listed, and named in the notes."""
        self.engine_flakes.append({"model": self.model, **flake})
        self.notes.append(f"engine flake on {', '.join(flake['case_ids'])} ({flake['op']}): {flake['first']}")
