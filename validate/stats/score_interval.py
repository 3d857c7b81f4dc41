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
upper tail is the light one (at most 0.056 on that grid), and the same correction would
cost it about 3 points of power on average and up to 16 at small discordance.

The PASS claim has one corner of its own: the edge of the null where the candidate is
never better (D = margin: every discordant item goes the baseline's way, c is always 0).
There the table has one free count, b ~ Binomial(n, M), and the score test is the
normal approximation of that binomial's lower tail, which the lattice of b makes
liberal: PASS had size up to 0.069 over n (0.061 at n = 448, margin 1 pt), e.g. no
discordant item at all PASSed from n M >= z^2 (1 - M) = 2.7 where P(b = 0) = (1 - M)^n
is still 0.067. So PASS also needs the exact test at that edge (``edge_p_greater``:
P(Binomial(n, M) <= b - c), every discordant item counted against the candidate), and
its p-value is the larger of the two (``pass_p_greater``). By exact enumeration at
every third n from 40 to 1,400 (margins 0.5-5 pt, discordance 1-2 x margin) its size is
at most 0.050 at the edge and 0.054 anywhere (the score test's own, at D = 2 M); it
costs 0.04 points of power on average at true delta 0 (at most 2.5), where the
half-step correction would cost 3.8. TOST's other PASS side mirrors it (``pass_p_less``, the edge where the
candidate is never worse).

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


def edge_p_greater(b, c, n, theta0):
    """Exact p-value of H0 theta <= theta0 at the null's edge D = |theta0|, where every
    discordant item goes one way (module doc): for theta0 < 0, P(Binomial(n, -theta0) <=
    b - c); for theta0 > 0, P(Binomial(n, theta0) >= c - b); at 0 (no discordance
    possible) 1 unless c > b."""
    b, c, n, theta0 = (np.asarray(x, dtype=np.float64) for x in (b, c, n, theta0))
    below = stats.binom.cdf(b - c, n, np.clip(-theta0, 0.0, 1.0))
    above = stats.binom.sf(c - b - 1.0, n, np.clip(theta0, 0.0, 1.0))
    return np.where(theta0 < 0, below, np.where(theta0 > 0, above, np.where(c > b, 0.0, 1.0)))


def edge_p_less(b, c, n, theta0):
    """The mirror of ``edge_p_greater``: exact p of H0 theta >= theta0 at its edge."""
    return edge_p_greater(c, b, n, -np.asarray(theta0, dtype=np.float64))


def pass_p_greater(b, c, n, theta0):
    """The PASS claim's p-value of H0 theta <= theta0: the larger of the score test's and
    the exact edge test's (module doc)."""
    return np.maximum(p_greater(b, c, n, theta0), edge_p_greater(b, c, n, theta0))


def pass_p_less(b, c, n, theta0):
    """TOST's other PASS side, H0 theta >= theta0: the mirror of ``pass_p_greater``."""
    return np.maximum(p_less(b, c, n, theta0), edge_p_less(b, c, n, theta0))


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


def pass_lower(b, c, n, alpha):
    """Lower bound that agrees with ``pass_p_greater``: above theta0 exactly when both
    the score and the edge p-value at theta0 are below alpha (the smaller of the two
    tests' bounds; the edge p-value rises with theta0, so bisection finds its root)."""
    b, c, n = (np.asarray(x, dtype=np.float64) for x in (b, c, n))
    alpha = np.asarray(alpha, dtype=np.float64)
    edge = _bisect(lambda t: alpha - edge_p_greater(b, c, n, t),
                   np.full(np.broadcast(b, c, n).shape, -1.0), np.ones(np.broadcast(b, c, n).shape))
    return np.minimum(score_lower(b, c, n, alpha), edge)


def pass_upper(b, c, n, alpha):
    """Upper bound that agrees with ``pass_p_less`` (TOST's PASS): the mirror of
    ``pass_lower``."""
    return -pass_lower(c, b, n, alpha)


def score_bounds(b, c, n, alpha):
    """(lower, upper) one-sided bounds, each at level 1 - alpha; together the two-sided
    1 - 2*alpha interval (the TOST interval)."""
    return score_lower(b, c, n, alpha), score_upper(b, c, n, alpha)
