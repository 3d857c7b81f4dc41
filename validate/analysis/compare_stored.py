"""``compare`` for two variants of one stored run: every (task, metric) they share,
paired by (item, repeat) and prompt hash, and the gate with a policy. The store-side
twin of ``validate.gate.from_lmeval.compare_lmeval``: same statistics, same gate, the
health facts measured from the stored responses."""

from __future__ import annotations

from pathlib import Path

from validate.analysis.build import item_outcomes
from validate.analysis.source import RunNotFound, resolve_plan_hash
from validate.gate.gated import GatedComparison
from validate.gate.inputs import gate_inputs
from validate.gate.policy import load_policy
from validate.gate.run import evaluate_gate
from validate.health.facts import pair_health, variant_health
from validate.stats.bootstrap import BootstrapSpec
from validate.stats.compare import compare_tables
from validate.stats.outcomes import PairedOutcomes
from validate.store import ResultsStore


def compare_stored(store: ResultsStore, run: str | int | None, a: str, b: str,
                   policy_path: str | Path | None = None, task: str | None = None,
                   alpha: float = 0.05, bootstrap: BootstrapSpec | None = None
                   ) -> GatedComparison:
    """A = baseline variant, B = candidate variant of the stored plan ``run``."""
    plan_hash = resolve_plan_hash(store, run)
    cells = store.cells(plan_hash)
    names = sorted({v for v, _ in cells})
    for variant in (a, b):
        if variant not in names:
            raise RunNotFound(f"{store.path}: plan {plan_hash[:12]} has no variant {variant!r} "
                              f"(variants: {', '.join(names)})")
    policy = load_policy(policy_path) if policy_path is not None else None
    tables = {v: {} for v in (a, b)}
    stored = {}
    for variant, name in cells:
        if variant in tables and (task is None or name == task):
            table = store.outcomes(plan_hash, variant, name)
            stored[(variant, name)] = table
            for metric in table.filters:
                tables[variant][(name, metric)] = item_outcomes(table, metric)
    comparison = compare_tables(tables[a], tables[b], a, b, task, alpha,
                                policy.power if policy else 0.8, bootstrap)

    def health_of(paired: PairedOutcomes):
        ta, tb = stored[(a, paired.task)], stored[(b, paired.task)]
        generate = any(r.output_chars is not None for r in (*ta.rows, *tb.rows))
        fa = variant_health(ta, paired.metric, generate)
        fb = variant_health(tb, paired.metric, generate)
        return pair_health(ta, tb, paired.metric, fa, fb)

    verdict = None
    if policy is not None:
        verdict = evaluate_gate(policy, gate_inputs(policy, comparison, health_of))
    return GatedComparison(comparison, verdict, plan_hash=plan_hash)


def open_store(path: str | Path) -> ResultsStore:
    """Open an existing results store (a missing file is an input error, not a new store)."""
    path = Path(path)
    if not path.is_file():
        raise RunNotFound(f"{path}: no such results store")
    return ResultsStore.open(path, read_only=True)
