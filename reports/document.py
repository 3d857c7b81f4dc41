"""The report document: one JSON-able dict built from a ``RunAnalysis``, the single
source every renderer (terminal, Markdown, HTML, JSON, JUnit) reads.

Why a document between the analysis and the renderers: the JSON report *is* this
document, checked against ``reports/schema/report.schema.json``, so whatever a person
reads in the terminal or the HTML is exactly what CI archives, and nothing a renderer
shows can drift from what the schema promises. Renderers never recompute statistics.

Units are the schema's: fractions (not points), seconds, speed-ups > 1 = faster.
Flips and outcomes name items by id only (``item_id#repeat``): no task text.
"""

from __future__ import annotations

import time
from importlib.metadata import PackageNotFoundError, version

from reports.headline import headline_document
from validate.stats.jsonable import json_safe

FORMAT = "v41val-report"
# 2: "engine" (kind and the settings that change responses), "variants" (each
# variant's normalised config) and the optional "execution" of ``v41val run --json``
# 3: a comparison's "interval" is what the gate decided on (its one-sided bounds at the
# family-adjusted levels) and its normal CI moved to "ci_wald"; a variant's "ci" is the
# Wilson interval ("ci_method"); "caveats"; speed-ups name their "statistic"
SCHEMA_VERSION = 3
FAMILY = "run"  # the gate adjusts every gated (variant, task) of a run together


def _generator() -> str:
    try:
        return f"v41val {version('v41val')}"
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "v41val"


def _percentiles(p) -> dict | None:
    if p is None:
        return None
    return {"p50": p.p50, "p90": p.p90, "p99": p.p99, "mean": p.mean, "n": p.n}


def _speed(s) -> dict | None:
    if s is None:
        return None
    return {
        "n_requests": s.n_requests, "ttft_s": _percentiles(s.ttft_s),
        "tpot_s": _percentiles(s.tpot_s), "e2e_s": _percentiles(s.e2e_s),
        "output_tokens_per_s": s.output_tokens_per_s,
        "tokens_per_s_per_user": s.tokens_per_s_per_user, "concurrency": s.concurrency,
        "warm": s.warm,
    }


def _fidelity(f) -> dict | None:
    if f is None:
        return None
    return {
        "method": f.method, "n_prompts": f.n_prompts, "n_tokens": f.n_tokens,
        "kl_mean": f.kl_mean, "kl_se": f.kl_se, "kl_p99": f.kl_p99,
        "top1_agreement": f.top1_agreement, "top1_se": f.top1_agreement_se,
        "first_divergence_mean": f.first_divergence_mean,
        "first_divergence_median": f.first_divergence_median, "n_diverged": f.n_diverged,
        "n_nonfinite": f.n_nonfinite,
    }


def _variant(s) -> dict:
    acc = s.accuracy
    return {
        "variant": s.variant, "is_baseline": s.is_baseline,
        "n_items": acc.n_items if acc is not None else 0,
        "n_rows": acc.n_rows if acc is not None else 0,
        "accuracy": None if acc is None else acc.mean,
        "se": None if acc is None else acc.se,
        "ci": None if acc is None else list(acc.ci),
        "ci_method": None if acc is None else acc.ci_method,
        "alpha": None if acc is None else acc.alpha,
        "health": s.health.to_dict(),
        "speed": _speed(s.speed), "fidelity": _fidelity(s.fidelity),
        "prefix_hit_rate": s.prefix_hit_rate,
    }


def _verdict(v) -> dict | None:
    if v is None:
        return None
    return {
        "verdict": v.verdict, "margin": v.margin, "alpha": v.alpha,
        "correction": v.correction, "equivalence": v.equivalence, "tier": v.tier,
        "family": FAMILY, "test": v.test, "delta": v.delta, "lower_bound": v.lower_bound,
        "upper_bound": v.upper_bound, "bound_alpha": v.bound_alpha,
        "upper_bound_alpha": v.upper_bound_alpha,
        "p_noninferior": v.p_noninferior, "p_noninferior_adjusted": v.p_noninferior_adjusted,
        "p_fail": v.p_fail, "p_fail_adjusted": v.p_fail_adjusted, "p_worse": v.p_worse,
        "mde": v.mde, "n_to_decide": v.n_to_decide, "reasons": list(v.reasons),
    }


