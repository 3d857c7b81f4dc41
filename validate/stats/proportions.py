"""One variant's accuracy with its uncertainty: CLT SE, clustered SE, normal and Wilson CIs.

Conventions (docs/evaluation.md §3.1):
- CLT SE = sample SD (n-1) / sqrt(n); for 0/1 scores this is lm-eval's ``mean_stderr``.
- With several rows per item (repeats), rows of one item are not independent; the
  clustered SE (by item) is the sandwich estimator
  SE_cl^2 = G/(G-1) * (1/N^2) * sum_g (sum_{i in g} (s_i - s_bar))^2,
  with the CR1 small-sample factor G/(G-1). With one row per item it equals the CLT SE
  exactly, so the two never disagree on unrepeated data. It is Miller's formula
  (SE_CLT^2 plus the within-cluster cross terms) up to that factor.
- The normal CI is mean -/+ z_{1-alpha/2} * SE (clustered SE when there are repeats).
- The Wilson CI is the score interval for a binomial proportion; it is only defined
  for 0/1 scores with one row per item (independent Bernoulli trials) and stays inside
  [0, 1] at accuracies near 0 or 1, where the normal CI does not (1 right of 100 gives
  normal [-0.95, 2.95] %, Wilson [0.18, 5.45] %).
- ``AccuracyEstimate.ci`` is the interval reports show: Wilson where it is defined;
  else (repeats) the normal CI, clipped to [0, 1] for 0/1 scores so that no report
  shows an accuracy below 0 % or above 100 % (``ci_method`` says which).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from validate.errors import StatsInputError
from validate.stats import distributions as stats  # scipy.stats' values, not its import cost
from validate.stats._checks import check_alpha, points


def clustered_se(values: np.ndarray, clusters: np.ndarray) -> float:
    """Cluster-robust SE of the mean of ``values`` (N,) grouped by ``clusters`` (N,)."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    _, codes = np.unique(clusters, return_inverse=True)
    groups = int(codes.max()) + 1
    if groups < 2:
        return float("nan")
    resid = values - values.mean()  # (N,)
    per_cluster = np.bincount(codes.reshape(-1), weights=resid, minlength=groups)  # (G,)
    var = groups / (groups - 1) * float(np.sum(per_cluster**2)) / n**2
    return math.sqrt(var)


def clt_se(values: np.ndarray) -> float:
    """sample SD (n-1) / sqrt(n); NaN for fewer than two values."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    if n < 2:
        return float("nan")
    return float(np.std(values, ddof=1)) / math.sqrt(n)


def wilson_interval(successes: float, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided Wilson score interval at level 1 - alpha."""
    check_alpha(alpha)
    if n <= 0:
        raise StatsInputError("Wilson interval needs n > 0")
    z = stats.norm.ppf(1.0 - alpha / 2.0)
    p = successes / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denom
    return (max(0.0, center - half), min(1.0, center + half))


@dataclass(frozen=True)
class AccuracyEstimate:
    """Mean score of one variant on one (task, metric), with its uncertainty."""

    label: str
    task: str
    metric: str
    n_items: int
    n_rows: int
    mean: float
    se_clt: float
    se_clustered: float | None  # None without repeats (it would equal se_clt)
    ci_normal: tuple[float, float]
    ci_wilson: tuple[float, float] | None  # None unless 0/1 scores, one row per item
    alpha: float
    binary: bool = False  # every score is 0 or 1 (an accuracy, bounded by [0, 1])

    @property
    def ci(self) -> tuple[float, float]:
        """The two-sided interval to show (module doc): Wilson, else normal (clipped to
        [0, 1] for 0/1 scores)."""
        if self.ci_wilson is not None:
            return self.ci_wilson
        lo, hi = self.ci_normal
        return (max(0.0, lo), min(1.0, hi)) if self.binary else (lo, hi)

    @property
    def ci_method(self) -> str:
        if self.ci_wilson is not None:
            return "Wilson score interval"
        kind = "clustered SE" if self.se_clustered is not None else "CLT SE"
        return f"normal, {kind}" + (", clipped to [0, 1]" if self.binary else "")

    @property
    def se(self) -> float:
        """The SE to use: clustered when there are repeats, else CLT."""
        return self.se_clustered if self.se_clustered is not None else self.se_clt

    @property
    def mde(self) -> float:
        """Two-sided shift of this mean detectable at 80 % power against a fixed
        reference (no second run): (z_{1-alpha/2} + z_{0.8}) * SE."""
        return float((stats.norm.ppf(1 - self.alpha / 2) + stats.norm.ppf(0.8)) * self.se)

    @property
    def test(self) -> str:
        kind = "clustered by item (CR1)" if self.se_clustered is not None else "CLT (n-1)"
        return f"normal approximation, SE {kind}" + (
            "; Wilson score interval" if self.ci_wilson is not None else ""
        )

    def report(self) -> str:
        lo, hi = self.ci_normal
        level = round(100 * (1 - self.alpha))
        parts = [
            f"{self.label} {self.task}/{self.metric}: {points(self.mean)} ± {points(self.se)} "
            f"(n={self.n_items} items, {self.n_rows} rows, alpha={self.alpha})",
            f"{level}% normal CI [{points(lo)}, {points(hi)}]",
        ]
        if self.ci_wilson is not None:
            parts.append(f"Wilson [{points(self.ci_wilson[0])}, {points(self.ci_wilson[1])}]")
        parts.append(f"margin: none; MDE vs a fixed reference {points(self.mde)} pts (power 0.8)")
        parts.append(f"test: {self.test}")
        return "; ".join(parts)


def estimate_accuracy(
    values, clusters=None, alpha: float = 0.05, label: str = "", task: str = "",
    metric: str = "",
) -> AccuracyEstimate:
    """Accuracy of one variant. ``clusters`` (one id per row) marks repeats of an item."""
    check_alpha(alpha)
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size == 0:
        raise StatsInputError(f"{label or 'variant'}: no outcomes to estimate accuracy from")
    clusters = np.arange(values.size) if clusters is None else np.asarray(clusters).reshape(-1)
    n_items = int(np.unique(clusters).size)
    repeated = n_items < values.size
    mean = float(values.mean())
    se_clt = clt_se(values)
    se_cl = clustered_se(values, clusters) if repeated else None
    se = se_cl if se_cl is not None else se_clt
    z = stats.norm.ppf(1.0 - alpha / 2.0)
    ci_normal = (mean - z * se, mean + z * se)
    binary = bool(np.all((values == 0.0) | (values == 1.0)))
    ci_wilson = None
    if binary and not repeated:
        ci_wilson = wilson_interval(float(values.sum()), values.size, alpha)
    return AccuracyEstimate(
        label=label, task=task, metric=metric, n_items=n_items, n_rows=int(values.size),
        mean=mean, se_clt=se_clt, se_clustered=se_cl, ci_normal=ci_normal,
        ci_wilson=ci_wilson, alpha=alpha, binary=binary,
    )
