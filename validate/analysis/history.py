"""Trends across runs: per plan, task and variant, accuracy (with its CI) and speed over
the plans stored in a results store, with flags for a run that is significantly worse
than its trailing baseline or slower by more than a set fraction.

A point of the history is one *plan hash* (a nightly job builds a new hash per build;
resumed attempts of one hash pool their responses, as in the store). Points are ordered
by their first run's start time.

The accuracy check compares a point with the ``window`` points before it:
- items that match (same item id and repeat): a paired comparison, which is what makes
  a nightly of a few hundred items sensitive. With one trailing run and 0/1 scores it is
  the gate's one-sided score test of "worse" (``PairedComparison.p_worse``); with
  several, the per-item mean over the trailing runs is the reference and the test is a
  one-sided paired t on the differences (``compare_continuous``);
- no matching items: an unpaired z test of the two accuracies (CLT / clustered SEs).
A point is flagged when the one-sided p is below ``alpha``. Each series is tested on
its own, not corrected across series: the flags are for a person to look at, not a gate.

The speed check flags a point whose output throughput is below (1 - ``speed_drop``) x the
trailing median, or whose median TTFT or TPOT is above (1 + ``speed_drop``) x theirs.

This is statistics over the store, so it lives with the analysis; ``reports.history_render``
only renders a ``History``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
from scipy import stats

from validate.errors import HistoryInputError, StatsInputError
from validate.stats import (
    BootstrapSpec,
    PairedOutcomes,
    compare_binary,
    compare_continuous,
    estimate_accuracy,
)
from validate.store import OutcomeTable, ResultsStore


@dataclass(frozen=True)
class HistoryOptions:
    """How history is read and judged."""

    plan: str | None = None  # plan name; None = every plan
    since: float | None = None  # epoch seconds; None = all
    window: int = 5  # trailing points forming the baseline
    alpha: float = 0.05  # one-sided level of the "worse" flag
    speed_drop: float = 0.10  # fraction of slow-down that is flagged
    metric: str | None = None  # filter / metric; None = the only or flexible one

    def __post_init__(self) -> None:
        if self.window < 1:
            raise HistoryInputError(f"history window must be >= 1, got {self.window}")
        if not 0.0 < self.alpha < 0.5:
            raise HistoryInputError(f"history alpha must be in (0, 0.5), got {self.alpha}")
        if not 0.0 < self.speed_drop < 1.0:
            raise HistoryInputError(f"speed drop must be a fraction in (0, 1), got {self.speed_drop}")


@dataclass(frozen=True)
class TrailingCheck:
    """This point against its trailing baseline."""

    n_reference_points: int
    paired: bool
    n_items: int  # matched items (paired) or this point's items (unpaired)
    delta: float  # accuracy, this point minus reference (fraction)
    se: float
    p_worse: float  # one-sided
    test: str
    speed_ratio: float | None = None  # throughput / trailing median
    ttft_ratio: float | None = None  # TTFT p50 / trailing median
    tpot_ratio: float | None = None


@dataclass(frozen=True)
class HistoryPoint:
    plan_hash: str
    run_id: int
    started_at: float
    git: str | None
    metric: str
    n_items: int
    accuracy: float | None
    se: float | None
    ci: tuple[float, float] | None
    ttft_p50: float | None
    tpot_p50: float | None
    output_tokens_per_s: float | None
    ttft_mean: float | None = None
    ttft_ci: tuple[float, float] | None = None  # normal 95% CI of the mean TTFT
    check: TrailingCheck | None = None
    flags: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        day = datetime.fromtimestamp(self.started_at, timezone.utc).strftime("%m-%d %H:%M")
        return f"{day} #{self.run_id}"


@dataclass(frozen=True)
class Series:
    plan_name: str
    task: str
    variant: str
    points: tuple[HistoryPoint, ...]


@dataclass(frozen=True)
class History:
    options: HistoryOptions
    series: tuple[Series, ...]
    store: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def flagged(self) -> list[tuple[Series, HistoryPoint]]:
        return [(s, p) for s in self.series for p in s.points if p.flags]

    def to_dict(self) -> dict:
        from validate.stats.jsonable import json_safe

        def point(p: HistoryPoint) -> dict:
            d = {k: getattr(p, k) for k in p.__dataclass_fields__ if k != "check"}
            d["check"] = None if p.check is None else {
                k: getattr(p.check, k) for k in p.check.__dataclass_fields__}
            return d

        return json_safe({
            "format": "v41val-history", "schema_version": 1, "store": self.store,
            "options": {k: getattr(self.options, k) for k in self.options.__dataclass_fields__},
            "series": [{"plan_name": s.plan_name, "task": s.task, "variant": s.variant,
                        "points": [point(p) for p in s.points]} for s in self.series],
            "flagged": [{"plan_name": s.plan_name, "task": s.task, "variant": s.variant,
                         "run_id": p.run_id, "plan_hash": p.plan_hash, "flags": list(p.flags)}
                        for s, p in self.flagged],
            "notes": list(self.notes),
        })


def parse_since(text: str | None) -> float | None:
    """'2026-11-01' or '2026-11-01T12:00' (UTC) -> epoch seconds."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise HistoryInputError(f"--since: expected a date like 2026-11-01, got {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def _metric(table: OutcomeTable, wanted: str | None) -> str | None:
    if wanted is not None:
        return wanted if wanted in table.filters else None
    if len(table.filters) == 1:
        return table.filters[0]
    flexible = [f for f in table.filters if f.endswith("flexible-extract")]
    return flexible[0] if flexible else (table.filters[0] if table.filters else None)


def _rows(table: OutcomeTable, metric: str) -> dict[tuple[str, int], float]:
    return {(r.item_id, r.repeat): float(r.scores[metric]) for r in table.rows
            if r.responded and metric in r.scores}


def _median(values) -> float | None:
    data = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.median(data)) if data else None


