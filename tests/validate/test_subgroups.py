"""Subgroup deltas and the A/B-vs-A/A discordance test, against independent references:
scipy's exact binomial test and statsmodels' McNemar, and direct arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar

from validate.stats.outcomes import PairedOutcomes
from validate.stats.subgroups import discordance_excess, subgroup_deltas


@pytest.mark.parametrize("seed", range(6))
def test_discordance_excess_is_the_one_sided_exact_mcnemar(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 300))
    ab = rng.random(n) < rng.uniform(0.0, 0.3)
    aa = rng.random(n) < rng.uniform(0.0, 0.1)
    got = discordance_excess(ab, aa)
    n10, n01 = int(np.sum(ab & ~aa)), int(np.sum(~ab & aa))
    assert (got.ab_only, got.aa_only) == (n10, n01)
    if n10 + n01:
        ref = binomtest(n10, n10 + n01, 0.5, alternative="greater").pvalue
        assert got.p == pytest.approx(ref, rel=1e-9)
        # and its two-sided twin is statsmodels' exact McNemar of the (X, Y) table
        table = [[int(np.sum(ab & aa)), n10], [n01, int(np.sum(~ab & ~aa))]]
        two = mcnemar(table, exact=True).pvalue
        low = binomtest(n10, n10 + n01, 0.5, alternative="less").pvalue
        assert min(1.0, 2 * min(got.p, low)) == pytest.approx(two, rel=1e-9)
    else:
        assert got.p == 1.0
    assert got.ab_rate == pytest.approx(ab.mean()) and got.aa_rate == pytest.approx(aa.mean())


def test_identical_discordance_is_not_an_excess_and_a_large_one_is():
    aa = np.zeros(100, dtype=bool)
    assert discordance_excess(aa, aa).p == 1.0
    ab = np.zeros(100, dtype=bool)
    ab[:12] = True
    assert discordance_excess(ab, aa).p == pytest.approx(0.5 ** 12)


def test_subgroup_deltas_split_the_rows_and_match_direct_arithmetic():
    a = np.array([1, 1, 1, 0, 1, 1, 0, 1, 1, 1], dtype=float)
    b = np.array([1, 0, 1, 1, 1, 0, 0, 1, 0, 1], dtype=float)
    labels = ["short"] * 4 + ["long"] * 6
    paired = PairedOutcomes.from_arrays(a, b)
    groups = {g.group: g for g in subgroup_deltas(paired, labels, "length",
                                                  order=("short", "long"))}
    assert list(groups) == ["short", "long"]
    s, long_ = groups["short"], groups["long"]
    assert (s.n_rows, s.a_only, s.b_only, s.delta) == (4, 1, 1, 0.0)
    assert (long_.n_rows, long_.a_only, long_.b_only) == (6, 2, 0)
    assert long_.delta == pytest.approx(-2 / 6)
    assert long_.ci[0] < long_.delta < long_.ci[1] and long_.ci_method == "score"
    with pytest.raises(ValueError):
        subgroup_deltas(paired, labels[:-1], "length")
