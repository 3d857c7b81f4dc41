"""Paired deltas within subgroups of the items, and whether A/B discordance exceeds A/A.

Subgroups (engaged / not engaged, prompt-length buckets) answer "where does the
difference come from?": a replay that costs nothing on short prompts and two points on
long ones averages to a delta the gate may PASS. They are descriptive: no family
correction, each group's interval at ``alpha`` two-sided (Tango's score interval for
one row per item, the clustered normal interval with repeats).

``discordance_excess`` tests whether a candidate disagrees with the baseline more often
than the baseline disagrees with itself (an A/A rerun). Per row, X = 1 when A and B
differ and Y = 1 when A and A' differ; both are measured on the same rows, so the pair
(X, Y) is a paired binary outcome and the test of P(X = 1) > P(Y = 1) is McNemar's on
the rows where X != Y: n_ab (X = 1, Y = 0) ~ Binomial(n_ab + n_aa, 1/2) under H0, one
sided, exact (``tests/validate/test_subgroups.py`` checks it against scipy's
``binomtest`` and statsmodels' ``mcnemar``). With repeated rows the rows of an item are
not independent: the test is then a one-sided z on the per-item mean of X - Y with the
clustered SE.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from validate.stats import distributions as stats
from validate.stats.jsonable import ToDict
from validate.stats.mcnemar import exact_worse_p
from validate.stats.outcomes import PairedOutcomes
from validate.stats.paired import discordance_table
from validate.stats.proportions import clustered_se
from validate.stats.score_interval import score_bounds


@dataclass(frozen=True)
class SubgroupDelta(ToDict):
    """The paired delta (B - A) of the rows in one group. ``a_only`` / ``b_only``: rows
    right under the baseline only / the candidate only."""

    by: str
    group: str
    n_rows: int
    n_items: int
    delta: float
    a_only: int
    b_only: int
    ci: tuple[float, float]
    ci_method: str


def _group_ci(a: np.ndarray, b: np.ndarray, clusters: np.ndarray,
              alpha: float) -> tuple[tuple[float, float], str]:
    n_items = len(np.unique(clusters))
    if n_items == a.size:
        t = discordance_table(a, b)
        lo, hi = score_bounds(t.a_only, t.b_only, a.size, alpha / 2.0)
        return (float(lo), float(hi)), "score"
    d = b - a
    se = clustered_se(d, clusters)
    z = stats.norm.ppf(1.0 - alpha / 2.0)
    return (float(d.mean() - z * se), float(d.mean() + z * se)), "clustered normal"


def subgroup_deltas(paired: PairedOutcomes, labels: Sequence[str], by: str,
                    alpha: float = 0.05, order: Sequence[str] | None = None
                    ) -> tuple[SubgroupDelta, ...]:
    """One ``SubgroupDelta`` per distinct label (``labels[i]`` is row i's group), in
    ``order`` when given (groups it does not name follow, sorted)."""
    labels = np.asarray(list(labels), dtype=object)
    if labels.shape[0] != paired.n_rows:
        raise ValueError(f"subgroup_deltas: {labels.shape[0]} labels for {paired.n_rows} rows")
    present = set(labels.tolist())
    groups = [g for g in (order or ()) if g in present]
    groups += sorted(present - set(groups))
    out = []
    for g in groups:
        rows = labels == g
        a, b, clusters = paired.a[rows], paired.b[rows], paired.clusters[rows]
        t = discordance_table(a, b)
        ci, method = _group_ci(a, b, clusters, alpha)
        out.append(SubgroupDelta(by=by, group=str(g), n_rows=int(rows.sum()),
                                 n_items=len(np.unique(clusters)),
                                 delta=float((b - a).mean()), a_only=t.a_only,
                                 b_only=t.b_only, ci=ci, ci_method=method))
    return tuple(out)


@dataclass(frozen=True)
class DiscordanceExcess(ToDict):
    """A/B discordance against A/A discordance on the same rows (see the module doc).

    ``ab_only``: rows where A and B differ but A and A' agree; ``aa_only``: the reverse.
    ``p``: one-sided, H1 "the candidate disagrees with the baseline more often than the
    baseline with itself"."""

    n_rows: int
    ab_rate: float
    aa_rate: float
    ab_only: int
    aa_only: int
    p: float
    test: str


def discordance_excess(ab: np.ndarray, aa: np.ndarray,
                       clusters: np.ndarray | None = None) -> DiscordanceExcess:
    """``ab[i]``, ``aa[i]``: whether row i differs between A and B, and between A and
    A'; ``clusters[i]`` numbers row i's item (None: one row per item)."""
    x = np.asarray(ab, dtype=bool)
    y = np.asarray(aa, dtype=bool)
    if x.shape != y.shape or x.size == 0:
        raise ValueError("discordance_excess: the two indicators must be non-empty and aligned")
    ab_only, aa_only = int(np.sum(x & ~y)), int(np.sum(~x & y))
    repeated = clusters is not None and len(np.unique(clusters)) < x.size
    if not repeated:
        p = float(exact_worse_p(ab_only, aa_only))
        test = "exact McNemar (one-sided) on the rows where exactly one pair disagrees"
    else:
        d = x.astype(np.float64) - y.astype(np.float64)
        se = clustered_se(d, np.asarray(clusters))
        if se == 0.0:
            p = 0.5 if d.mean() == 0 else (0.0 if d.mean() > 0 else 1.0)
        else:
            p = float(stats.norm.sf(d.mean() / se))
        test = "one-sided z of the mean A/B - A/A discordance, SE clustered by item"
    return DiscordanceExcess(n_rows=int(x.size), ab_rate=float(x.mean()),
                             aa_rate=float(y.mean()), ab_only=ab_only, aa_only=aa_only,
                             p=p if math.isfinite(p) else 1.0, test=test)
