"""Build a ``RunAnalysis`` from a results store.

Order (docs/design.md, data flow): outcomes per (variant, task) -> health facts -> accuracy per
variant -> paired comparisons vs the baseline -> the gate over every (variant, task)
as one family (health first: an unhealthy pair is INVALID and leaves the family) ->
speed and speed-ups -> floor detection and notes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from validate.analysis.engagement import expected_optimizations, hit_notes, pair_engagement
from validate.analysis.headline import headline_section, ttft_disagreements
from validate.analysis.interleaved import interleaved_section
from validate.analysis.model import (
    INVALID,
    UNGATED,
    ComparisonRow,
    FidelitySummary,
    PolicySummary,
    RunAnalysis,
    RunIdentity,
    SpeedSummary,
    VariantSummary,
)
from validate.analysis.noise_floor import noise_floor
from validate.analysis.source import (
    StoredPlan,
    choose_metric,
    resolve_plan_hash,
    scored_rows,
    stored_plan,
)
from validate.analysis.speed import prefix_hit_rate, speed_summary, speedups
from validate.analysis.stored_fidelity import stored_fidelity
from validate.errors import PairingError
from validate.gate.engagement import EngagementPolicy, engagement_failures
from validate.gate.family import evaluate_family
from validate.gate.health import HealthThresholds, health_failures
from validate.gate.policy import GatePolicy, parse_policy
from validate.gate.run import GateInput
from validate.health.facts import VariantHealth, pair_health, variant_health
from validate.plan.schema import engine_identity, normalised_config
from validate.speed.types import SPEED_CI_CAVEAT
from validate.stats.bootstrap import BootstrapSpec
from validate.stats.compare import compare_tables
from validate.stats.outcomes import ItemOutcomes
from validate.stats.proportions import estimate_accuracy
from validate.store import OutcomeTable, ResultsStore, TimingRow

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


@dataclass(frozen=True, eq=False)
class _TaskData:
    """Everything read from the store for one task, on its gated metric."""

    task: str
    metric: str
    tables: dict[str, OutcomeTable]
    facts: dict[str, VariantHealth]
    timings: dict[str, list[TimingRow]]
    speeds: dict[str, SpeedSummary | None]
    outcomes: dict[str, ItemOutcomes]
    ledgers: dict[str, dict]  # variant -> (item_id, repeat) -> Engagement


def _load_task(store: ResultsStore, sp: StoredPlan, task: str, policy: GatePolicy | None,
               warm: bool) -> _TaskData:
    plan_hash = sp.plan_hash
    tables = {v: store.outcomes(plan_hash, v, task) for v in sp.variants}
    wanted = None
    if policy is not None and any(tp.task == task for tp in policy.tasks):
        wanted = policy.task(task).metric
    metric = choose_metric(task, list(tables.values()), wanted)
    generate = any(r.output_chars is not None for t in tables.values() for r in t.rows)
    budgets = {t["name"]: t.get("max_gen_toks") for t in sp.doc.get("tasks", [])}
    budget = budgets.get(task) or _task_budget(task)
    timings = {v: store.timings(plan_hash, v, task) for v in sp.variants}
    return _TaskData(
        task=task, metric=metric, tables=tables,
        facts={v: variant_health(t, metric, generate, budget) for v, t in tables.items()},
        timings=timings, speeds={v: speed_summary(timings[v], warm) for v in sp.variants},
        outcomes={v: item_outcomes(t, metric) for v, t in tables.items()},
        ledgers={v: store.engagement(plan_hash, v, task) for v in sp.variants})


def _summaries(d: _TaskData, sp: StoredPlan, alpha: float,
               fidelity: FidelityOf) -> tuple[list[VariantSummary], list[str]]:
    out, notes = [], []
    for v in sp.variants:
        o, facts = d.outcomes[v], d.facts[v]
        acc = (estimate_accuracy(o.values, list(o.item_ids), alpha, v, d.task, d.metric)
               if o.n_rows else None)
        out.append(VariantSummary(
            variant=v, task=d.task, metric=d.metric, n=o.n_rows, accuracy=acc, health=facts,
            speed=d.speeds[v], fidelity=fidelity(v, d.task) if v != sp.baseline else None,
            prefix_hit_rate=prefix_hit_rate(d.timings[v]), is_baseline=v == sp.baseline))
        if facts.missing:
            notes.append(f"{v}/{d.task}: {len(facts.missing)} of {facts.planned} planned rows "
                         f"have no response ({len(facts.failed)} failed)")
    return out, notes


def _floor_note(store: ResultsStore, sp: StoredPlan, d: _TaskData,
                chance: float) -> str | None:
    """A note when the baseline is within FLOOR_POINTS of chance on this task."""
    base = d.outcomes[sp.baseline]
    if not base.n_rows:
        return None
    mean = float(base.values.mean())
    if mean - chance >= FLOOR_POINTS:
        return None
    return (f"{d.task}: the baseline scores {100 * mean:.1f} %, within "
            f"{100 * FLOOR_POINTS:.0f} points of chance ({100 * chance:.0f} %): accuracy "
            f"cannot show a degradation here; read the fidelity metrics first")


def _engagement(d: _TaskData, sp: StoredPlan, v: str, comparison, configs: dict,
                log_lines: list[str], alpha: float):
    """The candidate's engagement counts and breakdowns on its paired rows."""
    if comparison is None:
        return None
    kind = str((sp.doc.get("engine") or {}).get("kind", "unknown"))
    expected = expected_optimizations(kind, configs.get(sp.baseline, {}), configs.get(v, {}))
    prompts = {(t.item_id, t.repeat): t.n_prompt_tokens for t in d.timings[v]}
    return pair_engagement(comparison.outcomes, expected, d.ledgers[v],
                           d.ledgers[sp.baseline], prompts, log_lines, alpha)


