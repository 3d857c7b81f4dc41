"""Tango's score test and interval for a paired difference of proportions.

This is the test the release gate runs on paired 0/1 outcomes with one row per item.

Notation. n items, b = A right / B wrong, c = A wrong / B right, and the difference
theta = p_B - p_A = p_c - p_b (B minus A; negative means the candidate B is worse).

Score statistic for H0: theta = theta0 (Tango 1998, Stat Med 17:891):

    Z(theta0) = (c - b - n * theta0) / sqrt(n * (2 * q + theta0 * (1 - theta0)))

where q is the maximum-likelihood estimate of p_b under the constraint
p_c - p_b = theta0. Maximising b ln q + c ln(q + theta0) + (n-b-c) ln(1 - 2q - theta0)
gives the quadratic 2n q^2 - (b + c - theta0 (2n + b - c)) q - b theta0 (1 - theta0) = 0,
whose non-negative root is used. The denominator is the multinomial variance of
c - b under that constrained fit; at theta0 = 0 it is b + c and Z reduces to
McNemar's z without continuity correction.

Why this test for the gate (and not exact McNemar or the Wald interval):
- exact McNemar is conservative when discordant pairs are few. In A/A simulations at
  n = 198 and 1 % discordance its one-sided size at alpha = 0.05 was about 0.001
  (mid-p: 0.006), far below nominal, so the gate would almost never flag a real
  regression on small tasks; at n = 1,319 exact was 0.024-0.049 and mid-p 0.044-0.057.
- the score statistic evaluates the variance *under the null value* theta0, so at the
  non-inferiority boundary (theta0 = -margin) it does not borrow the small observed
  discordance the way the Wald interval does; its size stayed at 0.026-0.056 in A/A
  and 0.039-0.050 at the boundary across n = 198-1,319, accuracy 0.6-0.95 and
  discordance 1-10 % (see tests/validate/test_calibration.py). The low end is n = 198
  at 1 % discordance (about 2 discordant items), where no test can do much better.
- it inverts to a confidence interval (the set of theta0 not rejected), so "lower bound
  above -margin" and "score p-value below alpha" are the same decision.

The FAIL claim (H0: theta >= theta0 rejected, the candidate shown worse than the
margin) uses the same statistic with a continuity correction of half a step of c - b
against the claim: c - b + 1/2 in the numerator of Z (``fail_p_less``; for
TOST's FAIL above +margin, c - b - 1/2, ``fail_p_greater``). At few discordant items the
distribution of c - b is skewed (b, the baseline-only items, is nearly Poisson), so
the score test's lower tail is heavy. Uncorrected, FAIL at the boundary (true theta =
-margin) had size up to 0.090 at alpha = 0.05 (n = 448, margin 0.5 pt, 1 %
discordance), above 0.06 in 40 of the 144 settings of tests/validate/test_boundary_size.py
(n 100-1,319, margin 0.5-5 pt, discordance 1.05 x margin to 20 %); corrected, at most
0.052 there, by exact enumeration. The PASS claim keeps the uncorrected statistic: its
upper tail is the light one (at most 0.056 on that grid; 0.061 in the corner where the
candidate is never better, D = margin exactly), and the same correction would cost it
about 3 points of power on average and up to 16 at small discordance.

Everything here is vectorised over numpy arrays of counts, so the calibration
simulation runs the exact code the gate runs.
"""

from __future__ import annotations

import numpy as np

from validate.stats import distributions as stats  # scipy.stats' values, not its import cost


def constrained_pb(b, c, n, theta0):
    """MLE of p_b given p_c - p_b = theta0 (see module doc); arrays broadcast.

    Also valid with expected proportions in place of counts (b, c as rates, n = 1),
    which is how the power formulas use it.
    """
    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    theta0 = np.asarray(theta0, dtype=np.float64)
    qa = 2.0 * n
    qb = -(b + c) + theta0 * (2.0 * n + b - c)
    qc = -b * theta0 * (1.0 - theta0)
    disc = np.maximum(qb * qb - 4.0 * qa * qc, 0.0)
    return (np.sqrt(disc) - qb) / (2.0 * qa)


