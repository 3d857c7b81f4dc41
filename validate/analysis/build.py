"""Build a ``RunAnalysis`` from a results store.

Order (DESIGN data flow): outcomes per (variant, task) -> health facts -> accuracy per
variant -> paired comparisons vs the baseline -> the gate over every (variant, task)
as one family (health first: an unhealthy pair is INVALID and leaves the family) ->
speed and speed-ups -> floor detection and notes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from validate.analysis.fidelity_file import stored_fidelity
from validate.analysis.model import (
    INVALID,
    UNGATED,
    ComparisonRow,
    FidelitySummary,
    PolicySummary,
    RunAnalysis,
    RunIdentity,
    VariantSummary,
)
from validate.analysis.source import (
    choose_metric,
    resolve_plan_hash,
    scored_rows,
    stored_plan,
)
from validate.analysis.speed import prefix_hit_rate, speed_summary, speedups
from validate.errors import PairingError
from validate.gate.family import evaluate_family
from validate.gate.health import HealthThresholds, health_failures
from validate.gate.policy import GatePolicy, parse_policy
from validate.gate.run import GateInput
from validate.health.facts import pair_health, variant_health
from validate.stats.bootstrap import BootstrapSpec
from validate.stats.compare import compare_tables
from validate.stats.outcomes import ItemOutcomes
from validate.stats.proportions import estimate_accuracy
from validate.store import OutcomeTable, ResultsStore

FidelityOf = Callable[[str, str], FidelitySummary | None]
FLOOR_POINTS = 0.05  # baseline within 5 accuracy points of chance: "at the floor"


def item_outcomes(table: OutcomeTable, metric: str) -> ItemOutcomes:
    rows = scored_rows(table, metric)
    return ItemOutcomes(
        label=table.variant, task=table.task, metric=metric,
        item_ids=tuple(r.item_id for r in rows), repeats=tuple(r.repeat for r in rows),
        values=np.asarray([r.scores[metric] for r in rows], dtype=np.float64),
        prompt_hashes=tuple(r.prompt_sha256 for r in rows))


def _policy_from(doc: dict) -> GatePolicy | None:
    if not doc.get("policy"):
        return None
    return parse_policy(doc["policy"], doc.get("policy_source") or "stored plan policy")


def _chance(store: ResultsStore, plan_hash: str, table: OutcomeTable) -> float:
    """Accuracy of guessing: 1/choices for multiple choice, 0 for free answers."""
    for row in table.rows:
        if row.responded:
            from validate.store import ResponseKey

            stored = store.response(plan_hash, ResponseKey(table.variant, table.task,
                                                           row.item_id, row.repeat))
            if stored is not None and stored.request.kind == "loglikelihood":
                return 1.0 / len(stored.request.continuations)
            return 0.0
    return 0.0


def _flips(comparison) -> tuple[tuple[str, ...], tuple[str, ...]]:
    p = comparison.outcomes
    labels = [f"{i}#{r}" for i, r in zip(p.item_ids, p.repeats, strict=True)]
    to_wrong = tuple(lab for lab, a, b in zip(labels, p.a, p.b, strict=True) if a == 1 and b == 0)
    to_right = tuple(lab for lab, a, b in zip(labels, p.a, p.b, strict=True) if a == 0 and b == 1)
    return to_wrong, to_right


def analyze_run(store: ResultsStore, run: str | int | None = None, *,
                policy: GatePolicy | None = None, baseline: str | None = None,
                alpha: float = 0.05, bootstrap: BootstrapSpec | None = None,
                fidelity: FidelityOf | None = None) -> RunAnalysis:
    """Analyse the plan of ``run`` (a run id, plan hash or prefix; None = latest).

    ``policy`` overrides the policy stored with the plan; ``baseline`` the stored
    baseline; ``fidelity(variant, task)`` supplies fidelity summaries (computed by the
    engine-side fidelity metrics, which this module does not run); by default the
    records the runner wrote beside the store (``fidelity_file``).
    """
    bootstrap = bootstrap or BootstrapSpec(replicates=2000)
    plan_hash = resolve_plan_hash(store, run)
    if fidelity is None:
        fidelity = stored_fidelity(store.path, plan_hash)
    sp = stored_plan(store, plan_hash, baseline)
    doc = sp.doc
    policy = policy or _policy_from(dict(doc))
    power = policy.power if policy is not None else 0.8
    thresholds = policy.health if policy is not None else HealthThresholds()
    warm = bool(doc.get("warm", False))
    max_gen = {t["name"]: t.get("max_gen_toks") for t in doc.get("tasks", [])}

    summaries, comparisons, notes, floor = [], [], [], []
    gate_inputs, reasons_by_cell, metrics = {}, {}, {}
    for task in sp.tasks:
        tables = {v: store.outcomes(plan_hash, v, task) for v in sp.variants}
        wanted = None
        if policy is not None and any(tp.task == task for tp in policy.tasks):
            wanted = policy.task(task).metric
        metric = choose_metric(task, list(tables.values()), wanted)
        metrics[task] = metric
        generate = any(r.output_chars is not None for t in tables.values() for r in t.rows)
        gen_budget = max_gen.get(task) or _task_budget(task)
        facts = {v: variant_health(t, metric, generate, gen_budget) for v, t in tables.items()}
        timings = {v: store.timings(plan_hash, v, task) for v in sp.variants}
        speeds = {v: speed_summary(timings[v], warm) for v in sp.variants}
        outcomes = {v: item_outcomes(t, metric) for v, t in tables.items()}
        for v in sp.variants:
            o = outcomes[v]
            acc = (estimate_accuracy(o.values, list(o.item_ids), alpha, v, task, metric)
                   if o.n_rows else None)
            summaries.append(VariantSummary(
                variant=v, task=task, metric=metric, n=o.n_rows, accuracy=acc,
                health=facts[v], speed=speeds[v],
                fidelity=fidelity(v, task) if fidelity and v != sp.baseline else None,
                prefix_hit_rate=prefix_hit_rate(timings[v]), is_baseline=v == sp.baseline))
            if facts[v].missing:
                notes.append(f"{v}/{task}: {len(facts[v].missing)} of {facts[v].planned} "
                             f"planned rows have no response ({len(facts[v].failed)} failed)")
        base_out = outcomes[sp.baseline]
        if base_out.n_rows:
            chance = _chance(store, plan_hash, tables[sp.baseline])
            if float(base_out.values.mean()) - chance < FLOOR_POINTS:
                floor.append(task)
                notes.append(f"{task}: the baseline scores {100 * base_out.values.mean():.1f} %, "
                             f"within {100 * FLOOR_POINTS:.0f} points of chance "
                             f"({100 * chance:.0f} %): accuracy cannot show a degradation here; "
                             f"read the fidelity metrics first")
        for v in sp.variants[1:]:
            health = pair_health(tables[sp.baseline], tables[v], metric, facts[sp.baseline],
                                 facts[v])
            failures = health_failures(health, thresholds)
            comparison = None
            if base_out.n_rows and outcomes[v].n_rows:
                try:
                    comparison = compare_tables(
                        {(task, metric): base_out}, {(task, metric): outcomes[v]},
                        sp.baseline, v, task, alpha, power, bootstrap).rows[0]
                except PairingError as exc:
                    failures = (*failures, str(exc))
            if comparison is None and not failures:
                failures = ("no paired outcomes",)
            if comparison is not None:
                gate_inputs[(v, task)] = GateInput(paired=comparison.outcomes, health=health)
            reasons_by_cell[(v, task)] = tuple(failures) if comparison is None else ()
            to_wrong, to_right = _flips(comparison) if comparison is not None else ((), ())
            comparisons.append(dict(
                variant=v, task=task, metric=metric, comparison=comparison, health=health,
                health_failures=tuple(failures),
                speedups=speedups(timings[sp.baseline], timings[v], speeds[sp.baseline],
                                  speeds[v], bootstrap, alpha),
                flips_to_wrong=to_wrong, flips_to_right=to_right))

    candidates = sp.variants[1:]
    if policy is not None:
        family = evaluate_family(policy, candidates, gate_inputs, metrics, reasons_by_cell)
        rows = tuple(ComparisonRow(**c, verdict=family.verdicts.get((c["variant"], c["task"])))
                     for c in comparisons)
        decision, per_variant = family.decision, dict(family.variant_decisions)
        policy_summary = PolicySummary(
            source=policy.source, alpha=policy.alpha, power=policy.power,
            correction=policy.correction, mode=policy.mode, equivalence=policy.equivalence,
            margins={tp.task: tp.margin for tp in policy.tasks},
            tiers={tp.task: tp.tier for tp in policy.tasks},
            metrics={tp.task: metrics.get(tp.task, tp.metric or "") for tp in policy.tasks},
            family_size=family.family_size)
    else:
        rows = tuple(ComparisonRow(**c, verdict=None) for c in comparisons)
        per_variant = {v: INVALID if any(r.status == INVALID for r in rows if r.variant == v)
                       else UNGATED for v in candidates}
        decision = INVALID if INVALID in per_variant.values() else UNGATED
        policy_summary = None
    if not warm and any(s.prefix_hit_rate == 0.0 for s in summaries):
        notes.append("cold run: some variants report no prefix-cache hits, so encoder-side "
                     "replay never engaged; set warm = true in the plan to exercise it")
    latest = sp.runs[-1]
    identity = RunIdentity(
        run_id=latest.run_id, run_ids=tuple(r.run_id for r in sp.runs),
        plan_name=latest.plan_name, plan_hash=plan_hash, git=latest.git_sha,
        started_at=sp.runs[0].started_at, finished_at=latest.finished_at, status=latest.status,
        identity=dict(latest.identity), seeds=tuple(latest.seeds),
        engine=str((doc.get("engine") or {}).get("kind", doc.get("source_kind", "unknown"))),
        baseline=sp.baseline, warm=warm)
    return RunAnalysis(identity=identity, policy=policy_summary, tasks=sp.tasks,
                       variants=sp.variants, summaries=tuple(summaries), comparisons=rows,
                       decision=decision, variant_decisions=per_variant,
                       floor_tasks=tuple(floor), notes=tuple(notes))


def _task_budget(task: str) -> int | None:
    import tasks as registry

    if task not in registry.names():
        return None
    return registry.get(task).max_gen_toks
