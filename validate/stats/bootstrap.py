"""Seeded paired bootstrap, resampling whole items (clusters).

The same resampled items are applied to A and B (that is what makes it paired), and
all rows of an item (its repeats) travel together (that is what makes it clustered).

A replicate draws G cluster indices with replacement; its mean is
(sum of the drawn clusters' totals) / (sum of their row counts), where totals and
counts are per-cluster. Vectorised as a gather over an index matrix, in chunks so
memory stays bounded.

Shortcut with the same distribution: when many clusters are identical (0/1 outcomes
with one row per item have only four kinds: both right, A only, B only, both wrong),
drawing G clusters uniformly is drawing Multinomial(G, share of each kind) copies of
each kind, so a replicate costs O(kinds) instead of O(G). GSM8K at 10,000 replicates
goes from ~1.5 s to a few milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from validate.errors import StatsInputError
from validate.stats._checks import check_alpha

CHUNK = 512


# The replicates' Monte-Carlo error is far below a CI's width by 10,000 (the default);
# the cap keeps the (replicates, columns) result array in memory (16 MB a pair of columns)
# instead of a MemoryError for a mistyped count.
MIN_REPLICATES, MAX_REPLICATES = 100, 1_000_000


@dataclass(frozen=True)
class BootstrapSpec:
    """How to bootstrap: replicate count and the seed (results are reproducible)."""

    replicates: int = 10_000
    seed: int = 20261129

    def __post_init__(self) -> None:
        if not MIN_REPLICATES <= self.replicates <= MAX_REPLICATES:
            raise StatsInputError(f"--bootstrap: replicates must be in [{MIN_REPLICATES:,}, "
                                  f"{MAX_REPLICATES:,}], got {self.replicates:,}")
        if not 0 <= self.seed < 2**63:
            raise StatsInputError(f"--seed: the bootstrap seed must be an integer in "
                                  f"[0, 2**63), got {self.seed}")


def cluster_totals(values: np.ndarray, clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sums (G,), counts (G,)) of ``values`` per cluster code 0..G-1."""
    groups = int(clusters.max()) + 1
    sums = np.bincount(clusters, weights=values, minlength=groups)
    counts = np.bincount(clusters, minlength=groups).astype(np.float64)
    return sums, counts


def replicate_means(
    columns: list[np.ndarray], clusters: np.ndarray, spec: BootstrapSpec
) -> np.ndarray:
    """Bootstrap replicates of the row-mean of each column: (replicates, len(columns)).

    Every column is resampled with the same cluster weights (paired resampling).
    """
    clusters = np.asarray(clusters, dtype=np.int64)
    totals = [cluster_totals(np.asarray(col, dtype=np.float64), clusters) for col in columns]
    counts = totals[0][1]
    sums = np.stack([s for s, _ in totals], axis=1)  # (G, k)
    groups = counts.shape[0]
    rng = np.random.default_rng(spec.seed)
    out = np.empty((spec.replicates, len(columns)), dtype=np.float64)
    kinds, frequency = np.unique(np.column_stack([sums, counts]), axis=0, return_counts=True)
    if kinds.shape[0] * 4 <= groups:
        kind_sums, kind_counts = kinds[:, :-1], kinds[:, -1]  # (U, k), (U,)
        shares = frequency / groups
        for start in range(0, spec.replicates, CHUNK):
            stop = min(start + CHUNK, spec.replicates)
            copies = rng.multinomial(groups, shares, size=stop - start).astype(np.float64)
            out[start:stop] = (copies @ kind_sums) / (copies @ kind_counts)[:, None]
        return out
    for start in range(0, spec.replicates, CHUNK):
        stop = min(start + CHUNK, spec.replicates)
        draw = rng.integers(0, groups, size=(stop - start, groups))  # (r, G) cluster ids
        picked_sums = sums[draw].sum(axis=1)  # (r, k)
        picked_counts = counts[draw].sum(axis=1)  # (r,)
        out[start:stop] = picked_sums / picked_counts[:, None]
    return out


def replicate_medians(columns: list[np.ndarray], clusters, spec: BootstrapSpec) -> np.ndarray:
    """Bootstrap replicates of each column's median, resampling whole clusters (items)
    with the same draw for every column: (replicates, len(columns))."""
    _, codes = np.unique(np.asarray(clusters), return_inverse=True)
    codes = codes.reshape(-1)
    groups = int(codes.max()) + 1
    data = np.stack([np.asarray(c, dtype=np.float64) for c in columns], axis=1)  # (rows, k)
    rng = np.random.default_rng(spec.seed)
    out = np.empty((spec.replicates, data.shape[1]), dtype=np.float64)
    if groups == data.shape[0]:  # one row per item: draw rows directly, in chunks
        rows = data[np.argsort(codes)]
        for start in range(0, spec.replicates, CHUNK):
            stop = min(start + CHUNK, spec.replicates)
            draw = rng.integers(0, groups, size=(stop - start, groups))
            out[start:stop] = np.median(rows[draw], axis=1)
        return out
    members = [np.flatnonzero(codes == g) for g in range(groups)]
    for r in range(spec.replicates):
        picked = np.concatenate([members[g] for g in rng.integers(0, groups, size=groups)])
        out[r] = np.median(data[picked], axis=0)
    return out


def percentile_interval(replicates: np.ndarray, alpha: float) -> tuple[float, float]:
    """Two-sided percentile interval at level 1 - alpha."""
    check_alpha(alpha)
    lo, hi = np.quantile(replicates, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def paired_bootstrap_interval(
    a: np.ndarray,
    b: np.ndarray,
    clusters: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    alpha: float,
    spec: BootstrapSpec,
) -> tuple[float, float]:
    """Percentile CI of ``statistic(mean_a*, mean_b*)`` over paired cluster resamples."""
    reps = replicate_means([a, b], clusters, spec)
    return percentile_interval(statistic(reps[:, 0], reps[:, 1]), alpha)
