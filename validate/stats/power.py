"""Power, sample size and minimum detectable effects for paired 0/1 comparisons.

Two questions, two formulas:

1. Non-inferiority (what the gate tests). With per-item discordance rate D = p_b + p_c,
   true difference delta = p_c - p_b (B - A) and margin M, the gate's score test
   (``validate.stats.score_interval``) rejects H0: delta <= -M when
   (c - b + n M) / sqrt(n sigma0^2) >= z_{1-alpha}. Its normal-approximation power is

       power = Phi( ((delta + M) sqrt(n) - z_{1-alpha} sigma0) / sigma1 )

   with sigma1^2 = D - delta^2 (the true per-item variance of B - A) and
   sigma0^2 = 2 q0 - M (1 + M), q0 being the constrained p_b of the score test at
   theta0 = -M evaluated at the expected proportions. Solving for n gives

       n = ((z_{1-alpha} sigma0 + z_{power} sigma1) / (delta + M))^2.

   Using sigma0 (not sigma1) in the critical value matters when D is small: the
   one-variance shortcut overstated power by up to 10 points in simulation. With few
   discordant items (D n below ~30) the statistic is discrete and even this formula is
   off by up to ~5 points, so ``noninferiority_power_exact`` also sums the exact
   distribution of the paired table; ``plan`` reports both, and the calibration test
   (tests/validate/test_calibration.py) holds simulated PASS rates to the exact one.
   The sample size uses the normal formula (closed form, monotone in n).

2. Difference detection (docs/evaluation.md §3.1 and §3.7, Miller): the smallest |delta|
   a two-sided test at alpha finds with the given power,
   MDE = (z_{1-alpha/2} + z_{power}) sqrt(D / n), using Var(d) ~ D near delta = 0.
   At n = 1,319, D = 2 %: 2.80 * sqrt(0.02 / 1319) = 1.09 points.

The unpaired MDE (TensorRT-LLM's theta, two independent runs) is
(z_{1-alpha} + z_{power}) sqrt(2 p (1 - p) / n), kept for context in reports.
"""

from __future__ import annotations

import math

import numpy as np

from validate.errors import StatsInputError
from validate.stats import distributions as stats  # scipy.stats' values, not its import cost
from validate.stats._checks import check_alpha, check_power, check_rate
from validate.stats.score_interval import constrained_pb


def _cells(discordance: float, true_delta: float) -> tuple[float, float]:
    """(p_b, p_c) from the discordance rate and the true difference p_c - p_b."""
    p_b = (discordance - true_delta) / 2.0
    p_c = (discordance + true_delta) / 2.0
    if p_b < 0 or p_c < 0:
        raise StatsInputError(
            f"discordance {discordance} cannot hold a true difference of {true_delta}: "
            "|delta| must be <= discordance"
        )
    return p_b, p_c


def score_sigmas(discordance: float, margin: float, true_delta: float) -> tuple[float, float]:
    """(sigma0, sigma1) of the module doc: the score test's per-item SD under the null
    value -margin, and the true per-item SD of B - A."""
    p_b, p_c = _cells(discordance, true_delta)
    q0 = float(constrained_pb(p_b, p_c, 1.0, -margin))
    sigma0 = math.sqrt(max(2.0 * q0 - margin * (1.0 + margin), 0.0))
    sigma1 = math.sqrt(max(discordance - true_delta**2, 0.0))
    return sigma0, sigma1


def _check(discordance: float, margin: float, alpha: float) -> None:
    check_rate(discordance, "discordance")
    check_alpha(alpha)
    if not 0.0 < margin < 1.0:
        raise StatsInputError(f"margin must be a fraction in (0, 1), got {margin}")


def noninferiority_power(
    n: int, discordance: float, margin: float, alpha: float, true_delta: float = 0.0
) -> float:
    """Probability the gate PASSes (lower bound above -margin) at this n."""
    _check(discordance, margin, alpha)
    sigma0, sigma1 = score_sigmas(discordance, margin, true_delta)
    z = stats.norm.ppf(1.0 - alpha)
    shift = (true_delta + margin) * math.sqrt(n) - z * sigma0
    if sigma1 == 0.0:
        return 1.0 if shift > 0 else 0.0
    return float(stats.norm.cdf(shift / sigma1))


def noninferiority_sample_size(
    discordance: float, margin: float, alpha: float, power: float, true_delta: float = 0.0
) -> int | None:
    """Items needed for the gate to PASS with probability ``power``; None if never
    (true delta at or below -margin: a non-inferior verdict would be wrong)."""
    _check(discordance, margin, alpha)
    check_power(power)
    if true_delta + margin <= 0:
        return None
    sigma0, sigma1 = score_sigmas(discordance, margin, true_delta)
    z_a = stats.norm.ppf(1.0 - alpha)
    z_b = stats.norm.ppf(power)
    return max(1, math.ceil(((z_a * sigma0 + z_b * sigma1) / (true_delta + margin)) ** 2))