def _interleaved(x) -> dict:
    """One variant's speed-ups from the interleaved rounds."""
    return {"variant": x.variant, "rounds": x.rounds, "concurrency": x.concurrency,
            "speedups": _speedups(x)}


def _speedups(row) -> dict:
    out = {}
    for sp in row.speedups:
        out[sp.metric] = {"ratio": sp.ratio, "ci": None if sp.ci is None else list(sp.ci),
                          "n": sp.n, "statistic": sp.statistic}
    return out


GATE_INTERVAL = ("gate: one-sided bounds of the gate's test at the family-adjusted levels "
                 "(lower: the PASS claim, upper: the FAIL claim)")
SCORE_INTERVAL = "Tango score interval, two-sided (not gated)"
WALD_INTERVAL = "normal interval of the paired SE, two-sided (not gated)"


def _interval(mc, v) -> dict | None:
    """The interval every renderer shows beside delta: the one the gate decided on.

    Why not the normal (Wald) CI: with no discordant item its SE is 0 and it collapses
    to [0, 0], while the gate's score bounds stay as wide as n allows. Ungated binary
    comparisons show the score interval (the same test, two-sided at ``ci_alpha``)."""
    if mc is None:
        return None
    if v is not None and v.lower_bound is not None:
        return {"low": v.lower_bound, "high": v.upper_bound, "low_alpha": v.bound_alpha,
                "high_alpha": v.upper_bound_alpha, "kind": "gate", "method": GATE_INTERVAL,
                "test": v.test}
    p = mc.paired
    ci_score = getattr(p, "ci_score", None)
    if ci_score is not None:
        return {"low": ci_score[0], "high": ci_score[1], "low_alpha": p.alpha / 2,
                "high_alpha": p.alpha / 2, "kind": "score", "method": SCORE_INTERVAL,
                "test": p.test}
    lo, hi = p.ci_normal if hasattr(p, "table") else p.ci_t
    return {"low": lo, "high": hi, "low_alpha": p.alpha / 2, "high_alpha": p.alpha / 2,
            "kind": "wald", "method": WALD_INTERVAL, "test": p.test}


def _statistics(mc, include_outcomes: bool) -> dict:
    """The paired numbers of one comparison; empty-ish when nothing could be paired."""
    if mc is None:
        return {"n_items": 0, "n_rows": 0, "delta": None, "se": None, "ci_wald": None,
                "table": None, "outcomes": None}
    p = mc.paired
    binary = hasattr(p, "table")
    out = {
        "n_items": p.n_items, "n_rows": p.n_rows, "repeated": p.repeated,
        "accuracy_baseline": mc.accuracy_a.mean, "accuracy_candidate": mc.accuracy_b.mean,
        "delta": p.delta, "se": p.se_paired if binary else p.se,
        "ci_wald": list(p.ci_normal if binary else p.ci_t), "ci_alpha": p.alpha,
        "ci_score": None if not binary or p.ci_score is None else list(p.ci_score),
        "mcnemar_p": p.mcnemar_p if binary else None,
        "p_worse": p.p_worse if binary else None, "mde": p.mde, "coverage": mc.coverage,
        "table": None,
    }
    if binary:
        t = p.table
        out["table"] = {"both_right": t.both_right, "b": t.a_only, "c": t.b_only,
                        "both_wrong": t.both_wrong, "n": t.n}
    o = mc.outcomes
    out["outcomes"] = None if not include_outcomes else {
        "item_ids": list(o.item_ids), "repeats": [int(r) for r in o.repeats],
        "baseline": [float(x) for x in o.a], "candidate": [float(x) for x in o.b],
    }
    return out


