"""The gate over several optimizations at once: one family of (variant, task) claims.

An ablation asks "is each optimization safe on each task?". Each (variant, task) with a
policy entry is one non-inferiority hypothesis against the same baseline, and all of
them are corrected together (Holm by default), because the release decision is taken
on all of them at once: testing k optimizations x t tasks at alpha each would let
k * t chances at a false PASS through.

Health first, as in ``evaluate_gate``: an unhealthy pair is INVALID and leaves the
family (it is no evidence). The run decision is ``run_decision`` over every verdict;
``variant_decisions`` apply it per optimization so an ablation report can say which
switch is the problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from validate.decisions import GO
from validate.gate.evidence import evidence_for
from validate.gate.health import health_failures
from validate.gate.policy import GatePolicy
from validate.gate.run import GateInput, run_decision
from validate.gate.verdict import TaskVerdict, decide_family, invalid_verdict

Cell = tuple[str, str]  # (variant, task)


@dataclass(frozen=True)
class FamilyVerdict:
    decision: str
    verdicts: Mapping[Cell, TaskVerdict]
    variant_decisions: Mapping[str, str]
    family_size: int
    policy: GatePolicy


def evaluate_family(policy: GatePolicy, variants: tuple[str, ...],
                    inputs: Mapping[Cell, GateInput | None],
                    metrics: Mapping[str, str] | None = None,
                    extra_reasons: Mapping[Cell, tuple[str, ...]] | None = None,
                    ) -> FamilyVerdict:
    """Verdicts for every candidate ``variants`` x policy task. A cell without input
    (no paired outcomes) is INVALID; ``extra_reasons`` add health failures measured
    elsewhere (e.g. by the caller's own checks)."""
    metrics = metrics or {}
    extra_reasons = extra_reasons or {}
    tested, cells, invalid = [], [], {}
    for variant in variants:
        for tp in policy.tasks:
            cell = (variant, tp.task)
            given = inputs.get(cell)
            metric = metrics.get(tp.task, tp.metric or "")
            if given is None:
                reasons = list(extra_reasons.get(cell, ())) or ["no paired outcomes"]
                invalid[cell] = invalid_verdict(tp, policy, reasons, metric)
                continue
            reasons = list(health_failures(given.health, policy.health))
            reasons += [r for r in extra_reasons.get(cell, ()) if r not in reasons]
            if not given.paired.is_binary:
                reasons.append("outcomes are not 0/1; the accuracy gate needs 0/1 scores")
            if reasons:
                invalid[cell] = invalid_verdict(tp, policy, reasons, given.paired.metric)
                continue
            tested.append((tp, given.paired.metric, evidence_for(given.paired)))
            cells.append(cell)
    decided = dict(zip(cells, decide_family(policy, tested), strict=True))
    verdicts = {**decided, **invalid}
    ordered = {(v, tp.task): verdicts[(v, tp.task)] for v in variants for tp in policy.tasks}
    per_variant = {
        v: run_decision(tuple(ordered[(v, tp.task)] for tp in policy.tasks), policy.mode)
        for v in variants
    }
    return FamilyVerdict(
        decision=run_decision(tuple(ordered.values()), policy.mode) if ordered else GO,
        verdicts=ordered, variant_decisions=per_variant, family_size=len(tested),
        policy=policy)
