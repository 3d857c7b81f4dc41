"""Paired comparison of two variants' 0/1 outcomes on the same items.

delta = mean(B) - mean(A) (negative: the candidate B is worse), in accuracy points in
reports. With one row per item:
- paired SE = SD(d, n-1) / sqrt(n), d_i = B_i - A_i (for 0/1 scores,
  Var(d) = ((b + c) - (c - b)^2 / n) / (n - 1));
- normal CI delta -/+ z_{1-alpha/2} SE;
- the 2x2 table: b = A right / B wrong, c = A wrong / B right;
- exact McNemar p and mid-p (two-sided);
- Tango's score interval (the gate's test; see ``score_interval``);
- the Pearson correlation of the two variants' outcomes (the "free" variance reduction
  of pairing: Var(d) = Var A + Var B - 2 Cov);
- MDE (two-sided, at this n and the observed discordance).
With repeats (several rows per item), the SE is clustered by item, McNemar and the
score interval are not reported (their rows would not be independent), and the
bootstrap resamples whole items.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from validate.errors import StatsInputError
from validate.stats import distributions as stats  # scipy.stats' values, not its import cost
from validate.stats._checks import check_alpha, check_power, points
from validate.stats.bootstrap import BootstrapSpec, paired_bootstrap_interval
from validate.stats.mcnemar import exact_mcnemar_p, mid_p_mcnemar
from validate.stats.outcomes import PairedOutcomes
from validate.stats.power import clustered_difference_mde, difference_mde
from validate.stats.proportions import clt_se, clustered_se
from validate.stats.score_interval import p_less, score_bounds


@dataclass(frozen=True)
class DiscordanceTable:
    """Counts of the paired 2x2 table (rows summed over repeats when repeated)."""

    both_right: int
    a_only: int  # b: A right, B wrong
    b_only: int  # c: A wrong, B right
    both_wrong: int

    @property
    def n(self) -> int:
        return self.both_right + self.a_only + self.b_only + self.both_wrong

    @property
    def discordant(self) -> int:
        return self.a_only + self.b_only


@dataclass(frozen=True)
class PairedComparison:
    """Everything a report needs about B vs A on one (task, metric)."""

    task: str
    metric: str
    label_a: str
    label_b: str
    n_items: int
    n_rows: int
    repeated: bool
    mean_a: float
    mean_b: float
    delta: float
    se_paired: float
    se_unpaired: float
    ci_normal: tuple[float, float]
    ci_bootstrap: tuple[float, float]
    ci_score: tuple[float, float] | None  # Tango, two-sided 1 - alpha; None if repeated
    table: DiscordanceTable
    mcnemar_p: float | None
    mcnemar_mid_p: float | None
    p_worse: float | None  # one-sided score (McNemar z) p of "B worse than A"; the gate's WARN test
    correlation: float
    discordance_rate: float
    mde: float
    alpha: float
    power: float
    bootstrap: BootstrapSpec

    @property
    def test(self) -> str:
        if self.repeated:
            return "paired difference, SE clustered by item; item-level paired bootstrap"
        return "exact McNemar (two-sided) and mid-p; Tango score CI; paired bootstrap"

    def report(self) -> str:
        level = round(100 * (1 - self.alpha))
        t = self.table
        lines = [
            f"{self.task}/{self.metric}: {self.label_b} vs {self.label_a}, "
            f"n={self.n_items} items ({self.n_rows} rows), alpha={self.alpha}",
            f"  accuracy A {points(self.mean_a)}, B {points(self.mean_b)}; "
            f"delta (B-A) {points(self.delta)} ± {points(self.se_paired)} pts paired "
            f"(unpaired SE would be {points(self.se_unpaired)})",
            f"  {level}% CI normal [{points(self.ci_normal[0])}, {points(self.ci_normal[1])}], "
            f"bootstrap [{points(self.ci_bootstrap[0])}, {points(self.ci_bootstrap[1])}]"
            + (
                f", score [{points(self.ci_score[0])}, {points(self.ci_score[1])}]"
                if self.ci_score is not None
                else ""
            ),
            f"  discordance: A-only right (b) {t.a_only}, B-only right (c) {t.b_only}, "
            f"rate {points(self.discordance_rate)} %; correlation {self.correlation:.3f}",
        ]
        if self.mcnemar_p is not None:
            lines.append(
                f"  McNemar exact p {self.mcnemar_p:.4g}, mid-p {self.mcnemar_mid_p:.4g}; "
                f"one-sided 'B worse' score p {self.p_worse:.4g}"
            )
        lines.append(
            f"  margin: none (comparison only); MDE {points(self.mde)} pts "
            f"(two-sided alpha={self.alpha}, power {self.power}); "
            f"bootstrap {self.bootstrap.replicates} replicates, seed {self.bootstrap.seed}"
        )
        lines.append(f"  test: {self.test}")
        return "\n".join(lines)


def discordance_table(a: np.ndarray, b: np.ndarray) -> DiscordanceTable:
    a_right = a == 1.0
    b_right = b == 1.0
    return DiscordanceTable(
        both_right=int(np.sum(a_right & b_right)),
        a_only=int(np.sum(a_right & ~b_right)),
        b_only=int(np.sum(~a_right & b_right)),
        both_wrong=int(np.sum(~a_right & ~b_right)),
    )


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    if np.std(a) == 0.0 or np.std(b) == 0.0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def compare_binary(
    paired: PairedOutcomes,
    alpha: float = 0.05,
    power: float = 0.8,
    bootstrap: BootstrapSpec | None = None,
) -> PairedComparison:
    """Paired statistics of B vs A for 0/1 outcomes (see module doc)."""
    check_alpha(alpha)
    check_power(power)
    bootstrap = bootstrap or BootstrapSpec()
    if not paired.is_binary:
        raise StatsInputError(
            f"{paired.task}/{paired.metric}: outcomes are not all 0/1; "
            "use compare_continuous for graded scores"
        )
    a, b = paired.a, paired.b
    n_rows, n_items = paired.n_rows, paired.n_items
    repeated = paired.has_repeats
    d = b - a  # (rows,)
    delta = float(d.mean())
    if repeated:
        se = clustered_se(d, paired.clusters)
        se_unpaired = math.sqrt(
            clustered_se(a, paired.clusters) ** 2 + clustered_se(b, paired.clusters) ** 2
        )
    else:
        se = clt_se(d)
        se_unpaired = math.sqrt(clt_se(a) ** 2 + clt_se(b) ** 2)
    z = stats.norm.ppf(1.0 - alpha / 2.0)
    table = discordance_table(a, b)
    rate = table.discordant / n_rows
    ci_boot = paired_bootstrap_interval(
        a, b, paired.clusters, lambda ma, mb: mb - ma, alpha, bootstrap
    )
    if repeated:
        ci_score, p_exact, p_mid, p_worse = None, None, None, None
        mde = clustered_difference_mde(se, alpha, power)
    else:
        lo, hi = score_bounds(table.a_only, table.b_only, n_rows, alpha / 2.0)
        ci_score = (float(lo), float(hi))
        p_exact = exact_mcnemar_p(table.a_only, table.b_only)
        p_mid = mid_p_mcnemar(table.a_only, table.b_only)
        p_worse = float(p_less(table.a_only, table.b_only, n_rows, 0.0))
        # With no discordant pair the observed rate is 0 and so would the MDE be;
        # floor it at one discordant item, the least the data can resolve.
        mde = difference_mde(n_items, max(rate, 1.0 / n_rows), alpha, power)
    return PairedComparison(
        task=paired.task, metric=paired.metric, label_a=paired.label_a,
        label_b=paired.label_b, n_items=n_items, n_rows=n_rows, repeated=repeated,
        mean_a=float(a.mean()), mean_b=float(b.mean()), delta=delta, se_paired=se,
        se_unpaired=se_unpaired, ci_normal=(delta - z * se, delta + z * se),
        ci_bootstrap=ci_boot, ci_score=ci_score, table=table, mcnemar_p=p_exact,
        mcnemar_mid_p=p_mid, p_worse=p_worse, correlation=_correlation(a, b), discordance_rate=rate,
        mde=mde, alpha=alpha, power=power, bootstrap=bootstrap,
    )