@dataclass(frozen=True)
class _Speed:
    ttft_p50: float | None = None
    tpot_p50: float | None = None
    output_tokens_per_s: float | None = None
    ttft_mean: float | None = None
    ttft_ci: tuple[float, float] | None = None


def _mean_ci(values) -> tuple[float | None, tuple[float, float] | None]:
    data = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if data.size == 0:
        return None, None
    mean = float(data.mean())
    if data.size < 2:
        return mean, None
    half = 1.959963984540054 * float(data.std(ddof=1)) / math.sqrt(data.size)
    return mean, (mean - half, mean + half)


def _speed(store: ResultsStore, plan_hash: str, variant: str, task: str) -> _Speed:
    rows = [r for r in store.timings(plan_hash, variant, task) if r.e2e_s is not None]
    if not rows:
        return _Speed()
    starts = [r.started_at_s for r in rows if r.started_at_s is not None]
    ends = [r.started_at_s + r.e2e_s for r in rows if r.started_at_s is not None]
    tokens = sum(r.n_output_tokens or 0 for r in rows)
    window = (max(ends) - min(starts)) if starts else 0.0
    mean, ci = _mean_ci([r.ttft_s for r in rows])
    return _Speed(_median([r.ttft_s for r in rows]), _median([r.tpot_s for r in rows]),
                  tokens / window if window > 0 else None, mean, ci)


@dataclass(frozen=True)
class _Raw:
    point: HistoryPoint
    outcomes: dict[tuple[str, int], float]


def _point(store: ResultsStore, plan_hash: str, runs, variant: str, task: str,
           options: HistoryOptions, stored: set[str]) -> _Raw | None:
    table = store.outcomes(plan_hash, variant, task)
    stored.update(table.filters)
    metric = _metric(table, options.metric)
    if metric is None:
        return None
    outcomes = _rows(table, metric)
    acc = None
    if outcomes:
        keys = sorted(outcomes)
        acc = estimate_accuracy([outcomes[k] for k in keys], [k[0] for k in keys],
                                0.05, variant, task, metric)
    speed = _speed(store, plan_hash, variant, task)
    return _Raw(HistoryPoint(
        plan_hash=plan_hash, run_id=runs[-1].run_id, started_at=runs[0].started_at,
        git=runs[-1].git_sha, metric=metric, n_items=0 if acc is None else acc.n_items,
        accuracy=None if acc is None else acc.mean, se=None if acc is None else acc.se,
        ci=None if acc is None else acc.ci_normal, ttft_p50=speed.ttft_p50,
        tpot_p50=speed.tpot_p50, output_tokens_per_s=speed.output_tokens_per_s,
        ttft_mean=speed.ttft_mean, ttft_ci=speed.ttft_ci), outcomes)


