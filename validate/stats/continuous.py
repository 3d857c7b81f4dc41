"""Paired statistics for continuous per-item metrics: KL, latency, token counts.

- ``compare_continuous``: mean difference B - A with its paired SE (clustered by item
  when repeated), a t interval with n_items - 1 degrees of freedom (the normal limit
  is wrong for the few dozen items a quick latency probe has), and a paired bootstrap CI.
- ``ratio_of_means``: mean(B) / mean(A) with a paired bootstrap percentile CI. For
  speed-ups pass the baseline's latencies as A and the candidate's as B and read
  A/B, or pass throughputs and read B/A; the orientation is the caller's (``invert``).
  A ratio of means (not a mean of per-item ratios) is what "x % faster over the whole
  workload" means, and is not dominated by a few tiny items.
- ``ratio_of_medians``: median(B) / median(A), the same orientation and paired item
  bootstrap. The speed reports use it: they show p50 latencies and median per-user
  rates, and a speed-up beside them must be the ratio of those very figures (a ratio
  of means beside medians can point the other way when a few requests are slow).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from validate.errors import StatsInputError
from validate.stats import distributions as stats  # scipy.stats' values, not its import cost
from validate.stats._checks import check_alpha
from validate.stats.bootstrap import (
    BootstrapSpec,
    percentile_interval,
    replicate_means,
    replicate_medians,
)
from validate.stats.outcomes import PairedOutcomes
from validate.stats.proportions import clt_se, clustered_se


@dataclass(frozen=True)
class PairedMeanDifference:
    task: str
    metric: str
    n_items: int
    n_rows: int
    mean_a: float
    mean_b: float
    delta: float
    se: float
    ci_t: tuple[float, float]
    ci_bootstrap: tuple[float, float]
    alpha: float
    bootstrap: BootstrapSpec
    repeated: bool

    @property
    def mde(self) -> float:
        """Two-sided MDE at 80 % power from the observed SE (t quantiles)."""
        df = max(self.n_items - 1, 1)
        return float((stats.t.ppf(1 - self.alpha / 2, df) + stats.t.ppf(0.8, df)) * self.se)

    @property
    def test(self) -> str:
        se = "clustered by item" if self.repeated else "paired"
        return f"paired mean difference, SE {se}, t interval (df={self.n_items - 1}); bootstrap"

    def report(self) -> str:
        level = round(100 * (1 - self.alpha))
        return (
            f"{self.task}/{self.metric}: mean A {self.mean_a:.6g}, B {self.mean_b:.6g}, "
            f"delta (B-A) {self.delta:.6g} ± {self.se:.3g} (n={self.n_items} items, "
            f"alpha={self.alpha}); {level}% t CI [{self.ci_t[0]:.6g}, {self.ci_t[1]:.6g}], "
            f"bootstrap [{self.ci_bootstrap[0]:.6g}, {self.ci_bootstrap[1]:.6g}]; "
            f"margin: none; MDE {self.mde:.3g} (power 0.8); test: {self.test}"
        )


@dataclass(frozen=True)
class RatioEstimate:
    task: str
    metric: str
    n_items: int
    numerator: str
    denominator: str
    ratio: float
    ci_bootstrap: tuple[float, float]
    alpha: float
    bootstrap: BootstrapSpec
    statistic: str = "mean"  # "mean" | "median": the ratio of which per-variant figure

    @property
    def test(self) -> str:
        return f"ratio of {self.statistic}s, paired item bootstrap percentile CI"

    def report(self) -> str:
        level = round(100 * (1 - self.alpha))
        return (
            f"{self.task}/{self.metric}: {self.statistic}({self.numerator})/"
            f"{self.statistic}({self.denominator}) = "
            f"{self.ratio:.4f}, {level}% CI [{self.ci_bootstrap[0]:.4f}, "
            f"{self.ci_bootstrap[1]:.4f}] (n={self.n_items} items, alpha={self.alpha}, "
            f"{self.bootstrap.replicates} replicates, seed {self.bootstrap.seed}); "
            f"margin: none; MDE: n/a; test: {self.test}"
        )


def compare_continuous(
    paired: PairedOutcomes, alpha: float = 0.05, bootstrap: BootstrapSpec | None = None
) -> PairedMeanDifference:
    check_alpha(alpha)
    bootstrap = bootstrap or BootstrapSpec()
    if paired.n_items < 2:
        raise StatsInputError(f"{paired.task}/{paired.metric}: need at least 2 items")
    d = paired.b - paired.a  # (rows,)
    se = clustered_se(d, paired.clusters) if paired.has_repeats else clt_se(d)
    delta = float(d.mean())
    q = stats.t.ppf(1.0 - alpha / 2.0, paired.n_items - 1)
    reps = replicate_means([paired.a, paired.b], paired.clusters, bootstrap)
    ci_boot = percentile_interval(reps[:, 1] - reps[:, 0], alpha)
    return PairedMeanDifference(
        task=paired.task, metric=paired.metric, n_items=paired.n_items,
        n_rows=paired.n_rows, mean_a=float(paired.a.mean()), mean_b=float(paired.b.mean()),
        delta=delta, se=se, ci_t=(delta - q * se, delta + q * se), ci_bootstrap=ci_boot,
        alpha=alpha, bootstrap=bootstrap, repeated=paired.has_repeats,
    )


def ratio_of_means(
    paired: PairedOutcomes,
    alpha: float = 0.05,
    bootstrap: BootstrapSpec | None = None,
    invert: bool = False,
) -> RatioEstimate:
    """mean(B)/mean(A), or mean(A)/mean(B) with ``invert`` (e.g. latency speed-up)."""
    check_alpha(alpha)
    bootstrap = bootstrap or BootstrapSpec()
    reps = replicate_means([paired.a, paired.b], paired.clusters, bootstrap)
    return _ratio(paired, alpha, bootstrap, invert, reps,
                  (float(paired.a.mean()), float(paired.b.mean())), "mean")


def ratio_of_medians(
    paired: PairedOutcomes,
    alpha: float = 0.05,
    bootstrap: BootstrapSpec | None = None,
    invert: bool = False,
) -> RatioEstimate:
    """median(B)/median(A), or median(A)/median(B) with ``invert`` (a latency speed-up)."""
    check_alpha(alpha)
    bootstrap = bootstrap or BootstrapSpec()
    reps = replicate_medians([paired.a, paired.b], paired.clusters, bootstrap)
    return _ratio(paired, alpha, bootstrap, invert, reps,
                  (float(np.median(paired.a)), float(np.median(paired.b))), "median")


def _ratio(paired: PairedOutcomes, alpha: float, bootstrap: BootstrapSpec, invert: bool,
           reps: np.ndarray, points: tuple[float, float], statistic: str) -> RatioEstimate:
    """B/A of a statistic (A/B with ``invert``) from its point values (A, B) and its
    bootstrap replicates (replicates, 2): the percentile CI of the replicate ratios."""
    num, den = (reps[:, 0], reps[:, 1]) if invert else (reps[:, 1], reps[:, 0])
    point_num, point_den = (points[0], points[1]) if invert else (points[1], points[0])
    if point_den == 0.0 or np.any(den == 0.0):
        raise StatsInputError(f"{paired.task}/{paired.metric}: ratio with a zero {statistic}")
    labels = (paired.label_a, paired.label_b) if invert else (paired.label_b, paired.label_a)
    return RatioEstimate(
        task=paired.task, metric=paired.metric, n_items=paired.n_items,
        numerator=labels[0], denominator=labels[1], ratio=point_num / point_den,
        ci_bootstrap=percentile_interval(num / den, alpha), alpha=alpha, bootstrap=bootstrap,
        statistic=statistic,
    )
