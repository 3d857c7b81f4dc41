"""The one-sided tests the gate runs on a paired (task, metric), as p-value functions.

delta = acc(B) - acc(A), B the candidate. For a null value theta0 the gate needs
- ``p_greater(theta0)``: p-value of H0 delta <= theta0 (small when delta is clearly above);
- ``p_less(theta0)``: p-value of H0 delta >= theta0 (small when delta is clearly below);
- ``lower(alpha)`` / ``upper(alpha)``: the one-sided confidence bounds at level
  1 - alpha, which agree with the p-values (lower > theta0 exactly when
  p_greater(theta0) < alpha);
- ``fail_p_less`` / ``fail_p_greater`` / ``fail_upper``: the same for the FAIL claim,
  which the score test runs with a continuity correction (its lower tail is heavy at
  few discordant items: ``validate.stats.score_interval``).

Which test:
- one 0/1 row per item (greedy runs, the usual case): Tango's score test
  (``validate.stats.score_interval``). Exact McNemar is conservative with few
  discordant pairs (A/A size ~0.001 at n = 198, D = 1 %), mid-p still undershoots
  (~0.006); the score test held its size at 0.026-0.056 in A/A and 0.039-0.050 at the
  non-inferiority boundary across the calibration grid (tests/validate/test_calibration.py). It is McNemar's z at theta0 = 0.
- several rows per item (repeats / sampling): the same score test on the row counts,
  its variance multiplied by the design effect observed in the data (the clustered
  SE of the mean row difference over the SE the rows would have if independent,
  squared: a Rao-Scott adjustment), because rows of one item are not independent and
  the plain 2x2-table tests assume they are. z = Z(theta0) / sqrt(deff), so bounds
  are the score bounds at the level whose z is z_{1-alpha} sqrt(deff). It replaced a
  Wald z with the clustered SE, which borrowed the observed discordance as the score
  test avoids: at the boundary that Wald PASSed 0.077 of simulated runs (198 items x
  4 repeats, discordance 6 %, within-item correlation 0.8, margin 4 points; this test
  0.051). The design effect is estimated from the discordant rows alone, and with few
  of them it is mostly noise: a table with none, or one, says nothing about it, yet
  was given 1, the most favourable value, and with few discordant items the test was
  liberal (PASS at the boundary 0.080 at 100 items x 4, discordance 3 %, correlation
  0.9, margin 2 points; 0.23 at 50 items and correlation 1). So the estimate carries a
  prior worth one discordant row at the least favourable value, r (rows per item: the
  repeats of an item agree): deff = (S + r) / (K + 1), with S the clustered sum of
  squares of d (CR1, (rows x clustered SE)^2) and K the independent one ((rows x row
  SE)^2, about the discordant rows). With no discordance deff = r, the task judged as
  its items (identical repeated runs: p(worse) = 0.5, where the old Wald z had been
  -inf, a WARN); many discordant rows outweigh the prior. PASS and FAIL at the boundary
  then stayed within 0.054 from 50 to 448 items, correlation 0 to 1
  (tests/validate/test_boundary_size.py). ``se`` (reports) is the clustered SE floored
  at one discordant row's (1 / rows, ``se_floor``). The FAIL claim's continuity
  correction is half a step of c - b in effective items, 0.5 x deff rows: half a row
  was an eighth of an item when four repeats agree, and FAIL at the boundary reached
  0.062 there (198 and 448 items x 4, discordance 3 %, correlation 1); with the scaled
  step, at most 0.054, and identical repeats are tested as their items are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from validate.stats import distributions as stats  # scipy.stats' values, not its import cost
from validate.stats.outcomes import PairedOutcomes
from validate.stats.paired import discordance_table
from validate.stats.proportions import clt_se, clustered_se
from validate.stats.score_interval import (
    FAIL_CONTINUITY,
    edge_p_greater,
    edge_p_less,
    fail_upper,
    pass_lower,
    pass_upper,
    score_lower,
    score_upper,
    score_z,
)


@dataclass(frozen=True)
class ScoreEvidence:
    """Counts of a paired 0/1 comparison (b, c, n rows), tested with Tango's score
    test; ``design_effect`` scales its variance (1: one row per item)."""

    b: int  # A right, B wrong
    c: int  # A wrong, B right
    n: int
    design_effect: float = 1.0

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

    @property
    def n_effective(self) -> float:
        """The unrepeated items this comparison is worth: rows / design effect."""
        return self.n / self.design_effect

    def _z(self, theta0: float, shift: float = 0.0) -> float:
        z = float(score_z(self.b, self.c, self.n, theta0, shift))
        return z if self.design_effect == 1.0 else z / math.sqrt(self.design_effect)

    def _level(self, alpha: float) -> float:
        """The plain score test's level whose critical z is z_{1-alpha} sqrt(deff)."""
        if self.design_effect == 1.0:
            return alpha
        return float(stats.norm.sf(stats.norm.ppf(1.0 - alpha) * math.sqrt(self.design_effect)))

    def p_greater(self, theta0: float) -> float:
        return float(stats.norm.sf(self._z(theta0)))

    def p_less(self, theta0: float) -> float:
        return float(stats.norm.cdf(self._z(theta0)))

    def lower(self, alpha: float) -> float:
        return float(score_lower(self.b, self.c, self.n, self._level(alpha)))

    def upper(self, alpha: float) -> float:
        return float(score_upper(self.b, self.c, self.n, self._level(alpha)))

    def pass_p_greater(self, theta0: float) -> float:
        """The PASS claim's p: the score test's, and with one row per item also the exact
        test's at the never-better edge (the larger; ``validate.stats.score_interval``)."""
        p = self.p_greater(theta0)
        return max(p, float(edge_p_greater(self.b, self.c, self.n, theta0))) if self._edge else p

    def pass_p_less(self, theta0: float) -> float:
        """TOST's other PASS side (H0 delta >= theta0), the mirror of ``pass_p_greater``."""
        p = self.p_less(theta0)
        return max(p, float(edge_p_less(self.b, self.c, self.n, theta0))) if self._edge else p

    def pass_lower(self, alpha: float) -> float:
        if not self._edge:
            return self.lower(alpha)
        return float(pass_lower(self.b, self.c, self.n, alpha))

    def pass_upper(self, alpha: float) -> float:
        if not self._edge:
            return self.upper(alpha)
        return float(pass_upper(self.b, self.c, self.n, alpha))

    @property
    def _edge(self) -> bool:
        """The edge test is a binomial of items: one row per item only."""
        return self.design_effect == 1.0

    @property
    def _fail_shift(self) -> float:
        """The FAIL claim's continuity correction in rows: half a step of c - b in
        effective items, each worth ``design_effect`` rows (module doc)."""
        return FAIL_CONTINUITY * self.design_effect

    def fail_p_less(self, theta0: float) -> float:
        return float(stats.norm.cdf(self._z(theta0, self._fail_shift)))

    def fail_p_greater(self, theta0: float) -> float:
        return float(stats.norm.sf(self._z(theta0, -self._fail_shift)))

    def fail_upper(self, alpha: float) -> float:
        if self.design_effect == 1.0:
            return float(fail_upper(self.b, self.c, self.n, alpha))
        return float(score_upper(self.b, self.c, self.n, self._level(alpha), self._fail_shift))


