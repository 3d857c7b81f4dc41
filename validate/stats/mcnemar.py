"""Exact McNemar test and its mid-p version, from the discordant counts.

b = items A got right and B got wrong, c = items A got wrong and B got right. Under
H0 (no difference) each discordant item is a fair coin: b ~ Binomial(b + c, 1/2).

- Exact two-sided p = min(1, 2 * P[X <= min(b, c)]) (what statsmodels' ``mcnemar``
  with ``exact=True`` and scipy's ``binomtest(b, b+c, 0.5)`` give).
- Mid-p = exact p minus the probability of the observed table itself
  (two-sided: 2 * (P[X <= min(b,c)] - P[X = min(b,c)] / 2), capped at 1). The exact
  test is conservative when b + c is small (its real size can be far below alpha, see
  ``validate.gate``); mid-p is closer to nominal on average. We report both; the gate
  itself uses the score test in ``validate.stats.score_interval``.

One-sided versions give the "B is worse" direction (large b) on its own.
"""

from __future__ import annotations

import numpy as np

from validate.stats import distributions as stats  # scipy.stats' values, not its import cost


def exact_mcnemar_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value; 1.0 when there are no discordant items."""
    m = b + c
    if m == 0:
        return 1.0
    return float(min(1.0, 2.0 * stats.binom.cdf(min(b, c), m, 0.5)))


def mid_p_mcnemar(b: int, c: int) -> float:
    """Two-sided mid-p McNemar p-value."""
    m = b + c
    if m == 0:
        return 1.0
    k = min(b, c)
    one_side = stats.binom.cdf(k, m, 0.5) - 0.5 * stats.binom.pmf(k, m, 0.5)
    return float(min(1.0, 2.0 * one_side))


def exact_worse_p(b, c):
    """One-sided exact p for "B is worse than A": P[X >= b], X ~ Binomial(b + c, 1/2).

    Vectorised over arrays of counts; 1.0 where b + c == 0.
    """
    b = np.asarray(b)
    m = b + np.asarray(c)
    p = stats.binom.sf(b - 1, m, 0.5)
    return np.where(m > 0, p, 1.0)


def mid_p_worse(b, c):
    """One-sided mid-p for "B is worse": P[X > b] + P[X = b] / 2. Vectorised."""
    b = np.asarray(b)
    m = b + np.asarray(c)
    p = stats.binom.sf(b, m, 0.5) + 0.5 * stats.binom.pmf(b, m, 0.5)
    return np.where(m > 0, p, 1.0)
