"""The release gate: non-inferiority verdicts per task and a run-level decision.

- ``load_policy`` / ``parse_policy`` -> ``GatePolicy`` (TOML, strictly validated)
- ``HealthReport`` + ``HealthThresholds`` -> INVALID before any statistics
- ``evaluate_gate(policy, {task: GateInput(paired, health)})`` -> ``RunVerdict``
  (GO / NO-GO / INCONCLUSIVE / INVALID, ``exit_code`` 0 / 1 / 3 / 4)
- the test run per task and why: ``validate.gate.evidence``
"""

from validate.gate.evidence import ClusteredEvidence, ScoreEvidence, evidence_for
from validate.gate.health import HealthReport, HealthThresholds, health_failures
from validate.gate.policy import GatePolicy, TaskPolicy, load_policy, parse_policy
from validate.gate.run import (
    DECISION_EXIT_CODES,
    GO,
    NO_GO,
    GateInput,
    RunVerdict,
    evaluate_gate,
    run_decision,
)
from validate.gate.verdict import FAIL, INCONCLUSIVE, INVALID, PASS, PASSING, WARN, TaskVerdict

__all__ = [
    "DECISION_EXIT_CODES",
    "FAIL",
    "GO",
    "INCONCLUSIVE",
    "INVALID",
    "NO_GO",
    "PASS",
    "PASSING",
    "WARN",
    "ClusteredEvidence",
    "GateInput",
    "GatePolicy",
    "HealthReport",
    "HealthThresholds",
    "RunVerdict",
    "ScoreEvidence",
    "TaskPolicy",
    "TaskVerdict",
    "evaluate_gate",
    "evidence_for",
    "health_failures",
    "load_policy",
    "parse_policy",
    "run_decision",
]
