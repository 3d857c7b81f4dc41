"""Exact probabilities of the gate's outcomes on one paired 0/1 task, one row per item.

The gate (``validate.gate.verdict``) runs Tango's score test: with z = z_{1-alpha},
PASS when Z(-M) >= z and the exact never-better edge test agrees (``pass_p_greater``
below alpha), FAIL when it does not pass and
the continuity-corrected Z_fail(-M) <= -z (``fail_p_less``), and the WARN test
"significantly worse" is Z(0) <= -z; with ``equivalence`` (TOST) PASS also needs
``pass_p_less``(+M) <= alpha and FAIL is declared when 2 min(Phi(Z_fail(-M)), 1 - Phi(Z_fail(+M))) <= alpha. Every one of these depends on the table
only through (b, c, n), so its probability is a sum over (b, c) tables:

- ``fresh_outcome_probabilities``: n *fresh* items, each discordant with probability
  D and, given discordance, B-right with probability p_c / D -- the binomial model of
  ``validate.stats.power.noninferiority_power_exact``, which is the number ``v41val
  plan`` prints as "power ... exact". PASS here equals that function; FAIL and "worse"
  are the same enumeration with the other rejection regions.
- ``pool_outcome_probabilities``: n items drawn *without replacement* from a finite
  pool of N items with B b-items and C c-items: (b, c) is multivariate hypergeometric.
  This is the exact expectation of the subsample detection rate (what a Monte Carlo
  over draws estimates). It is narrower than the fresh-item model by the finite
  population factor (N - n) / (N - 1): at n = N every draw is the whole pool and the
  rate is 0 or 1, while fresh items would still vary.

A family of one claim: Holm and Bonferroni leave a single p-value unchanged, so these
hold for every correction when the row is gated alone (the calibration gates each row
as its own one-task family).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from validate.errors import StatsInputError
from validate.stats.score_interval import (
    fail_p_greater,
    fail_p_less,
    pass_p_greater,
    pass_p_less,
    score_z,
)


@dataclass(frozen=True)
class OutcomeProbabilities:
    """P(PASS or WARN), P(FAIL), P(significantly worse at alpha)."""

    passed: float
    fail: float
    worse: float

    def to_dict(self) -> dict:
        return {"pass": self.passed, "fail": self.fail, "worse": self.worse}


def _regions(b: np.ndarray, c: np.ndarray, n: int, margin: float, alpha: float,
             equivalence: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boolean (pass, fail, worse) per (b, c) table, as the gate decides them."""
    z = stats.norm.ppf(1.0 - alpha)
    passed = pass_p_greater(b, c, n, -margin) <= alpha
    p_fail = fail_p_less(b, c, n, -margin)
    if equivalence:
        passed = passed & (pass_p_less(b, c, n, margin) <= alpha)
        p_fail = np.minimum(1.0, 2.0 * np.minimum(p_fail, fail_p_greater(b, c, n, margin)))
    fail = ~passed & (p_fail <= alpha)
    worse = score_z(b, c, n, 0.0) <= -z
    return passed, fail, worse


def _summed(weight: np.ndarray, regions) -> OutcomeProbabilities:
    passed, fail, worse = (float(np.sum(np.where(r, weight, 0.0))) for r in regions)
    return OutcomeProbabilities(passed, fail, worse)


def _check(n: int, margin: float, alpha: float) -> None:
    if n < 1:
        raise StatsInputError(f"n must be >= 1, got {n}")
    if not 0.0 < margin < 1.0:
        raise StatsInputError(f"margin must be a fraction in (0, 1), got {margin}")
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"alpha must be in (0, 1), got {alpha}")


