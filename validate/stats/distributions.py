"""The normal, Student t and binomial distributions the statistics use, without
importing ``scipy.stats``.

Why: ``scipy.stats`` costs about 0.6 s of CPU to import (it loads sparse, linalg,
optimize, interpolate, ...), most of what ``v41val report`` would otherwise spend; its
distributions are thin wrappers around ``scipy.special`` ufuncs, which cost a tenth of
that. Each function here calls the very ufunc ``scipy.stats`` calls underneath and
handles the edges (q = 0 or 1, k outside 0..n, df <= 0) the way its wrappers do, so
every value is bit-for-bit scipy's (``tests/validate/test_stats_distributions.py``
compares them on grids that include the edges). Call sites read as before:
``from validate.stats import distributions as stats``; ``stats.norm.ppf(0.975)``.

The binomial uses the Boost ufuncs ``scipy.stats.binom`` uses (``scipy.special._ufuncs``,
private); a SciPy without them gets ``scipy.stats.binom`` itself, imported on first use.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from scipy import special
from scipy.special import _ufuncs

_BOOST = all(hasattr(_ufuncs, f"_binom_{f}") for f in ("pmf", "cdf", "sf", "ppf"))


def _out(values):
    """A numpy scalar for scalar input, an array otherwise (as scipy.stats returns)."""
    values = np.asarray(values, dtype=np.float64)
    return values[()] if values.ndim == 0 else values


def _norm_ppf(q):
    return _out(special.ndtri(q))


def _norm_cdf(x):
    return _out(special.ndtr(x))


def _norm_sf(x):
    return _out(special.ndtr(-np.asarray(x, dtype=np.float64)))


def _t_ok(df):
    return np.asarray(df, dtype=np.float64) > 0


def _t_ppf(q, df):
    q = np.asarray(q, dtype=np.float64)
    ok = _t_ok(df) & (q >= 0) & (q <= 1)
    with np.errstate(invalid="ignore"):
        values = special.stdtrit(np.where(ok, df, 1.0), np.where(ok, q, 0.5))
    values = np.where(q == 0, -np.inf, np.where(q == 1, np.inf, values))
    return _out(np.where(ok, values, np.nan))


def _t_cdf(x, df):
    ok = _t_ok(df)
    values = special.stdtr(np.where(ok, df, 1.0), x)
    return _out(np.where(ok, values, np.nan))


def _binom_args(n, p):
    n = np.asarray(n, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    return n, p, (n >= 0) & (n == np.floor(n)) & (p >= 0) & (p <= 1)


def _scipy_binom():
    from scipy import stats  # only on a SciPy without the Boost ufuncs

    return stats.binom


def _binom_pmf(k, n, p):
    if not _BOOST:
        return _scipy_binom().pmf(k, n, p)
    k = np.asarray(k, dtype=np.float64)
    n, p, ok = _binom_args(n, p)
    inside = ok & (k >= 0) & (k <= n) & (k == np.floor(k))
    values = _ufuncs._binom_pmf(np.where(inside, k, 0), np.where(ok, n, 0), np.where(ok, p, 0))
    return _out(np.where(ok, np.where(inside, values, 0.0), np.nan))


def _binom_cdf(k, n, p):
    if not _BOOST:
        return _scipy_binom().cdf(k, n, p)
    return _binom_tail(_ufuncs._binom_cdf, k, n, p, at_or_above_n=1.0, below_zero=0.0)


def _binom_sf(k, n, p):
    if not _BOOST:
        return _scipy_binom().sf(k, n, p)
    return _binom_tail(_ufuncs._binom_sf, k, n, p, at_or_above_n=0.0, below_zero=1.0)


def _binom_tail(ufunc, k, n, p, *, at_or_above_n: float, below_zero: float):
    """The cdf or sf ufunc on floor(k) inside [0, n), the tail's limits outside it (as
    scipy.stats.binom sets them), NaN for a NaN k or invalid (n, p)."""
    k = np.floor(np.asarray(k, dtype=np.float64))
    n, p, ok = _binom_args(n, p)
    inside = ok & (k >= 0) & (k < n)
    values = ufunc(np.where(inside, k, 0), np.where(ok, n, 1), np.where(ok, p, 0))
    values = np.where(inside, values, np.where(k >= n, at_or_above_n, below_zero))
    return _out(np.where(ok & ~np.isnan(k), values, np.nan))


def _binom_ppf(q, n, p):
    if not _BOOST:
        return _scipy_binom().ppf(q, n, p)
    q = np.asarray(q, dtype=np.float64)
    n, p, ok = _binom_args(n, p)
    inside = ok & (q > 0) & (q < 1)
    values = _ufuncs._binom_ppf(np.where(inside, q, 0.5), np.where(ok, n, 1),
                                np.where(ok, p, 0.5))
    values = np.where(inside, values, np.where(q == 0, -1.0, np.where(q == 1, n, np.nan)))
    return _out(np.where(ok, values, np.nan))


norm = SimpleNamespace(ppf=_norm_ppf, cdf=_norm_cdf, sf=_norm_sf)
t = SimpleNamespace(ppf=_t_ppf, cdf=_t_cdf)
binom = SimpleNamespace(pmf=_binom_pmf, cdf=_binom_cdf, sf=_binom_sf, ppf=_binom_ppf)
