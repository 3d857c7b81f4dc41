"""ratio_of_medians (the speed-ups the reports print beside p50 latencies): the point
estimate is numpy's medians, and the paired bootstrap CI matches scipy's own paired
percentile bootstrap (an independent implementation, another random stream) to within
Monte Carlo error; repeated rows resample whole items."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from validate.errors import StatsInputError
from validate.stats import BootstrapSpec, PairedOutcomes, ratio_of_medians


def _latencies(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.lognormal(mean=np.log(0.4), sigma=0.5, size=n)
    variant = base * rng.lognormal(mean=np.log(0.8), sigma=0.2, size=n)  # paired, ~1.25x
    return base, variant


def test_point_estimate_and_ci_agree_with_scipy_paired_bootstrap():
    base, variant = _latencies(150, seed=3)
    est = ratio_of_medians(PairedOutcomes.from_arrays(base, variant), 0.05,
                           BootstrapSpec(replicates=6000, seed=11), invert=True)
    assert est.ratio == pytest.approx(np.median(base) / np.median(variant), rel=1e-12)
    ref = stats.bootstrap((base, variant), lambda a, b, axis=-1: np.median(a, axis=axis)
                          / np.median(b, axis=axis), paired=True, vectorized=True,
                          n_resamples=6000, method="percentile", confidence_level=0.95,
                          random_state=np.random.default_rng(5))
    lo, hi = ref.confidence_interval
    width = hi - lo
    assert est.ci_bootstrap[0] == pytest.approx(lo, abs=0.08 * width)
    assert est.ci_bootstrap[1] == pytest.approx(hi, abs=0.08 * width)
    assert est.statistic == "median" and "medians" in est.test


def test_rate_orientation_is_variant_over_baseline():
    base, variant = _latencies(40, seed=4)
    est = ratio_of_medians(PairedOutcomes.from_arrays(base, variant), 0.05,
                           BootstrapSpec(replicates=500, seed=1))
    assert est.ratio == pytest.approx(np.median(variant) / np.median(base), rel=1e-12)


def test_repeated_rows_resample_whole_items():
    """Each item measured twice with identical values: resampling items (not rows) gives
    the CI of the one-row data, while resampling rows independently would narrow it by
    about 1/sqrt(2)."""
    base, variant = _latencies(60, seed=8)
    ids = np.repeat(np.arange(60), 2)
    doubled = PairedOutcomes.from_arrays(np.repeat(base, 2), np.repeat(variant, 2), clusters=ids)
    spec = BootstrapSpec(replicates=3000, seed=2)
    clustered = ratio_of_medians(doubled, 0.05, spec, invert=True)
    single = ratio_of_medians(PairedOutcomes.from_arrays(base, variant), 0.05, spec, invert=True)
    rows_only = ratio_of_medians(PairedOutcomes.from_arrays(np.repeat(base, 2),
                                                            np.repeat(variant, 2)), 0.05, spec,
                                 invert=True)
    assert clustered.ratio == pytest.approx(single.ratio, rel=1e-12)
    w_cl = clustered.ci_bootstrap[1] - clustered.ci_bootstrap[0]
    w_single = single.ci_bootstrap[1] - single.ci_bootstrap[0]
    w_rows = rows_only.ci_bootstrap[1] - rows_only.ci_bootstrap[0]
    assert w_cl == pytest.approx(w_single, rel=0.15)
    assert w_rows < 0.85 * w_cl


def test_zero_median_denominator_is_an_input_error():
    with pytest.raises(StatsInputError, match="zero median"):
        ratio_of_medians(PairedOutcomes.from_arrays([1.0, 2.0, 3.0], [0.0, 0.0, 1.0]),
                         invert=True, bootstrap=BootstrapSpec(replicates=100))