FAIL_CONTINUITY = 0.5  # half a step of c - b, in the FAIL claim's disfavour (module doc)


def score_z(b, c, n, theta0, shift=0.0):
    """Tango's Z(theta0); 0 where the null variance vanishes (no information).
    ``shift`` is added to c - b (a continuity correction; 0 for the plain test)."""
    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    theta0 = np.asarray(theta0, dtype=np.float64)
    q = constrained_pb(b, c, n, theta0)
    var = n * (2.0 * q + theta0 * (1.0 - theta0))
    num = c - b - n * theta0 + shift
    safe = np.where(var > 0, var, 1.0)
    return np.where(var > 0, num / np.sqrt(safe), 0.0)


def p_greater(b, c, n, theta0):
    """One-sided p-value of H0: theta <= theta0 against theta > theta0 (upper tail)."""
    return stats.norm.sf(score_z(b, c, n, theta0))


def p_less(b, c, n, theta0):
    """One-sided p-value of H0: theta >= theta0 against theta < theta0 (lower tail)."""
    return stats.norm.cdf(score_z(b, c, n, theta0))


def fail_p_less(b, c, n, theta0):
    """FAIL p-value of H0: theta >= theta0, continuity-corrected (module doc)."""
    return stats.norm.cdf(score_z(b, c, n, theta0, FAIL_CONTINUITY))


def fail_p_greater(b, c, n, theta0):
    """FAIL p-value of H0: theta <= theta0 (TOST's FAIL above +margin), corrected."""
    return stats.norm.sf(score_z(b, c, n, theta0, -FAIL_CONTINUITY))


def _bisect(fun, lo, hi, iterations: int = 52):
    """Vectorised bisection for a decreasing ``fun`` with fun(lo) >= 0 >= fun(hi)."""
    lo = np.array(lo, dtype=np.float64)
    hi = np.array(hi, dtype=np.float64)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        positive = fun(mid) >= 0.0
        lo = np.where(positive, mid, lo)
        hi = np.where(positive, hi, mid)
    return 0.5 * (lo + hi)


def score_lower(b, c, n, alpha):
    """One-sided lower score bound of theta at level 1 - alpha: Z(lower) = z_{1-alpha}.

    Z is decreasing in theta0 on (-1, 1), so bisection between -1 and the estimate
    finds the root.
    """
    b, c, n = (np.asarray(x, dtype=np.float64) for x in (b, c, n))
    z = stats.norm.ppf(1.0 - np.asarray(alpha, dtype=np.float64))
    estimate = (c - b) / n
    start = np.full_like(estimate, -1.0 + 1e-12)
    return _bisect(lambda t: score_z(b, c, n, t) - z, start, estimate)


def score_upper(b, c, n, alpha, shift=0.0):
    """One-sided upper score bound at level 1 - alpha: Z(upper) = -z_{1-alpha}.
    With ``shift = FAIL_CONTINUITY`` it is the FAIL claim's bound (``fail_upper``)."""
    b, c, n = (np.asarray(x, dtype=np.float64) for x in (b, c, n))
    z = stats.norm.ppf(1.0 - np.asarray(alpha, dtype=np.float64))
    estimate = (c - b) / n
    stop = np.full_like(estimate, 1.0 - 1e-12)
    return _bisect(lambda t: score_z(b, c, n, t, shift) + z, estimate, stop)


def fail_upper(b, c, n, alpha):
    """Upper bound that agrees with ``fail_p_less``: below theta0 exactly when the
    corrected FAIL p-value at theta0 is below alpha."""
    return score_upper(b, c, n, alpha, FAIL_CONTINUITY)


def score_bounds(b, c, n, alpha):
    """(lower, upper) one-sided bounds, each at level 1 - alpha; together the two-sided
    1 - 2*alpha interval (the TOST interval)."""
    return score_lower(b, c, n, alpha), score_upper(b, c, n, alpha)
