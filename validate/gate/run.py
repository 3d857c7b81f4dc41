"""Run-level decision: GO / NO-GO / INCONCLUSIVE / INVALID from the per-task verdicts.

Only ``critical`` tasks decide; ``advisory`` tasks are tested in the same family
(so the correction counts them) and reported, but never change the decision.

- INVALID (exit 4): a critical task failed its health checks or has no outcomes. A
  broken run is no evidence about quality, in either mode.
- NO-GO (exit 1): a critical task FAILs; in ``prove-safe`` mode also any critical
  task that is not PASS/WARN (INCONCLUSIVE means "not shown safe").
- INCONCLUSIVE (exit 3, standard mode): a critical task is INCONCLUSIVE; the report
  says how many items would decide it.
- GO (exit 0): every critical task PASSes (WARN passes, flagged).
Exit 2 stays the CLI's code for bad usage or input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from validate.gate.evidence import evidence_for
from validate.gate.health import HealthReport, health_failures
from validate.gate.policy import GatePolicy
from validate.gate.verdict import (
    FAIL,
    INCONCLUSIVE,
    INVALID,
    PASSING,
    TaskVerdict,
    decide_family,
    invalid_verdict,
)
from validate.stats.outcomes import PairedOutcomes

GO, NO_GO = "GO", "NO-GO"
DECISION_EXIT_CODES = {GO: 0, NO_GO: 1, INCONCLUSIVE: 3, INVALID: 4}


@dataclass(frozen=True)
class GateInput:
    """What the gate needs for one task: paired 0/1 outcomes and the pair's health."""

    paired: PairedOutcomes
    health: HealthReport


@dataclass(frozen=True)
class RunVerdict:
    decision: str
    tasks: tuple[TaskVerdict, ...]
    policy: GatePolicy

    @property
    def exit_code(self) -> int:
        return DECISION_EXIT_CODES[self.decision]

    def to_dict(self) -> dict:
        p = self.policy
        return {
            "decision": self.decision,
            "exit_code": self.exit_code,
            "policy": {
                "source": p.source, "alpha": p.alpha, "power": p.power,
                "correction": p.correction, "mode": p.mode, "equivalence": p.equivalence,
            },
            "tasks": [t.to_dict() for t in self.tasks],
        }

    def report(self) -> str:
        p = self.policy
        head = (
            f"gate: {self.decision} (exit {self.exit_code}); policy {p.source}: "
            f"alpha={p.alpha} one-sided, correction {p.correction} over "
            f"{sum(t.verdict != INVALID for t in self.tasks)} tested, mode {p.mode}"
            + (", equivalence (TOST)" if p.equivalence else "")
        )
        return "\n".join([head] + ["  " + t.report() for t in self.tasks])


def run_decision(verdicts: tuple[TaskVerdict, ...], mode: str) -> str:
    critical = [v.verdict for v in verdicts if v.tier == "critical"]
    if INVALID in critical:
        return INVALID
    if FAIL in critical:
        return NO_GO
    if any(v not in PASSING for v in critical):
        return NO_GO if mode == "prove-safe" else INCONCLUSIVE
    return GO


def evaluate_gate(policy: GatePolicy, inputs: Mapping[str, GateInput]) -> RunVerdict:
    """Health first, then one corrected family of non-inferiority tests, then the run."""
    tested, invalid = [], []
    for tp in policy.tasks:
        given = inputs.get(tp.task)
        if given is None:
            invalid.append(invalid_verdict(tp, policy, ["no outcomes for this task"]))
            continue
        reasons = list(health_failures(given.health, policy.health))
        if not given.paired.is_binary:
            reasons.append("outcomes are not 0/1; the accuracy gate needs 0/1 scores")
        if reasons:
            invalid.append(invalid_verdict(tp, policy, reasons, given.paired.metric))
            continue
        tested.append((tp, given.paired.metric, evidence_for(given.paired)))
    decided = {v.task: v for v in decide_family(policy, tested) + invalid}
    verdicts = tuple(decided[tp.task] for tp in policy.tasks)
    return RunVerdict(decision=run_decision(verdicts, policy.mode), tasks=verdicts, policy=policy)
