"""Compare (and gate) two lm-eval ``--log_samples`` runs: read, pair, test, decide.

The one place that wires the lm-eval reader to the source-agnostic statistics and gate;
the results store will get its own twin that reads stored runs instead.
"""

from __future__ import annotations

from pathlib import Path

from validate.gate.gated import GatedComparison
from validate.gate.inputs import gate_inputs
from validate.gate.policy import load_policy
from validate.gate.run import evaluate_gate
from validate.lmeval_samples import health_from_runs, read_run
from validate.stats.bootstrap import BootstrapSpec
from validate.stats.compare import compare_tables


def compare_lmeval(
    a: str | Path,
    b: str | Path,
    policy_path: str | Path | None = None,
    task: str | None = None,
    alpha: float = 0.05,
    bootstrap: BootstrapSpec | None = None,
) -> GatedComparison:
    """A = baseline, B = candidate; files or directories of ``samples_*.jsonl``."""
    a, b = Path(a), Path(b)
    policy = load_policy(policy_path) if policy_path is not None else None
    run_a = read_run(a, label=f"A:{a.name}", task=task)
    run_b = read_run(b, label=f"B:{b.name}", task=task)
    power = policy.power if policy is not None else 0.8
    comparison = compare_tables(
        run_a.tables(), run_b.tables(), run_a.label, run_b.label, task, alpha, power, bootstrap
    )
    verdict = None
    if policy is not None:
        inputs = gate_inputs(policy, comparison, lambda p: health_from_runs(run_a, run_b, p))
        verdict = evaluate_gate(policy, inputs)
    return GatedComparison(comparison=comparison, verdict=verdict)
