"""RunAnalysis objects built from known per-item outcomes with the real statistics and
gate code (no store, no engine): the renderers' fixtures.

Outcomes are laid out so the 2x2 tables are known by construction: of n items,
``both`` right under both, then ``b`` right only under the baseline, ``c`` right only
under the candidate, the rest wrong under both. Within a task every table has the same
``both + b`` so the baseline's outcomes are the same items for every candidate."""

from __future__ import annotations

import numpy as np

from validate.analysis.model import (
    ComparisonRow,
    FidelitySummary,
    Percentiles,
    PolicySummary,
    RunAnalysis,
    RunIdentity,
    SpeedSummary,
    Speedup,
    VariantHealth,
    VariantSummary,
)
from validate.gate.evidence import evidence_for
from validate.gate.health import HealthReport
from validate.gate.policy import GatePolicy, TaskPolicy
from validate.gate.run import run_decision
from validate.gate.verdict import decide_family
from validate.speed.types import SPEED_CI_CAVEAT
from validate.stats import BootstrapSpec, ItemOutcomes, compare_tables

BASELINE = "exact"
METRIC = {"gsm8k": "exact_match,flexible-extract", "gpqa_diamond_cot_zeroshot": "exact_match"}
# (task, variant) -> (n, both, b, c)
TABLES = {
    ("gsm8k", "bounded"): (400, 300, 3, 2),
    ("gsm8k", "fused"): (400, 283, 20, 4),
    ("gpqa_diamond_cot_zeroshot", "bounded"): (198, 60, 2, 3),
    ("gpqa_diamond_cot_zeroshot", "fused"): (198, 56, 6, 1),
}
MARGINS = {"gsm8k": 0.01, "gpqa_diamond_cot_zeroshot": 0.05}
SPEEDUP = {"bounded": 1.6, "fused": 1.25}


def item_ids(task: str, n: int) -> list[str]:
    prefix = "gsm8k" if task == "gsm8k" else "rec"
    return [f"{prefix}-{i:04d}" for i in range(n)]


def outcome_arrays(n: int, both: int, b: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    base = np.zeros(n)
    cand = np.zeros(n)
    base[:both] = cand[:both] = 1.0
    base[both:both + b] = 1.0
    cand[both + b:both + b + c] = 1.0
    return base, cand


def _health() -> VariantHealth:
    return VariantHealth(planned=0, responded=0, missing=(), failed=(), invalid_rate=0.01,
                         empty_rate=0.0, truncated_rate=0.0, mean_output_chars=420.0,
                         mean_output_tokens=130.0, max_gen_toks=256)


def _speed(variant: str) -> SpeedSummary:
    factor = 1.0 if variant == BASELINE else 1.0 / SPEEDUP[variant]
    ttft = Percentiles(n=100, mean=0.5 * factor, p50=0.45 * factor, p90=0.8 * factor,
                       p99=1.1 * factor)
    tpot = Percentiles(n=100, mean=0.02 * factor, p50=0.019 * factor, p90=0.03 * factor,
                       p99=0.04 * factor)
    return SpeedSummary(n_requests=100, ttft_s=ttft, tpot_s=tpot, e2e_s=None,
                        output_tokens_per_s=800.0 / factor, tokens_per_s_per_user=50.0 / factor,
                        concurrency=8)


def make_analysis(tables=None, margins=None, correction: str = "holm") -> RunAnalysis:
    tables = tables or TABLES
    margins = margins or MARGINS
    spec = BootstrapSpec(replicates=400, seed=7)
    tasks = tuple(dict.fromkeys(t for t, _ in tables))
    variants = (BASELINE,) + tuple(dict.fromkeys(v for _, v in tables))
    summaries, tested, comparisons = [], [], {}
    for task in tasks:
        metric = METRIC[task]
        for (t, variant), (n, both, b, c) in tables.items():
            if t != task:
                continue
            ids = item_ids(task, n)
            base, cand = outcome_arrays(n, both, b, c)
            ta = {(task, metric): ItemOutcomes.single(BASELINE, task, metric, base, ids)}
            tb = {(task, metric): ItemOutcomes.single(variant, task, metric, cand, ids)}
            mc = compare_tables(ta, tb, BASELINE, variant, bootstrap=spec).rows[0]
            comparisons[(task, variant)] = mc
            tp = TaskPolicy(task=task, margin=margins[task], tier="critical", metric=metric)
            tested.append((tp, metric, evidence_for(mc.outcomes)))
            if not any(s.variant == BASELINE and s.task == task for s in summaries):
                summaries.append(VariantSummary(BASELINE, task, metric, n, mc.accuracy_a,
                                                _health(), _speed(BASELINE), None, None, True))
            fid = FidelitySummary("exact full-vocab", 32, 4096, 0.0021, 0.0003, 0.02, 0.991,
                                  0.002, 41.0, 37.0, 12)
            summaries.append(VariantSummary(variant, task, metric, n, mc.accuracy_b, _health(),
                                            _speed(variant), fid, 0.5, False))
    policy = GatePolicy(tasks=tuple(tp for tp, _, _ in tested), correction=correction,
                        source="policy.toml")
    verdicts = decide_family(policy, tested)
    rows = []
    for ((task, variant), mc), v in zip(comparisons.items(), verdicts, strict=True):
        ids = mc.outcomes.item_ids
        a, b = mc.outcomes.a, mc.outcomes.b
        to_wrong = tuple(f"{i}#0" for i, x, y in zip(ids, a, b, strict=True) if x == 1 and y == 0)
        to_right = tuple(f"{i}#0" for i, x, y in zip(ids, a, b, strict=True) if x == 0 and y == 1)
        s = SPEEDUP[variant]
        speedups = (Speedup("ttft", s, (s - 0.1, s + 0.1), 100),
                    Speedup("tpot", s, (s - 0.05, s + 0.05), 100),
                    Speedup("throughput", s, (s - 0.08, s + 0.08), 100))
        rows.append(ComparisonRow(variant, task, mc.metric, mc, v, HealthReport(), (), speedups,
                                  to_wrong, to_right))
    decision = run_decision(tuple(verdicts), policy.mode)
    per_variant = {
        v: run_decision(tuple(x for x, r in zip(verdicts, rows, strict=True) if r.variant == v),
                        policy.mode)
        for v in variants[1:]
    }
    ident = RunIdentity(run_id=3, run_ids=(2, 3), plan_name="swa-ab", plan_hash="f" * 64,
                        git="0123abc", started_at=1_795_000_000.0,
                        finished_at=1_795_000_900.0, status="complete",
                        identity={"torch": "2.13.0", "machine": "x86_64"}, seeds=(1234,),
                        engine="builtin", baseline=BASELINE)
    psum = PolicySummary(source="policy.toml", alpha=0.05, power=0.8, correction=correction,
                         mode="standard", equivalence=False, margins=dict(margins),
                         tiers={t: "critical" for t in margins},
                         metrics={t: METRIC[t] for t in margins}, family_size=len(verdicts))
    return RunAnalysis(identity=ident, policy=psum, tasks=tasks, variants=variants,
                       summaries=tuple(summaries), comparisons=tuple(rows), decision=decision,
                       variant_decisions=per_variant, floor_tasks=(), notes=(),
                       caveats=(SPEED_CI_CAVEAT,))