def fresh_outcome_probabilities(n: int, discordance: float, true_delta: float, margin: float,
                                alpha: float, equivalence: bool = False) -> OutcomeProbabilities:
    """Outcome probabilities at n fresh items (binomial model; see module doc)."""
    _check(n, margin, alpha)
    p_b = (discordance - true_delta) / 2.0
    p_c = (discordance + true_delta) / 2.0
    if p_b < -1e-12 or p_c < -1e-12 or discordance > 1.0:
        raise StatsInputError(f"discordance {discordance} cannot hold a difference of "
                              f"{true_delta}")
    if discordance <= 0.0:
        b = c = np.zeros(1)
        return _summed(np.ones(1), _regions(b, c, n, margin, alpha, equivalence))
    # m outside its 1e-13 quantiles carries under 1e-12 of the mass: leave it out
    lo, hi = (int(x) for x in stats.binom.ppf([1e-13, 1.0 - 1e-13], n, discordance))
    m = np.arange(max(lo - 1, 0), min(hi + 1, n) + 1)
    c_ = np.arange(0, int(m.max()) + 1)
    mm, cc = np.meshgrid(m, c_, indexing="ij")  # (M, C)
    share = min(max(p_c / discordance, 0.0), 1.0)
    weight = stats.binom.pmf(mm, n, discordance) * stats.binom.pmf(cc, mm, share)
    weight = np.where(cc <= mm, weight, 0.0)
    return _summed(weight, _regions(mm - cc, cc, n, margin, alpha, equivalence))


def pool_outcome_probabilities(n: int, pool_n: int, pool_b: int, pool_c: int, margin: float,
                               alpha: float, equivalence: bool = False) -> OutcomeProbabilities:
    """Outcome probabilities of a uniform n-subset of a pool of ``pool_n`` items holding
    ``pool_b`` A-only-right and ``pool_c`` B-only-right items (hypergeometric)."""
    _check(n, margin, alpha)
    rest = pool_n - pool_b - pool_c
    if n > pool_n or min(pool_b, pool_c, rest) < 0:
        raise StatsInputError(f"cannot draw {n} of {pool_n} items with b={pool_b}, c={pool_c}")
    b = np.arange(0, min(pool_b, n) + 1)
    c = np.arange(0, min(pool_c, n) + 1)
    bb, cc = np.meshgrid(b, c, indexing="ij")
    others = n - bb - cc
    ok = (others >= 0) & (others <= rest)
    log_w = (_log_comb(pool_b, bb) + _log_comb(pool_c, cc)
             + _log_comb(rest, np.clip(others, 0, rest)) - _log_comb(pool_n, n))
    weight = np.where(ok, np.exp(log_w), 0.0)
    return _summed(weight, _regions(bb, cc, n, margin, alpha, equivalence))


def _log_comb(total, k):
    total = np.asarray(total, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    return special.gammaln(total + 1) - special.gammaln(k + 1) - special.gammaln(total - k + 1)


@dataclass(frozen=True)
class PlanPrediction:
    """What ``v41val plan --margin M --discordance D --delta d --n n`` prints as the
    PASS power at n (exact and normal approximation), or None where plan refuses the
    inputs."""

    power_exact: float | None
    power_normal: float | None

    def to_dict(self) -> dict:
        return {"power_exact": self.power_exact, "power_normal": self.power_normal}


def plan_prediction(n: int, discordance: float, true_delta: float, margin: float,
                    alpha: float) -> PlanPrediction:
    """The PASS power ``plan_noninferiority`` reports at n for the observed delta and
    discordance: the same two functions it calls (``noninferiority_power_exact``, printed
    by ``v41val plan`` as "power ... exact", and ``noninferiority_power``, the normal
    approximation). Called directly, not through ``plan_noninferiority``, because that
    also solves for the MDE, which fails when the candidate is never worse (D = delta);
    the power does not need it."""
    from validate.stats.power import noninferiority_power, noninferiority_power_exact

    try:
        return PlanPrediction(
            noninferiority_power_exact(n, discordance, margin, alpha, true_delta),
            noninferiority_power(n, discordance, margin, alpha, true_delta))
    except StatsInputError:
        return PlanPrediction(None, None)