def _comparison(row, baseline: str, include_outcomes: bool) -> dict:
    d = {"variant": row.variant, "baseline": baseline, "status": row.status}
    d |= _statistics(row.comparison, include_outcomes)
    d |= {
        "interval": _interval(row.comparison, row.verdict),
        "verdict": _verdict(row.verdict),
        "health": _plain_health(row.health), "health_failures": list(row.health_failures),
        "speedups": _speedups(row),
        "flips": {"right_to_wrong": list(row.flips_to_wrong),
                  "wrong_to_right": list(row.flips_to_right)},
        "engagement": None if row.engagement is None else row.engagement.to_dict(),
        "noise_floor": None if row.noise_floor is None else row.noise_floor.to_dict(),
    }
    return d


def _plain_health(h) -> dict | None:
    if h is None:
        return None
    return {k: getattr(h, k) for k in h.__dataclass_fields__}


def _policy(p) -> dict | None:
    if p is None:
        return None
    tasks = [{"task": t, "metric": p.metrics.get(t), "margin": m, "tier": p.tiers.get(t, "critical")}
             for t, m in p.margins.items()]
    return {"alpha": p.alpha, "power": p.power, "correction": p.correction, "mode": p.mode,
            "equivalence": p.equivalence, "source": p.source, "family_size": p.family_size,
            "tasks": tasks}


def _run(ident) -> dict:
    return {
        "run_id": ident.run_id, "run_ids": list(ident.run_ids), "plan_name": ident.plan_name,
        "plan_hash": ident.plan_hash, "git": ident.git, "started_at": ident.started_at,
        "finished_at": ident.finished_at, "status": ident.status, "engine": ident.engine,
        "baseline": ident.baseline, "seeds": list(ident.seeds),
        "identity": dict(ident.identity), "warm": ident.warm,
    }


def _variants(analysis) -> list[dict]:
    """What each variant is: its stored (normalised) config, baseline first."""
    configs = analysis.variant_configs
    return [{"variant": v, "is_baseline": v == analysis.identity.baseline,
             "config": dict(configs.get(v, {}))} for v in analysis.variants]


def report_document(analysis, include_outcomes: bool = True,
                    execution: dict | None = None) -> dict:
    """The versioned report document of ``analysis`` (a ``RunAnalysis``): what
    ``v41val report --format json`` writes and, with ``execution`` (what this execution
    stored and sent), what ``v41val run --json`` prints.

    ``include_outcomes`` keeps the paired per-row 0/1 outcomes (ids and scores only), so
    a reader can recompute every statistic, also for repeated runs where the 2x2 table
    alone does not suffice.
    """
    baseline = analysis.identity.baseline
    tasks = []
    for task in analysis.tasks:
        summaries = [s for s in analysis.summaries if s.task == task]
        rows = [c for c in analysis.comparisons if c.task == task]
        summaries.sort(key=lambda s: (not s.is_baseline, analysis.variants.index(s.variant)
                                      if s.variant in analysis.variants else 0))
        metric = next((s.metric for s in summaries), rows[0].metric if rows else "")
        tasks.append({
            "task": task, "metric": metric, "floor": task in analysis.floor_tasks,
            "chance": getattr(analysis, "chance", {}).get(task),
            "variants": [_variant(s) for s in summaries],
            "comparisons": [_comparison(r, baseline, include_outcomes) for r in rows],
        })
    doc = {
        "format": FORMAT, "schema_version": SCHEMA_VERSION,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "generator": _generator(),
        "run": _run(analysis.identity),
        "engine": {"kind": analysis.identity.engine,
                   "identity": dict(analysis.identity.engine_identity)},
        "variants": _variants(analysis),
        "policy": _policy(analysis.policy),
        "decision": analysis.decision, "exit_code": analysis.exit_code,
        "variant_decisions": dict(analysis.variant_decisions),
        "floor_tasks": list(analysis.floor_tasks), "notes": list(analysis.notes),
        "caveats": list(getattr(analysis, "caveats", ())),
        "tasks": tasks,
        "headline": headline_document(getattr(analysis, "headline", None), baseline),
        "interleaved": [_interleaved(x) for x in getattr(analysis, "interleaved", ())],
    }
    if execution is not None:
        doc["execution"] = execution
    return json_safe(doc)
