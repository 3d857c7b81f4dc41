"""Build the gate's inputs from a ``RunComparison`` (any outcome source).

For each task in the policy, pick the metric (the policy's ``metric``, or the task's
only metric), take its paired outcomes and the pair's health. A task with several
metrics and no ``metric`` in the policy is an input error naming the choices, never a
silent pick (GSM8K has strict-match and flexible-extract).
"""

from __future__ import annotations

from collections.abc import Callable

from validate.errors import PolicyError
from validate.gate.health import HealthReport
from validate.gate.policy import GatePolicy
from validate.gate.run import GateInput
from validate.stats.compare import RunComparison
from validate.stats.outcomes import PairedOutcomes

HealthOf = Callable[[PairedOutcomes], HealthReport]


def coverage_only(paired: PairedOutcomes) -> HealthReport:
    """Health when the source knows nothing but which items were answered."""
    return HealthReport(coverage=paired.coverage, source="coverage only")


def gate_inputs(
    policy: GatePolicy, comparison: RunComparison, health_of: HealthOf = coverage_only
) -> dict[str, GateInput]:
    inputs = {}
    for tp in policy.tasks:
        metrics = comparison.metrics_of(tp.task)
        if not metrics:
            continue  # the gate reports it INVALID ("no outcomes")
        if tp.metric is None:
            if len(metrics) > 1:
                raise PolicyError(
                    f"{policy.source}: tasks.{tp.task}.metric: task has several metrics, "
                    f"choose one of {', '.join(metrics)}"
                )
            metric = metrics[0]
        elif tp.metric in metrics:
            metric = tp.metric
        else:
            raise PolicyError(
                f"{policy.source}: tasks.{tp.task}.metric: {tp.metric!r} not in the outcomes "
                f"(available: {', '.join(metrics)})"
            )
        paired = comparison.row(tp.task, metric).outcomes
        inputs[tp.task] = GateInput(paired=paired, health=health_of(paired))
    return inputs
