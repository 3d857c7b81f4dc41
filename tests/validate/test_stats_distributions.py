"""``validate.stats.distributions`` gives bit-for-bit the values of ``scipy.stats`` (it
calls the same ufuncs), edges included, so swapping the import changed no number."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats

from validate.stats import distributions as ours

Q = [0.0, 1e-12, 0.001, 0.025, 0.05, 0.2, 0.5, 0.8, 0.95, 0.975, 1 - 1e-12, 1.0, -0.1, 1.1,
     float("nan")]
X = [-np.inf, -40.0, -3.2, -1.0, 0.0, 0.3, 1.96, 8.5, 40.0, np.inf, float("nan")]


def same(a, b) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def test_normal_matches_scipy_exactly():
    for q in Q:
        assert same(ours.norm.ppf(q), scipy_stats.norm.ppf(q)), q
    for x in X:
        assert same(ours.norm.cdf(x), scipy_stats.norm.cdf(x)), x
        assert same(ours.norm.sf(x), scipy_stats.norm.sf(x)), x
    assert same(ours.norm.ppf(np.array(Q)), scipy_stats.norm.ppf(np.array(Q)))
    assert isinstance(ours.norm.ppf(0.975), np.float64)


@pytest.mark.parametrize("df", [-1, 0, 0.5, 1, 2, 7, 29, 197, 1e6])
def test_student_t_matches_scipy_exactly(df):
    for q in Q:
        assert same(ours.t.ppf(q, df), scipy_stats.t.ppf(q, df)), (q, df)
    for x in X:
        assert same(ours.t.cdf(x, df), scipy_stats.t.cdf(x, df)), (x, df)


@pytest.mark.parametrize("n, p", list(itertools.product([0, 1, 2, 7, 50, 281, 1319],
                                                        [0.0, 0.01, 0.3, 0.5, 0.99, 1.0])))
def test_binomial_matches_scipy_exactly(n, p):
    k = np.arange(-2, n + 3)
    assert same(ours.binom.pmf(k, n, p), scipy_stats.binom.pmf(k, n, p))
    assert same(ours.binom.cdf(k, n, p), scipy_stats.binom.cdf(k, n, p))
    assert same(ours.binom.sf(k, n, p), scipy_stats.binom.sf(k, n, p))
    assert same(ours.binom.cdf(k + 0.5, n, p), scipy_stats.binom.cdf(k + 0.5, n, p))
    assert same(ours.binom.ppf(np.array(Q), n, p), scipy_stats.binom.ppf(np.array(Q), n, p))
    for kk in (0, n // 2, n):
        assert same(ours.binom.pmf(kk, n, p), scipy_stats.binom.pmf(kk, n, p))


def test_binomial_broadcasts_like_scipy():
    mm, cc = np.meshgrid(np.arange(0, 12), np.arange(0, 12), indexing="ij")
    assert same(ours.binom.pmf(cc, mm, 0.37), scipy_stats.binom.pmf(cc, mm, 0.37))
    assert same(ours.binom.pmf(mm, 11, 0.2), scipy_stats.binom.pmf(mm, 11, 0.2))
    for bad in ((3, -1, 0.5), (3, 2.5, 0.5), (3, 5, 1.5)):
        assert same(ours.binom.pmf(*bad), scipy_stats.binom.pmf(*bad)), bad
        assert same(ours.binom.cdf(*bad), scipy_stats.binom.cdf(*bad)), bad