def _noise_floor(d: _TaskData, sp: StoredPlan, v: str, aa: tuple[str, ...],
                 fidelity: FidelityOf):
    """The A/A noise floor beside candidate ``v`` (None without an A/A copy)."""
    if not aa or v in aa:
        return None

    def kl(variant: str) -> float | None:
        f = fidelity(variant, d.task)
        return None if f is None else f.kl_mean

    return noise_floor(aa[0], d.outcomes[sp.baseline], d.outcomes[aa[0]], d.outcomes[v],
                       kl(aa[0]), kl(v))


def _compare(d: _TaskData, sp: StoredPlan, v: str, thresholds: HealthThresholds, alpha: float,
             power: float, bootstrap: BootstrapSpec, configs: dict, log_lines: list[str],
             engagement_policy: EngagementPolicy) -> tuple[dict, GateInput | None]:
    """One candidate vs the baseline on one task: the row's fields, and the gate's input
    (None when nothing could be paired, which makes the cell INVALID)."""
    base = sp.baseline
    health = pair_health(d.tables[base], d.tables[v], d.metric, d.facts[base], d.facts[v])
    failures = health_failures(health, thresholds)
    comparison = None
    if d.outcomes[base].n_rows and d.outcomes[v].n_rows:
        try:
            comparison = compare_tables(
                {(d.task, d.metric): d.outcomes[base]}, {(d.task, d.metric): d.outcomes[v]},
                base, v, d.task, alpha, power, bootstrap).rows[0]
        except PairingError as exc:
            failures = (*failures, str(exc))
    if comparison is None and not failures:
        failures = ("no paired outcomes",)
    to_wrong, to_right = _flips(comparison) if comparison is not None else ((), ())
    engagement = _engagement(d, sp, v, comparison, configs, log_lines, alpha)
    not_engaged = () if engagement is None else engagement_failures(engagement.counts,
                                                                    engagement_policy)
    row = dict(variant=v, task=d.task, metric=d.metric, comparison=comparison, health=health,
               health_failures=tuple(failures) + not_engaged, engagement=engagement,
               speedups=speedups(d.timings[base], d.timings[v], d.speeds[base], d.speeds[v],
                                 bootstrap, alpha),
               flips_to_wrong=to_wrong, flips_to_right=to_right)
    gate_input = None if comparison is None else GateInput(comparison.outcomes, health)
    return row, gate_input


def _policy_summary(policy: GatePolicy, metrics: dict[str, str], size: int) -> PolicySummary:
    return PolicySummary(
        source=policy.source, alpha=policy.alpha, power=policy.power,
        correction=policy.correction, mode=policy.mode, equivalence=policy.equivalence,
        margins={tp.task: tp.margin for tp in policy.tasks},
        tiers={tp.task: tp.tier for tp in policy.tasks},
        metrics={tp.task: metrics.get(tp.task, tp.metric or "") for tp in policy.tasks},
        family_size=size)


def _identity(sp: StoredPlan, warm: bool) -> RunIdentity:
    latest = sp.runs[-1]
    return RunIdentity(
        run_id=latest.run_id, run_ids=tuple(r.run_id for r in sp.runs),
        plan_name=latest.plan_name, plan_hash=sp.plan_hash, git=latest.git_sha,
        started_at=sp.runs[0].started_at, finished_at=latest.finished_at, status=latest.status,
        identity=dict(latest.identity), seeds=tuple(latest.seeds),
        engine=str((sp.doc.get("engine") or {}).get("kind", "unknown")),
        baseline=sp.baseline, warm=warm,
        engine_identity=engine_identity(sp.doc.get("engine") or {}))


