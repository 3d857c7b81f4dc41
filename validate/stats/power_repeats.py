"""Power and sample size for the gate's clustered path: tasks run with repeats.

With ``repeats = r`` (GPQA's 4 in the README's plan) every item has r rows, and the gate
tests the mean per-row difference d = B - A with a Wald z whose SE is clustered by item
(``validate.gate.evidence.ClusteredEvidence``). Rows of one item are correlated; with
the within-item correlation rho of d (the intraclass correlation of the per-row
differences) the variance of an item's mean difference is Var(d) (1 + (r - 1) rho) / r,
so the clustered SE over n items is

    SE = sqrt((D - delta^2) (1 + (r - 1) rho) / (n r)),

D being the per-row discordance (Var(d) = D - delta^2 for d in {-1, 0, 1}), and
1 + (r - 1) rho the design effect: rho = 0 (rows independent, e.g. sampling noise
alone) gives the power of n r unrepeated items, rho = 1 (every repeat answers alike,
greedy decoding) that of n items. The gate PASSes when (delta_hat + M) / SE >= z_{1-alpha},
so

    power = Phi((delta + M) / SE - z_{1-alpha}),
    n = (z_{1-alpha} + z_power)^2 (D - delta^2) (1 + (r - 1) rho) / (r (delta + M)^2).

rho comes from the user (``v41val plan --rho``) or from a pilot with repeats
(``within_item_correlation``: the design effect observed as (clustered SE / row SE)^2).
``tests/validate/test_plan_family.py`` checks the power against simulated runs gated by
``evaluate_gate``.
"""

from __future__ import annotations

import math

from validate.errors import StatsInputError
from validate.stats import distributions as stats  # scipy.stats' values, not its import cost
from validate.stats.outcomes import PairedOutcomes
from validate.stats.proportions import clt_se, clustered_se


def check_repeats(repeats: int, rho: float) -> None:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise StatsInputError(f"--repeats: expected a whole number >= 1, got {repeats}")
    if not 0.0 <= rho <= 1.0:
        raise StatsInputError(
            f"--rho: expected the within-item correlation in [0, 1], got {rho}")


def design_effect(repeats: int, rho: float) -> float:
    """1 + (r - 1) rho: how much a repeated item's mean varies beyond r independent rows."""
    check_repeats(repeats, rho)
    return 1.0 + (repeats - 1) * rho


def clustered_se_model(n: int, repeats: int, rho: float, discordance: float,
                       true_delta: float = 0.0) -> float:
    """The SE the gate's clustered path will see at n items (module doc)."""
    var = max(discordance - true_delta**2, 0.0)
    return math.sqrt(var * design_effect(repeats, rho) / (n * repeats))


def clustered_power(n: int, repeats: int, rho: float, discordance: float, margin: float,
                    alpha: float, true_delta: float = 0.0) -> float:
    """P(PASS) of the clustered Wald test at n items (normal approximation)."""
    se = clustered_se_model(n, repeats, rho, discordance, true_delta)
    if se == 0.0:
        return 1.0 if true_delta + margin > 0 else 0.0
    return float(stats.norm.cdf((true_delta + margin) / se - stats.norm.ppf(1.0 - alpha)))


def clustered_sample_size(repeats: int, rho: float, discordance: float, margin: float,
                          alpha: float, power: float, true_delta: float = 0.0) -> int | None:
    """Items (each with ``repeats`` rows) for the clustered gate to PASS with ``power``;
    None when the true delta is at or below -margin."""
    if true_delta + margin <= 0:
        return None
    factor = stats.norm.ppf(1.0 - alpha) + stats.norm.ppf(power)
    per_item = max(discordance - true_delta**2, 0.0) * design_effect(repeats, rho) / repeats
    return max(1, math.ceil(factor**2 * per_item / (true_delta + margin) ** 2))


def clustered_mde(n: int, repeats: int, rho: float, discordance: float, alpha: float,
                  power: float, true_delta: float = 0.0) -> float:
    """Smallest margin certified with ``power`` at n items: (z_a + z_p) SE - delta."""
    factor = stats.norm.ppf(1.0 - alpha) + stats.norm.ppf(power)
    se = clustered_se_model(n, repeats, rho, discordance, true_delta)
    return float(max(0.0, factor * se - true_delta))


def within_item_correlation(paired: PairedOutcomes) -> float:
    """rho of a pilot with repeats, from its design effect: (clustered SE / row SE)^2 =
    1 + (r - 1) rho with r the mean rows per item; clipped to [0, 1] (a negative
    estimate is noise around rows that vary independently). 0 without variation."""
    if not paired.has_repeats:
        raise StatsInputError("a within-item correlation needs a pilot with repeats")
    d = paired.b - paired.a
    row_se = clt_se(d)
    if not row_se > 0.0:
        return 0.0
    deff = (clustered_se(d, paired.clusters) / row_se) ** 2
    r = paired.n_rows / paired.n_items
    return float(min(max((deff - 1.0) / (r - 1.0), 0.0), 1.0))
