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

from validate.decisions import DECISION_EXIT_CODES, FAIL, GO, INCONCLUSIVE, INVALID, NO_GO, PASSING
from validate.gate.health import HealthReport
from validate.gate.policy import GatePolicy
from validate.gate.verdict import TaskVerdict
from validate.stats.outcomes import PairedOutcomes


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


CANDIDATE = "candidate"


def evaluate_gate(policy: GatePolicy, inputs: Mapping[str, GateInput]) -> RunVerdict:
    """Health first, then one corrected family of non-inferiority tests, then the run:
    ``evaluate_family`` with one candidate."""
    from validate.gate.family import evaluate_family

    cells = {(CANDIDATE, task): given for task, given in inputs.items()}
    missing = {(CANDIDATE, tp.task): ("no outcomes for this task",) for tp in policy.tasks
               if tp.task not in inputs}
    family = evaluate_family(policy, (CANDIDATE,), cells, extra_reasons=missing)
    verdicts = tuple(family.verdicts[(CANDIDATE, tp.task)] for tp in policy.tasks)
    return RunVerdict(decision=family.decision, tasks=verdicts, policy=policy)