def analyze_run(store: ResultsStore, run: str | int | None = None, *,
                policy: GatePolicy | None = None, baseline: str | None = None,
                alpha: float = 0.05, bootstrap: BootstrapSpec | None = None,
                fidelity: FidelityOf | None = None) -> RunAnalysis:
    """Analyse the plan of ``run`` (a run id, plan hash or prefix; None = latest).

    ``policy`` overrides the policy stored with the plan; ``baseline`` the stored
    baseline; ``fidelity(variant, task)`` supplies fidelity summaries (computed by the
    engine-side fidelity metrics, which this module does not run); by default the
    records the runner stored (``validate.analysis.stored_fidelity``).
    """
    bootstrap = bootstrap or BootstrapSpec(replicates=2000)
    plan_hash = resolve_plan_hash(store, run)
    fidelity = fidelity or stored_fidelity(store, plan_hash)
    sp = stored_plan(store, plan_hash, baseline)
    policy = policy or _policy_from(dict(sp.doc))
    power = policy.power if policy is not None else 0.8
    thresholds = policy.health if policy is not None else HealthThresholds()
    warm = bool(sp.doc.get("warm", False))

    summaries, rows, notes, floor, chance = [], [], [], [], {}
    gate_inputs, metrics = {}, {}
    kind = str((sp.doc.get("engine") or {}).get("kind", "unknown"))
    configs = {v.name: normalised_config(v.config, kind) for v in store.variants(plan_hash)}
    passes = {v: store.counters(plan_hash, v) for v in sp.variants}
    log_lines = {v: [line for p in passes[v] for line in p.log_lines] for v in sp.variants}
    engagement_policy = policy.engagement if policy is not None else EngagementPolicy()
    # A/A copies of the baseline (plan aa = true): shown beside every pair, never gated
    aa = tuple(v for v in sp.variants[1:] if configs.get(v, {}).get("aa_of") == sp.baseline)
    for task in sp.tasks:
        d = _load_task(store, sp, task, policy, warm)
        metrics[task] = d.metric
        found, missing_notes = _summaries(d, sp, alpha, fidelity)
        summaries += found
        notes += missing_notes
        chance[task] = _chance(store, sp.plan_hash, d.tables[sp.baseline])
        note = _floor_note(store, sp, d, chance[task])
        if note is not None:
            floor.append(task)
            notes.append(note)
        if warm:
            for v in sp.variants:
                notes += [n for n in hit_notes(v, task, d.ledgers[v], d.outcomes[v].n_rows,
                                               passes[v]) if n not in notes]
        for v in sp.variants[1:]:
            row, gate_input = _compare(d, sp, v, thresholds, alpha, power, bootstrap,
                                       configs, log_lines[v], engagement_policy)
            row["noise_floor"] = _noise_floor(d, sp, v, aa, fidelity)
            rows.append(row)
            if gate_input is not None and v not in aa:
                gate_inputs[(v, task)] = gate_input

    candidates = tuple(v for v in sp.variants[1:] if v not in aa)
    if policy is not None:
        reasons = {(r["variant"], r["task"]): r["health_failures"] for r in rows
                   if r["variant"] not in aa}
        family = evaluate_family(policy, candidates, gate_inputs, metrics, reasons)
        comparisons = tuple(ComparisonRow(**r, verdict=family.verdicts.get(
            (r["variant"], r["task"]))) for r in rows)
        decision, per_variant = family.decision, dict(family.variant_decisions)
        policy_summary = _policy_summary(policy, metrics, family.family_size)
    else:  # no policy: no verdicts, but a broken variant is still INVALID
        comparisons = tuple(ComparisonRow(**r, verdict=None) for r in rows)
        per_variant = {v: INVALID if any(c.status == INVALID for c in comparisons
                                         if c.variant == v) else UNGATED for v in candidates}
        decision = INVALID if INVALID in per_variant.values() else UNGATED
        policy_summary = None
    headline, headline_notes = headline_section(store, plan_hash, sp.doc, sp.baseline,
                                                sp.variants, alpha, bootstrap)
    notes += headline_notes + ttft_disagreements(headline, rows)
    measured = headline is not None or any(r["speedups"] for r in rows)
    if not warm and any(s.prefix_hit_rate == 0.0 for s in summaries):
        notes.append("cold run: some variants report no prefix-cache hits, so encoder-side "
                     "replay never engaged; set warm = true in the plan to exercise it")
    return RunAnalysis(identity=_identity(sp, warm), policy=policy_summary, tasks=sp.tasks,
                       variants=sp.variants, summaries=tuple(summaries),
                       comparisons=comparisons, decision=decision,
                       variant_decisions=per_variant, floor_tasks=tuple(floor),
                       chance=chance,
                       notes=tuple(notes),
                       variant_configs=configs,
                       headline=headline, caveats=(SPEED_CI_CAVEAT,) if measured else (),
                       interleaved=interleaved_section(store, plan_hash, sp.baseline,
                                                       sp.variants, alpha, bootstrap))


def _task_budget(task: str) -> int | None:
    import tasks as registry

    if task not in registry.names():
        return None
    return registry.info(task).max_gen_toks
