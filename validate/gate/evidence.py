"""The one-sided tests the gate runs on a paired (task, metric), as p-value functions.

delta = acc(B) - acc(A), B the candidate. For a null value theta0 the gate needs
- ``p_greater(theta0)``: p-value of H0 delta <= theta0 (small when delta is clearly above);
- ``p_less(theta0)``: p-value of H0 delta >= theta0 (small when delta is clearly below);
- ``lower(alpha)`` / ``upper(alpha)``: the one-sided confidence bounds at level
  1 - alpha, which agree with the p-values (lower > theta0 exactly when
  p_greater(theta0) < alpha);
- ``fail_p_less`` / ``fail_p_greater`` / ``fail_upper``: the same for the FAIL claim,
  which the score test runs with a continuity correction (its lower tail is heavy at
  few discordant items: ``validate.stats.score_interval``); the clustered Wald z is
  continuous and uses one test for both claims.

Which test:
- one 0/1 row per item (greedy runs, the usual case): Tango's score test
  (``validate.stats.score_interval``). Exact McNemar is conservative with few
  discordant pairs (A/A size ~0.001 at n = 198, D = 1 %), mid-p still undershoots
  (~0.006); the score test held its size at 0.026-0.056 in A/A and 0.039-0.050 at the
  non-inferiority boundary across the calibration grid (tests/validate/test_calibration.py). It is McNemar's z at theta0 = 0.
- several rows per item (repeats / sampling): a Wald z with the item-clustered SE of
  the per-row differences, because rows of one item are not independent and the
  2x2-table tests assume they are. Its SE is floored at the SE one discordant row
  would give (1 / rows, ``se_floor``), the least the data can resolve, as the
  unrepeated path floors the discordance: identical repeated runs (SE 0) otherwise
  gave z = -inf and "significantly worse" with p = 0, where the score test gives 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass

from validate.stats import distributions as stats  # scipy.stats' values, not its import cost
from validate.stats.outcomes import PairedOutcomes
from validate.stats.paired import discordance_table
from validate.stats.proportions import clustered_se
from validate.stats.score_interval import (
    fail_p_greater,
    fail_p_less,
    fail_upper,
    p_greater,
    p_less,
    score_lower,
    score_upper,
)


@dataclass(frozen=True)
class ScoreEvidence:
    """Counts of a paired 0/1 comparison with one row per item."""

    b: int  # A right, B wrong
    c: int  # A wrong, B right
    n: int

    name = "Tango score test (paired proportions, one row per item)"

    @property
    def delta(self) -> float:
        return (self.c - self.b) / self.n

    @property
    def discordance(self) -> float:
        return (self.b + self.c) / self.n

    @property
    def n_items(self) -> int:
        return self.n

    def p_greater(self, theta0: float) -> float:
        return float(p_greater(self.b, self.c, self.n, theta0))

    def p_less(self, theta0: float) -> float:
        return float(p_less(self.b, self.c, self.n, theta0))

    def lower(self, alpha: float) -> float:
        return float(score_lower(self.b, self.c, self.n, alpha))

    def upper(self, alpha: float) -> float:
        return float(score_upper(self.b, self.c, self.n, alpha))

    def fail_p_less(self, theta0: float) -> float:
        return float(fail_p_less(self.b, self.c, self.n, theta0))

    def fail_p_greater(self, theta0: float) -> float:
        return float(fail_p_greater(self.b, self.c, self.n, theta0))

    def fail_upper(self, alpha: float) -> float:
        return float(fail_upper(self.b, self.c, self.n, alpha))


@dataclass(frozen=True)
class ClusteredEvidence:
    """Mean per-row difference with its item-clustered SE (repeated rows); ``se`` is
    the floored SE the tests use, ``se_raw`` the estimate (module doc)."""

    delta: float
    se: float
    discordance: float
    n_items: int
    se_raw: float | None = None

    name = "Wald z, SE clustered by item (repeated rows)"

    def _z(self, theta0: float) -> float:
        return (self.delta - theta0) / self.se

    def p_greater(self, theta0: float) -> float:
        return float(stats.norm.sf(self._z(theta0)))

    def p_less(self, theta0: float) -> float:
        return float(stats.norm.cdf(self._z(theta0)))

    def lower(self, alpha: float) -> float:
        return self.delta - stats.norm.ppf(1.0 - alpha) * self.se

    def upper(self, alpha: float) -> float:
        return self.delta + stats.norm.ppf(1.0 - alpha) * self.se

    fail_p_less = p_less
    fail_p_greater = p_greater
    fail_upper = upper


def se_floor(n_rows: int) -> float:
    """The clustered SE of one discordant row among ``n_rows`` (about 1 / rows): the
    least a 0/1 comparison can resolve (module doc)."""
    return 1.0 / n_rows


def evidence_for(paired: PairedOutcomes) -> ScoreEvidence | ClusteredEvidence:
    """Pick the test for this table (see module doc); outcomes must be 0/1."""
    table = discordance_table(paired.a, paired.b)
    if not paired.has_repeats:
        return ScoreEvidence(b=table.a_only, c=table.b_only, n=paired.n_rows)
    d = paired.b - paired.a  # (rows,)
    se = clustered_se(d, paired.clusters)
    return ClusteredEvidence(
        delta=float(d.mean()),
        se=max(se, se_floor(paired.n_rows)),
        discordance=table.discordant / table.n,
        n_items=paired.n_items,
        se_raw=se,
    )
