"""validate.stats against scipy/statsmodels on random data, and closed forms by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint

from validate.errors import StatsInputError
from validate.stats import adjust, bonferroni, estimate_accuracy, holm
from validate.stats.mcnemar import exact_mcnemar_p, exact_worse_p, mid_p_mcnemar, mid_p_worse
from validate.stats.power import difference_mde, unpaired_mde
from validate.stats.proportions import clustered_se, wilson_interval
from validate.stats.score_interval import constrained_pb, score_bounds, score_z


@pytest.mark.parametrize("trial", range(25))
def test_exact_mcnemar_matches_statsmodels(trial, rng):
    b, c = (int(x) for x in rng.integers(0, 40, size=2))
    table = [[int(rng.integers(0, 500)), b], [c, int(rng.integers(0, 50))]]
    expected = mcnemar(table, exact=True).pvalue if b + c else 1.0
    assert exact_mcnemar_p(b, c) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    if b + c:
        assert exact_mcnemar_p(b, c) == pytest.approx(
            stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-9
        )


def test_mid_p_by_hand():
    # b=2, c=8, m=10: P[X<=2] = (1+10+45)/1024, P[X=2] = 45/1024.
    expected = 2 * (56 - 22.5) / 1024
    assert mid_p_mcnemar(2, 8) == pytest.approx(expected, rel=1e-12)
    assert mid_p_mcnemar(8, 2) == pytest.approx(expected, rel=1e-12)
    # one-sided "B worse" with b=8 of m=10: P[X>=8] = 56/1024; mid: P[X>8] + P[X=8]/2
    assert float(exact_worse_p(8, 2)) == pytest.approx(56 / 1024, rel=1e-12)
    assert float(mid_p_worse(8, 2)) == pytest.approx((11 + 22.5) / 1024, rel=1e-12)
    assert mid_p_mcnemar(0, 0) == 1.0 and exact_mcnemar_p(0, 0) == 1.0


def _binomial_case(trial, rng) -> tuple[int, int, float]:
    """(k, n, alpha): random draws, then the edges, where statsmodels clips the normal
    interval to [0, 1]."""
    if trial == "none right":
        return 0, 50, 0.05
    if trial == "one right":
        return 1, 50, 0.05
    if trial == "all right":
        return 200, 200, 0.1
    n = int(rng.integers(20, 2000))
    return int(rng.integers(0, n + 1)), n, float(rng.choice([0.01, 0.05, 0.1]))


@pytest.mark.parametrize("trial", [*range(20), "none right", "one right", "all right"])
def test_binomial_cis_match_statsmodels(trial, rng):
    k, n, alpha = _binomial_case(trial, rng)
    values = np.r_[np.ones(k), np.zeros(n - k)]
    est = estimate_accuracy(values, alpha=alpha)
    lo, hi = proportion_confint(k, n, alpha=alpha, method="wilson")
    assert est.ci_wilson == pytest.approx((lo, hi), abs=1e-12)
    assert wilson_interval(k, n, alpha) == pytest.approx((lo, hi), abs=1e-12)
    # statsmodels' normal interval uses p(1-p)/n; ours uses the CLT SE with n - 1
    # (lm-eval's mean_stderr), i.e. a half-width larger by sqrt(n / (n - 1)). statsmodels
    # clips its interval to [0, 1] and ours is not clipped, so the two are compared where
    # statsmodels' lies inside; its unclipped half-width is z * sqrt(p (1 - p) / n).
    p = k / n
    lo_n, hi_n = proportion_confint(k, n, alpha=alpha, method="normal")
    half_unclipped = stats.norm.ppf(1 - alpha / 2) * math.sqrt(p * (1 - p) / n)
    if lo_n > 0 and hi_n < 1:
        assert (hi_n - lo_n) / 2 == pytest.approx(half_unclipped, rel=1e-10)
    else:
        assert (lo_n, hi_n) == pytest.approx((max(0.0, p - half_unclipped), min(1.0, p + half_unclipped)),
                                             rel=1e-10, abs=1e-15)
    half = (est.ci_normal[1] - est.ci_normal[0]) / 2
    assert half == pytest.approx(half_unclipped * math.sqrt(n / (n - 1)), rel=1e-10, abs=1e-15)
    assert est.mean == pytest.approx(k / n)


def test_shown_accuracy_interval_is_wilson_and_never_leaves_0_100():
    """The interval reports show (``AccuracyEstimate.ci``): Wilson (statsmodels) for one
    row per item, e.g. 1 of 100 right is [0.18, 5.45] % where the normal CI starts at
    -0.95 %; with repeats the normal CI of the clustered SE, clipped to [0, 1]."""
    values = np.r_[np.ones(1), np.zeros(99)]
    est = estimate_accuracy(values, alpha=0.05)
    assert est.ci_normal[0] < 0.0
    assert est.ci == pytest.approx(proportion_confint(1, 100, alpha=0.05, method="wilson"),
                                   abs=1e-12)
    assert est.ci_method == "Wilson score interval"
    repeated = np.r_[np.ones(2), np.zeros(58)]  # 30 items x 2 repeats, item 0 right twice
    clusters = np.repeat(np.arange(30), 2)
    rep = estimate_accuracy(repeated, clusters, alpha=0.05)
    assert rep.ci_wilson is None and rep.ci_normal[0] < 0.0
    z = stats.norm.ppf(0.975)
    sd_items = np.std(np.r_[1.0, np.zeros(29)], ddof=1) / math.sqrt(30)  # CR1 = item means' SE
    assert rep.ci == pytest.approx((0.0, 2 / 60 + z * sd_items), abs=1e-12)
    assert rep.ci_method == "normal, clustered SE, clipped to [0, 1]"
    graded = estimate_accuracy([0.2, 0.5, 0.9, 0.1], alpha=0.05)  # not 0/1: not clipped
    assert graded.ci == graded.ci_normal and not graded.binary


def test_clt_se_is_lm_evals_mean_stderr():
    # docs/evaluation.md §2.6: [1,1,1,0,0] gave 0.2449 = sqrt(0.3/5)
    est = estimate_accuracy([1, 1, 1, 0, 0])
    assert est.se_clt == pytest.approx(math.sqrt(0.3 / 5), rel=1e-12)
    assert est.se == est.se_clt and est.se_clustered is None


@pytest.mark.parametrize("trial", range(5))
def test_clustered_se_matches_statsmodels_ols_cluster(trial, rng):
    import statsmodels.api as sm

    items = int(rng.integers(30, 120))
    reps = rng.integers(1, 6, size=items)
    clusters = np.repeat(np.arange(items), reps)
    item_p = rng.beta(2, 1, size=items)
    values = (rng.random(clusters.size) < item_p[clusters]).astype(float)
    fit = sm.OLS(values, np.ones((values.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": clusters}
    )
    assert clustered_se(values, clusters) == pytest.approx(float(fit.bse[0]), rel=1e-10)
    est = estimate_accuracy(values, clusters)
    assert est.se == pytest.approx(float(fit.bse[0]), rel=1e-10)
    z = stats.norm.ppf(0.975)
    assert est.ci_normal[0] == pytest.approx(values.mean() - z * fit.bse[0], rel=1e-10)


def test_clustered_se_equals_clt_without_repeats(rng):
    values = (rng.random(300) < 0.7).astype(float)
    assert clustered_se(values, np.arange(300)) == pytest.approx(
        np.std(values, ddof=1) / math.sqrt(300), rel=1e-12
    )


@pytest.mark.parametrize("trial", range(15))
def test_holm_bonferroni_match_multipletests(trial, rng):
    m = int(rng.integers(1, 12))
    p = rng.random(m) ** 3
    for method, ours in (("holm", holm), ("bonferroni", bonferroni)):
        _, expected, _, _ = multipletests(p, alpha=0.05, method=method)
        np.testing.assert_allclose(ours(p), expected, rtol=1e-12)
        np.testing.assert_allclose(adjust(p, method), expected, rtol=1e-12)
    np.testing.assert_allclose(adjust(p, "none"), p)


def test_holm_by_hand_and_unknown_method():
    # p = (0.01, 0.04, 0.03): sorted 0.01*3=0.03, 0.03*2=0.06, 0.04*1 -> max(0.06, 0.04)=0.06
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    with pytest.raises(StatsInputError, match="correction"):
        adjust([0.1], "bh")


@pytest.mark.parametrize("trial", range(10))
def test_constrained_mle_maximises_the_likelihood(trial, rng):
    n = int(rng.integers(50, 1500))
    b, c = (int(x) for x in rng.integers(0, n // 8, size=2))
    theta0 = float(rng.uniform(-0.05, 0.05))
    m = n - b - c

    def negloglik(q):
        return -(b * math.log(q) + c * math.log(q + theta0) + m * math.log(1 - 2 * q - theta0))

    lo = max(1e-12, -theta0 + 1e-12)
    hi = (1 - theta0) / 2 - 1e-12
    best = optimize.minimize_scalar(negloglik, bounds=(lo, hi), method="bounded",
                                    options={"xatol": 1e-12})
    assert float(constrained_pb(b, c, n, theta0)) == pytest.approx(best.x, rel=1e-5, abs=1e-9)


def test_score_z_reduces_to_mcnemar_and_bounds_invert_it():
    b, c, n = 17, 6, 500
    assert float(score_z(b, c, n, 0.0)) == pytest.approx((c - b) / math.sqrt(b + c), rel=1e-12)
    lo, hi = score_bounds(b, c, n, 0.05)
    z = stats.norm.ppf(0.95)
    assert float(score_z(b, c, n, lo)) == pytest.approx(z, abs=1e-8)
    assert float(score_z(b, c, n, hi)) == pytest.approx(-z, abs=1e-8)
    assert lo < (c - b) / n < hi


def test_quantiles_used_are_scipys():
    # the 2.80 factor of docs/evaluation.md §3.1 and the one-sided 1.645
    assert stats.norm.ppf(0.975) + stats.norm.ppf(0.8) == pytest.approx(2.8016, abs=1e-4)
    # docs/evaluation.md §3.7 paired table: n = 1,319 at 2 %, 5 %, 10 % discordance
    for disc, points in ((0.02, 1.09), (0.05, 1.72), (0.10, 2.44)):
        assert 100 * difference_mde(1319, disc, 0.05, 0.8) == pytest.approx(points, abs=0.006)
    # and n = 198 at 2 %: 2.82
    assert 100 * difference_mde(198, 0.02, 0.05, 0.8) == pytest.approx(2.82, abs=0.006)


@pytest.mark.parametrize("n,disc", [(1319, 0.03), (198, 0.1), (448, 0.05)])
def test_difference_mde_matches_statsmodels_power(n, disc):
    # one-sample two-sided z test of mean d with SD sqrt(disc): statsmodels gives the
    # standardized effect, our MDE is that times the SD.
    effect = NormalIndPower().solve_power(
        effect_size=None, nobs1=n, alpha=0.05, power=0.8, ratio=0, alternative="two-sided"
    )
    assert difference_mde(n, disc, 0.05, 0.8) == pytest.approx(effect * math.sqrt(disc), rel=1e-4)


@pytest.mark.parametrize("n,p", [(1319, 0.9), (198, 0.95)])
def test_unpaired_mde_matches_statsmodels_and_trtllm(n, p):
    effect = NormalIndPower().solve_power(
        effect_size=None, nobs1=n, alpha=0.05, power=0.8, ratio=1, alternative="larger"
    )
    assert unpaired_mde(n, p, 0.05, 0.8) == pytest.approx(effect * math.sqrt(p * (1 - p)), rel=1e-5)
    # TensorRT-LLM's theta with sigma = 50 points (p = 0.5): 4.84 on GSM8K (eval 3.3)
    assert 100 * unpaired_mde(1319, 0.5, 0.05, 0.8) == pytest.approx(4.84, abs=0.01)