@dataclass(frozen=True)
class ClusteredEvidence(ScoreEvidence):
    """A repeated comparison: row counts, the observed design effect and the items
    (module doc). ``se`` is the floored clustered SE of the mean row difference
    (reports), ``se_raw`` the estimate."""

    items: int = 0
    se: float = float("nan")
    se_raw: float | None = None

    name = ("Tango score test on the rows, variance times the design effect of the SE "
            "clustered by item (repeated rows)")

    @property
    def n_items(self) -> int:
        return self.items

    @property
    def n_rows(self) -> int:
        return self.n

    @property
    def _edge(self) -> bool:
        return False  # rows of one item are no binomial sample: the score test alone


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
    raw = clustered_se(d, paired.clusters)
    return ClusteredEvidence(
        b=table.a_only, c=table.b_only, n=paired.n_rows,
        design_effect=design_effect_estimate(d, raw, paired.n_items),
        items=paired.n_items, se=max(raw, se_floor(paired.n_rows)), se_raw=raw,
    )


def design_effect_estimate(d, clustered: float, items: int) -> float:
    """(S + r) / (K + 1): the observed design effect with a prior of one discordant row
    at r, rows per item (module doc); r when the clustered SE is undefined (one item)."""
    rows = d.shape[0]
    r = rows / items
    if not math.isfinite(clustered):
        return r
    independent = clt_se(d)
    k = (rows * independent) ** 2 if math.isfinite(independent) else 0.0
    return ((rows * clustered) ** 2 + r) / (k + 1.0)
