"""Paired comparisons: 0/1 (McNemar, paired SE, bootstrap, correlation) and continuous."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from validate.errors import PairingError, StatsInputError
from validate.stats import (
    BootstrapSpec,
    ItemOutcomes,
    PairedOutcomes,
    compare_binary,
    compare_continuous,
    pair_outcomes,
    ratio_of_means,
)


def correlated_pair(n, acc, disc, delta, rng):
    p_b, p_c = (disc - delta) / 2, (disc + delta) / 2
    cells = rng.choice(4, size=n, p=[acc - p_b, p_b, p_c, 1 - acc - p_c])
    a = np.isin(cells, [0, 1]).astype(float)
    b = np.isin(cells, [0, 2]).astype(float)
    return a, b


@pytest.mark.parametrize("trial", range(8))
def test_compare_binary_against_hand_formulas(trial, rng):
    n = int(rng.integers(100, 1500))
    a, b = correlated_pair(n, 0.8, 0.08, float(rng.uniform(-0.03, 0.03)), rng)
    r = compare_binary(PairedOutcomes.from_arrays(a, b), bootstrap=BootstrapSpec(2000, 1))
    bb = int(np.sum((a == 1) & (b == 0)))
    cc = int(np.sum((a == 0) & (b == 1)))
    both = int(np.sum((a == 1) & (b == 1)))
    none = n - bb - cc - both
    assert (r.table.a_only, r.table.b_only, r.table.both_right) == (bb, cc, both)
    assert r.delta == pytest.approx((cc - bb) / n, abs=1e-15)
    var_d = ((bb + cc) - (cc - bb) ** 2 / n) / (n - 1)
    assert r.se_paired == pytest.approx(math.sqrt(var_d / n), rel=1e-12)
    z = stats.norm.ppf(0.975)
    assert r.ci_normal[0] == pytest.approx(r.delta - z * r.se_paired, rel=1e-12)
    assert r.mcnemar_p == pytest.approx(
        mcnemar([[both, bb], [cc, none]], exact=True).pvalue, rel=1e-12
    )
    # phi coefficient of the 2x2 table is the Pearson correlation of the 0/1 outcomes
    ra, rb = both + bb, both + cc
    phi = (both * none - bb * cc) / math.sqrt(ra * (n - ra) * rb * (n - rb))
    assert r.correlation == pytest.approx(phi, rel=1e-10)
    assert r.discordance_rate == pytest.approx((bb + cc) / n)
    # one-sided "B worse": McNemar's z without continuity correction, lower tail
    assert r.p_worse == pytest.approx(stats.norm.cdf((cc - bb) / math.sqrt(bb + cc)), rel=1e-10)
    # the paired bootstrap agrees with the normal CI at this n (both ~ delta -/+ 1.96 SE)
    assert r.ci_bootstrap[0] == pytest.approx(r.ci_normal[0], abs=0.6 * r.se_paired)
    assert r.ci_bootstrap[1] == pytest.approx(r.ci_normal[1], abs=0.6 * r.se_paired)
    # unpaired SE is larger when outcomes are positively correlated
    assert r.se_unpaired > r.se_paired
    text = r.report()
    assert f"n={n}" in text and "alpha=0.05" in text and "MDE" in text and "McNemar" in text


def test_bootstrap_is_seeded_and_clustered_when_repeated(rng):
    items, reps = 150, 4
    item_p = rng.beta(1.2, 0.6, size=items)
    clusters = np.repeat(np.arange(items), reps)
    a = (rng.random(items * reps) < item_p[clusters]).astype(float)
    flip = rng.random(items * reps) < 0.05
    b = np.where(flip, 1 - a, a)
    paired = PairedOutcomes.from_arrays(a, b, clusters)
    r1 = compare_binary(paired, bootstrap=BootstrapSpec(3000, 5))
    r2 = compare_binary(paired, bootstrap=BootstrapSpec(3000, 5))
    r3 = compare_binary(paired, bootstrap=BootstrapSpec(3000, 6))
    assert r1.ci_bootstrap == r2.ci_bootstrap and r1.ci_bootstrap != r3.ci_bootstrap
    assert r1.repeated and r1.mcnemar_p is None and r1.ci_score is None
    assert r1.n_items == items and r1.n_rows == items * reps
    # clustered SE of d, recomputed from item sums (sandwich, CR1)
    d = b - a
    resid = np.array([np.sum(d[clusters == g] - d.mean()) for g in range(items)])
    expected = math.sqrt(items / (items - 1) * np.sum(resid**2) / d.size**2)
    assert r1.se_paired == pytest.approx(expected, rel=1e-10)


def test_pairing_refuses_different_prompts_and_reports_coverage():
    a = ItemOutcomes.single("A", "t", "m", [1, 0, 1], ["0", "1", "2"], ["h0", "h1", "h2"])
    b = ItemOutcomes.single("B", "t", "m", [1, 1], ["0", "1"], ["h0", "h1"])
    p = pair_outcomes(a, b)
    assert p.only_in_a == ("2#0",) and p.coverage == pytest.approx(2 / 3)
    bad = ItemOutcomes.single("B", "t", "m", [1, 1], ["0", "1"], ["h0", "XX"])
    with pytest.raises(PairingError, match="item 1 has different prompts"):
        pair_outcomes(a, bad)
    with pytest.raises(StatsInputError, match="not all 0/1"):
        compare_binary(PairedOutcomes.from_arrays([0.5, 1.0], [1.0, 0.0]))


@pytest.mark.parametrize("trial", range(4))
def test_continuous_mean_difference_matches_scipy_ttest_rel(trial, rng):
    n = int(rng.integers(20, 300))
    a = rng.lognormal(0.0, 0.5, size=n)
    b = a * rng.lognormal(-0.1, 0.2, size=n)
    r = compare_continuous(PairedOutcomes.from_arrays(a, b), bootstrap=BootstrapSpec(2000, 2))
    tt = stats.ttest_rel(b, a)
    ci = tt.confidence_interval(0.95)
    assert r.ci_t == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert r.se == pytest.approx(np.std(b - a, ddof=1) / math.sqrt(n), rel=1e-12)
    assert r.delta == pytest.approx(np.mean(b) - np.mean(a), rel=1e-12)


def test_ratio_of_means_bootstrap_against_delta_method(rng):
    n = 2000
    a = rng.lognormal(0.0, 0.4, size=n)  # baseline latency
    b = 0.8 * a * rng.lognormal(0.0, 0.1, size=n)  # candidate ~20 % faster
    paired = PairedOutcomes.from_arrays(a, b, label_a="base", label_b="fast")
    r = ratio_of_means(paired, invert=True, bootstrap=BootstrapSpec(4000, 3))
    assert r.ratio == pytest.approx(a.mean() / b.mean(), rel=1e-12)
    assert r.numerator == "base" and r.denominator == "fast"
    # delta method for mean(a)/mean(b) with paired data
    ma, mb = a.mean(), b.mean()
    cov = np.cov(a, b, ddof=1) / n
    grad = np.array([1 / mb, -ma / mb**2])
    se = math.sqrt(grad @ cov @ grad)
    lo, hi = r.ci_bootstrap
    assert lo == pytest.approx(r.ratio - 1.96 * se, abs=0.4 * se)
    assert hi == pytest.approx(r.ratio + 1.96 * se, abs=0.4 * se)
    assert lo < 1 / (0.8 * np.exp(0.005)) < hi  # E[lognormal(0, 0.1)] = exp(0.005)
    assert "n=2000" in r.report() and "alpha=0.05" in r.report()


def test_bootstrap_shortcut_matches_plain_index_resampling():
    """The multinomial-over-kinds shortcut (0/1, one row per item) has the distribution
    of plain item resampling; compare with a direct index bootstrap written here."""
    from validate.stats.bootstrap import replicate_means

    a, b = correlated_pair(1319, 0.9, 0.04, -0.01, np.random.default_rng(5))
    fast = replicate_means([a, b], np.arange(a.size), BootstrapSpec(8000, 9))
    delta_fast = fast[:, 1] - fast[:, 0]
    rng = np.random.default_rng(10)
    idx = rng.integers(0, a.size, size=(8000, a.size))
    delta_plain = b[idx].mean(axis=1) - a[idx].mean(axis=1)
    se = np.std(b - a, ddof=0) / math.sqrt(a.size)  # the bootstrap's own SD
    assert np.std(delta_fast) == pytest.approx(se, rel=0.03)
    for q in (0.025, 0.5, 0.975):
        assert np.quantile(delta_fast, q) == pytest.approx(np.quantile(delta_plain, q), abs=0.15 * se)