def _trailing_check(current: _Raw, trailing: list[_Raw], options: HistoryOptions,
                    ) -> TrailingCheck | None:
    trailing = [t for t in trailing if t.outcomes]
    if not trailing or not current.outcomes:
        return None
    # Reference per (item, repeat): the mean outcome over the trailing points that have it.
    ref: dict[tuple[str, int], list[float]] = {}
    for t in trailing:
        for key, value in t.outcomes.items():
            ref.setdefault(key, []).append(value)
    shared = sorted(set(ref) & set(current.outcomes))
    items = {k[0] for k in shared}
    cur = np.array([current.outcomes[k] for k in shared])
    base = np.array([np.mean(ref[k]) for k in shared])
    check = None
    if len(items) >= 2:
        paired = PairedOutcomes.from_arrays(base, cur, clusters=[k[0] for k in shared])
        binary = paired.is_binary and not paired.has_repeats
        if binary and len(trailing) == 1:
            pc = compare_binary(paired, alpha=2 * options.alpha,
                                bootstrap=BootstrapSpec(replicates=200, seed=1))
            check = TrailingCheck(1, True, pc.n_items, pc.delta, pc.se_paired,
                                  float(pc.p_worse), "paired score test (one-sided)")
        else:
            try:
                md = compare_continuous(paired, alpha=2 * options.alpha,
                                        bootstrap=BootstrapSpec(replicates=200, seed=1))
            except StatsInputError:
                md = None
            if md is not None:
                if md.se > 0:
                    p = float(stats.t.cdf(md.delta / md.se, md.n_items - 1))
                else:
                    p = 0.0 if md.delta < 0 else 1.0
                check = TrailingCheck(len(trailing), True, md.n_items, md.delta, md.se, p,
                                      "paired t on per-item differences vs the trailing mean")
    if check is None:
        ref_values = np.concatenate([np.fromiter(t.outcomes.values(), float) for t in trailing])
        cur_values = np.fromiter(current.outcomes.values(), float)
        se = math.sqrt(np.var(ref_values, ddof=1) / ref_values.size
                       + np.var(cur_values, ddof=1) / cur_values.size) if (
            ref_values.size > 1 and cur_values.size > 1) else float("nan")
        delta = float(cur_values.mean() - ref_values.mean())
        p = float(stats.norm.cdf(delta / se)) if se and math.isfinite(se) and se > 0 else float("nan")
        check = TrailingCheck(len(trailing), False, int(cur_values.size), delta, se, p,
                              "unpaired z (no matching items)")

    def ratio(now, before) -> float | None:
        ref_value = _median(before)
        if now is None or ref_value is None or ref_value <= 0:
            return None
        return now / ref_value

    p = current.point
    return TrailingCheck(
        check.n_reference_points, check.paired, check.n_items, check.delta, check.se,
        check.p_worse, check.test,
        speed_ratio=ratio(p.output_tokens_per_s, [t.point.output_tokens_per_s for t in trailing]),
        ttft_ratio=ratio(p.ttft_p50, [t.point.ttft_p50 for t in trailing]),
        tpot_ratio=ratio(p.tpot_p50, [t.point.tpot_p50 for t in trailing]))


def _flags(check: TrailingCheck | None, options: HistoryOptions) -> tuple[str, ...]:
    if check is None:
        return ()
    flags = []
    if math.isfinite(check.p_worse) and check.p_worse < options.alpha:
        flags.append(f"accuracy {100 * check.delta:+.2f} pts vs trailing "
                     f"(one-sided p {check.p_worse:.2g}, {check.test})")
    if check.speed_ratio is not None and check.speed_ratio < 1 - options.speed_drop:
        flags.append(f"throughput {100 * (check.speed_ratio - 1):+.0f} % vs trailing median")
    for name, r in (("TTFT", check.ttft_ratio), ("TPOT", check.tpot_ratio)):
        if r is not None and r > 1 + options.speed_drop:
            flags.append(f"{name} p50 {100 * (r - 1):+.0f} % vs trailing median")
    return tuple(flags)


def build_history(store: ResultsStore, options: HistoryOptions | None = None) -> History:
    """Every (plan name, task, variant) series in ``store`` with trailing checks."""
    options = options or HistoryOptions()
    by_hash: dict[str, list] = {}
    for run in store.runs():
        by_hash.setdefault(run.plan_hash, []).append(run)
    plans = sorted(by_hash.items(), key=lambda kv: kv[1][0].started_at)
    if options.plan is not None:
        names = {runs[-1].plan_name for _, runs in plans}
        plans = [(h, runs) for h, runs in plans if runs[-1].plan_name == options.plan]
        if not plans:
            raise HistoryInputError(
                f"{store.path}: no runs of plan {options.plan!r} (plans: "
                f"{', '.join(sorted(names)) or 'none'})")
    raw: dict[tuple[str, str, str], list[_Raw]] = {}
    stored: set[str] = set()
    for plan_hash, runs in plans:
        for variant, task in store.cells(plan_hash):
            got = _point(store, plan_hash, runs, variant, task, options, stored)
            if got is not None:
                raw.setdefault((runs[-1].plan_name, task, variant), []).append(got)
    if options.metric is not None and stored and options.metric not in stored:
        raise HistoryInputError(f"--metric {options.metric!r}: no stored scores under it "
                                f"(stored: {', '.join(sorted(stored))})")
    series = []
    for (plan_name, task, variant), points in sorted(raw.items()):
        done = []
        for i, current in enumerate(points):
            trailing = points[max(0, i - options.window):i]
            check = _trailing_check(current, trailing, options)
            done.append((current.point, check))
        kept = [HistoryPoint(**{k: getattr(p, k) for k in p.__dataclass_fields__
                                if k not in ("check", "flags")},
                             check=check, flags=_flags(check, options))
                for p, check in done
                if options.since is None or p.started_at >= options.since]
        if kept:
            series.append(Series(plan_name, task, variant, tuple(kept)))
    return History(options=options, series=tuple(series), store=str(store.path))
