"""Quality calibration: does the gate catch planted damage at n, as often as ``plan`` says?

``quality_calibration`` runs the planted variants once on the task's items (``pool``),
then for every compared pair (``planted``) and every n in ``ns`` gates ``draws`` seeded
subsets of n items with the real gate (``detection``) and puts three numbers side by
side (``predict``):

- the observed detection rate: the share of subsets the gate FAILs (health checks
  included, so a subset can also come out INVALID, reported apart);
- the pool's exact rate: the hypergeometric probability that an n-subset of *this
  pool* FAILs the test (what the observed rate estimates, up to Monte Carlo error);
- the plan-style prediction: the exact probability that n *fresh* items FAIL, at the
  pool's observed delta and discordance (the enumeration ``v41val plan`` prints for
  PASS; ``plan``'s own PASS power is reported beside the observed PASS rate).

Subsets of a finite pool are not fresh items: as n approaches the pool size the
observed rate tends to the pool's own verdict (0 or 1) while the fresh prediction
keeps the sampling spread; below about a fifth of the pool the two agree to within the
finite population factor. The observed delta is itself an estimate, so the plan-style
prediction carries the pool's uncertainty about the true delta.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from validate.calibration.detection import (
    DetectionRates,
    PairGate,
    detection_rates,
    full_verdict,
    subsamples,
)
from validate.calibration.planted import PlantedLevels, PlantedRow
from validate.calibration.pool import QualityPool, calibration_plan_document, run_pool
from validate.calibration.predict import (
    OutcomeProbabilities,
    PlanPrediction,
    fresh_outcome_probabilities,
    plan_prediction,
    pool_outcome_probabilities,
)
from validate.errors import ValidateInputError
from validate.gate import GatePolicy, TaskVerdict, parse_policy
from validate.progress import QUIET, Progress
from validate.stats.jsonable import json_safe
from validate.stats.proportions import clt_se

SUBSAMPLING_NOTE = (
    "detection rates are over seeded subsets of one finite pool of items, not fresh "
    "items: they estimate the pool's own (hypergeometric) probability, which tends to "
    "the full-pool verdict as n approaches the pool size; the plan-style prediction is "
    "for fresh items at the pool's observed delta and discordance")


@dataclass(frozen=True)
class QualityCell:
    """One (pair, n): observed rates, the pool's exact probabilities, the fresh-item
    prediction and ``plan``'s PASS power. ``observed`` and ``pool`` are None for an n
    beyond the items run (predictions only)."""

    n: int
    observed: DetectionRates | None
    pool: OutcomeProbabilities | None
    fresh: OutcomeProbabilities
    plan: PlanPrediction

    def to_dict(self) -> dict:
        return {"n": self.n,
                "observed": None if self.observed is None else self.observed.to_dict(),
                "pool_exact": None if self.pool is None else self.pool.to_dict(),
                "fresh_exact": self.fresh.to_dict(), "plan": self.plan.to_dict()}


@dataclass(frozen=True)
class QualityRow:
    row: PlantedRow
    n_pool: int
    accuracy_reference: float
    accuracy_candidate: float
    b: int  # reference right, candidate wrong
    c: int  # reference wrong, candidate right
    se: float  # paired SE of delta (one row per item)
    verdict: TaskVerdict  # the gate on the whole pool
    health_failures: tuple[str, ...]
    cells: tuple[QualityCell, ...]

    @property
    def delta(self) -> float:
        return (self.c - self.b) / self.n_pool

    @property
    def discordance(self) -> float:
        return (self.b + self.c) / self.n_pool

    def to_dict(self) -> dict:
        return {**self.row.to_dict(), "n_pool": self.n_pool,
                "accuracy_reference": self.accuracy_reference,
                "accuracy_candidate": self.accuracy_candidate, "b": self.b, "c": self.c,
                "delta": self.delta, "se": self.se, "discordance": self.discordance,
                "full_pool_verdict": self.verdict.to_dict(),
                "health_failures": list(self.health_failures),
                "cells": [c.to_dict() for c in self.cells]}


@dataclass(frozen=True)
class QualityCalibration:
    task: str
    metric: str
    n_pool: int
    window: int | None
    policy: GatePolicy
    draws: int
    seed: int
    ns: tuple[int, ...]
    rows: tuple[QualityRow, ...]
    variants: Mapping[str, Any]  # name -> {"options", "perturb", "rows", "prefix_hit_rate", ...}
    plan_hash: str | None = None
    store: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def margin(self) -> float:
        return self.policy.task(self.task).margin

    def to_dict(self) -> dict:
        p = self.policy
        return json_safe({
            "task": self.task, "metric": self.metric, "n_pool": self.n_pool,
            "window": self.window,
            "policy": {"source": p.source, "margin_points": 100 * self.margin, "alpha": p.alpha,
                       "power": p.power, "correction": p.correction, "mode": p.mode,
                       "equivalence": p.equivalence, "family": "each row gated alone (one claim)"},
            "draws": self.draws, "seed": self.seed, "ns": list(self.ns),
            "variants": dict(self.variants), "plan_hash": self.plan_hash, "store": self.store,
            "rows": [r.to_dict() for r in self.rows], "notes": list(self.notes),
            "subsampling": SUBSAMPLING_NOTE,
        })


def quality_policy(task: str, *, policy: GatePolicy | None = None, margin_points: float = 2.0,
                   alpha: float = 0.05, metric: str | None = None) -> GatePolicy:
    """The policy the rows are gated with: the given policy (it must name ``task``;
    ``metric`` may only fill a metric it leaves open), or an inline one with
    ``margin_points`` and ``alpha`` (Holm, standard mode, default health thresholds)."""
    if policy is not None:
        tp = policy.task(task)  # a PolicyError naming the file when it lacks the task
        if metric is None or tp.metric == metric:
            return policy
        if tp.metric is not None:
            raise ValidateInputError(f"--metric {metric!r}: the policy {policy.source} gates "
                                     f"{task} on {tp.metric!r}")
        tasks = tuple(replace(t, metric=metric) if t.task == task else t for t in policy.tasks)
        return replace(policy, tasks=tasks)
    table: dict[str, Any] = {"margin": margin_points}
    if metric is not None:
        table["metric"] = metric
    return parse_policy({"gate": {"alpha": alpha}, "tasks": {task: table}},
                        source="<calibrate --margin/--alpha>")


def analyse_pool(pool: QualityPool, levels: PlantedLevels, policy: GatePolicy,
                 ns: Sequence[int], *, draws: int = 400, seed: int = 0,
                 progress: Progress = QUIET) -> QualityCalibration:
    """Gate subsets of the pool for every row and n (see the module doc); one bar
    over the rows x subset sizes gated."""
    if draws < 1:
        raise ValidateInputError(f"--draws: expected >= 1, got {draws}")
    if not ns:
        raise ValidateInputError("--n: give at least one subset size")
    task = pool.task
    tp = policy.task(task)
    metric = tp.metric or pool.metric
    n_pool = pool.n_items
    sizes = tuple(sorted({int(n) for n in ns}))
    kept = tuple(n for n in sizes if 0 < n <= n_pool)
    beyond = tuple(n for n in sizes if n > n_pool)
    notes = []
    if beyond:
        notes.append(f"n = {', '.join(map(str, beyond))}: beyond the {n_pool} items run, "
                     "so no subsets: the fresh-item predictions only")
    if not kept:
        raise ValidateInputError(f"--n: every size ({', '.join(map(str, ns))}) exceeds the "
                                 f"{n_pool} items run")
    index_sets = {n: subsamples(n_pool, n, draws, seed) for n in kept}
    rows = []
    with progress.bar("gating subsets", len(levels.rows) * len(sizes)) as bar:
        for row in levels.rows:
            gate = PairGate(pool.variants[row.reference].table, pool.variants[row.candidate].table,
                            metric, policy, pool.max_gen_toks)
            verdict = full_verdict(gate)
            paired, _ = gate.full()
            b = int(np.sum((paired.a == 1.0) & (paired.b != 1.0)))
            c = int(np.sum((paired.a != 1.0) & (paired.b == 1.0)))
            n_scored = paired.n_rows
            delta, disc = (c - b) / n_scored, (b + c) / n_scored
            cells = []
            for n in sizes:
                inside = n in index_sets
                observed = detection_rates(gate, index_sets[n], policy.alpha)[0] if inside else None
                cells.append(QualityCell(
                    n=n, observed=observed,
                    pool=pool_outcome_probabilities(n, n_scored, b, c, tp.margin, policy.alpha,
                                                    policy.equivalence) if inside else None,
                    fresh=fresh_outcome_probabilities(n, disc, delta, tp.margin, policy.alpha,
                                                      policy.equivalence),
                    plan=plan_prediction(n, disc, delta, tp.margin, policy.alpha)))
                bar.advance()
            rows.append(QualityRow(
                row=row, n_pool=n_scored, accuracy_reference=float(paired.a.mean()),
                accuracy_candidate=float(paired.b.mean()), b=b, c=c,
                se=clt_se(paired.b - paired.a), verdict=verdict,
                health_failures=tuple(verdict.reasons) if verdict.verdict == "INVALID" else (),
                cells=tuple(cells)))
    variants = {}
    for v in levels.variants:
        found = pool.variants.get(v.name)
        variants[v.name] = {"options": dict(v.options), "perturb": dict(v.perturb),
                            **(found.to_dict() if found is not None else {})}
    missing = [name for name, v in pool.variants.items() if v.missing]
    if missing:
        notes.append(f"variants with unanswered items (coverage below 100 %: INVALID): "
                     f"{', '.join(missing)}")
    return QualityCalibration(
        task=task, metric=metric, n_pool=n_pool, window=levels.window,
        policy=replace(policy, tasks=(tp,)), draws=draws, seed=seed, ns=sizes,
        rows=tuple(rows), variants=variants, plan_hash=pool.plan_hash, store=pool.store,
        notes=tuple(notes))


def quality_calibration(engine: Mapping[str, Any], levels: PlantedLevels, task: str,
                        limit: int | None, policy: GatePolicy, ns: Sequence[int], *,
                        workspace: Path, draws: int = 400, seed: int = 0,
                        max_gen_toks: int | None = None, concurrency: int = 8,
                        plan_seed: int = 1234,
                        progress: Progress = QUIET) -> QualityCalibration:
    """Run the planted variants (resumable in ``workspace``), then analyse the pool."""
    document = calibration_plan_document(engine, levels, task, limit, max_gen_toks=max_gen_toks,
                                         seed=plan_seed, concurrency=concurrency)
    pool = run_pool(document, workspace, policy.task(task).metric, progress)
    return analyse_pool(pool, levels, policy, ns, draws=draws, seed=seed, progress=progress)