def noninferiority_mde(
    n: int, discordance: float, alpha: float, power: float, true_delta: float = 0.0
) -> float:
    """Smallest margin the gate certifies with probability ``power`` at this n."""
    check_power(power)
    check_rate(discordance, "discordance")
    check_alpha(alpha)

    def gap(margin: float) -> float:
        return noninferiority_power(n, discordance, margin, alpha, true_delta) - power

    lo = max(1e-9, -true_delta + 1e-9)
    hi = 1.0 - 1e-9
    if gap(hi) < 0:
        return float("inf")
    if gap(lo) >= 0:  # certified already at the smallest margin the true delta allows
        return float(max(0.0, -true_delta))
    from scipy import optimize  # the root finder only: scipy.optimize is not light

    return float(optimize.brentq(gap, lo, hi, xtol=1e-10))


def difference_mde(n: int, discordance: float, alpha: float, power: float) -> float:
    """Two-sided paired MDE, (z_{1-alpha/2} + z_power) sqrt(D / n) (docs/evaluation.md §3.7)."""
    check_alpha(alpha)
    check_power(power)
    check_rate(discordance, "discordance")
    factor = stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power)
    return float(factor * math.sqrt(discordance / n))


def unpaired_mde(n: int, accuracy: float, alpha: float, power: float) -> float:
    """One-sided unpaired MDE of two independent runs (TensorRT-LLM's theta)."""
    check_alpha(alpha)
    check_power(power)
    factor = stats.norm.ppf(1.0 - alpha) + stats.norm.ppf(power)
    return float(factor * math.sqrt(2.0 * accuracy * (1.0 - accuracy) / n))


def clustered_difference_mde(se: float, alpha: float, power: float) -> float:
    """Two-sided MDE from an observed SE of the difference (repeats, clustering)."""
    factor = stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power)
    return float(factor * se) if np.isfinite(se) else float("nan")


def decisive_sample_size(
    discordance: float, margin: float, alpha: float, power: float, true_delta: float
) -> int | None:
    """Items for the gate to reach *a* verdict (PASS or FAIL) with probability ``power``
    when the truth is ``true_delta``: the distance |true_delta + margin| replaces
    (true_delta + margin) in ``noninferiority_sample_size``. None when the delta sits
    on the margin (no n decides) or the rates are degenerate."""
    check_alpha(alpha)
    check_power(power)
    distance = abs(true_delta + margin)
    if distance < 1e-12:
        return None
    discordance = max(discordance, abs(true_delta))
    try:
        sigma0, sigma1 = score_sigmas(discordance, margin, true_delta)
    except StatsInputError:
        return None
    z_a = stats.norm.ppf(1.0 - alpha)
    z_b = stats.norm.ppf(power)
    return max(1, math.ceil(((z_a * sigma0 + z_b * sigma1) / distance) ** 2))


def noninferiority_power_exact(
    n: int, discordance: float, margin: float, alpha: float, true_delta: float = 0.0,
    edge: bool = True,
) -> float:
    """Exact PASS probability of the gate's score test at this n, by enumeration.

    The number of discordant items is m ~ Binomial(n, D); given m, the items B got right
    are c ~ Binomial(m, p_c / D). Summing P(m) P(c | m) over the (b, c) tables whose
    score statistic clears z_{1-alpha} gives the power without a normal approximation,
    which matters when few items are discordant (D n below ~30): there the normal
    formula is off by several points because the test statistic is discrete.
    ``edge``: the gate's exact never-better edge test joins the score test (one row per
    item; the clustered path, at an effective n, runs the score test alone).
    """
    from validate.stats.score_interval import p_greater, pass_p_greater

    _check(discordance, margin, alpha)
    b, c, weight = paired_table_distribution(n, discordance, true_delta)
    passes = (pass_p_greater if edge else p_greater)(b, c, n, -margin) <= alpha
    return float(np.sum(np.where(passes, weight, 0.0)))


def paired_table_distribution(n: int, discordance: float, true_delta: float
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (b, c) table of n fresh items with its probability, flattened: m ~ Bin(n, D)
    discordant items, c ~ Bin(m, p_c / D) of them in B's favour; tables outside m's
    1e-12 quantiles (under 1e-11 of the mass) are left out."""
    _, p_c = _cells(discordance, true_delta)
    if discordance == 0.0:
        return np.zeros(1), np.zeros(1), np.ones(1)
    lo, hi = (int(x) for x in stats.binom.ppf([1e-12, 1.0 - 1e-12], n, discordance))
    m = np.arange(max(lo - 1, 0), min(hi + 1, n) + 1)  # (M,)
    c = np.arange(0, int(m.max()) + 1)  # (C,)
    mm, cc = np.meshgrid(m, c, indexing="ij")  # (M, C)
    valid = cc <= mm
    weight = stats.binom.pmf(mm[valid], n, discordance) * stats.binom.pmf(
        cc[valid], mm[valid], p_c / discordance)
    return (mm - cc)[valid].astype(np.float64), cc[valid].astype(np.float64), weight
