"""Power and sample size for the gate's clustered path: tasks run with repeats.

With ``repeats = r`` (GPQA's 4 in the README's plan) every item has r rows, and the gate
runs the score test on the row counts with its variance multiplied by a design effect
estimated from the data (``validate.gate.evidence``). Rows of one item are correlated;
with the within-item correlation rho of the per-row difference d = B - A (the
intraclass correlation), the variance of an item's mean difference is
Var(d) (1 + (r - 1) rho) / r: the true design effect is 1 + (r - 1) rho.

The gate's estimate is not that number: it carries a prior worth one discordant row at
the least favourable value r, deff = (S + r) / (K + 1), with S and K the clustered and
the independent sums of squares of d (``validate.gate.evidence``). With K the expected
number of discordant rows, n r (D - delta^2), the gate's design effect is modelled as

    deff_gate = ((1 + (r - 1) rho) K + r) / (K + 1)

and n items of r rows are worth n_eff = n r / deff_gate unrepeated items: rho = 0
(rows independent, e.g. sampling noise alone) gives close to n r when many rows are
discordant, rho = 1 (every repeat answers alike, greedy decoding) exactly n. The
gate's statistic is the unrepeated score statistic at n_eff, so its power, sample size
and MDE are the unrepeated formulas (``validate.stats.power``) at n_eff, with D the
per-row discordance: the power by exact enumeration at n_eff rounded (and by the normal
formula), the items needed by solving n r / deff_gate(n) >= the rows the normal formula
needs.

rho comes from the user (``v41val plan --rho``) or from a pilot with repeats
(``within_item_correlation``: the design effect observed as (clustered SE / row SE)^2).
``tests/validate/test_plan_family.py`` checks the power against simulated runs gated by
``evaluate_gate``: within 3 points where about 12 or more discordant rows are expected;
below that (50 items x 4 at 3 % discordance, 6 rows) the prior's effect varies from run
to run more than one expected value can say, and plan was up to 9 points high.
"""

from __future__ import annotations

import math

from validate.errors import StatsInputError
from validate.stats.outcomes import PairedOutcomes
from validate.stats.power import (
    noninferiority_mde,
    noninferiority_power,
    noninferiority_power_exact,
    noninferiority_sample_size,
)
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


def expected_discordant_rows(n: int, repeats: int, discordance: float,
                             true_delta: float = 0.0) -> float:
    """K, the independent sum of squares of d the gate will see on average:
    n r (D - delta^2)."""
    return max(n * repeats * (discordance - true_delta * true_delta), 0.0)


def gate_design_effect(n: int, repeats: int, rho: float, discordance: float,
                       true_delta: float = 0.0) -> float:
    """The design effect the gate is expected to use at n items: the true one, with the
    prior of one discordant row at r (module doc)."""
    k = expected_discordant_rows(n, repeats, discordance, true_delta)
    return (design_effect(repeats, rho) * k + repeats) / (k + 1.0)


def effective_n(n: int, repeats: int, rho: float, discordance: float,
                true_delta: float = 0.0) -> float:
    """n items of ``repeats`` rows as unrepeated items: n r / the gate's design effect."""
    return n * repeats / gate_design_effect(n, repeats, rho, discordance, true_delta)


def effective_items(n: int, repeats: int, rho: float, discordance: float,
                    true_delta: float = 0.0) -> int:
    """``effective_n`` rounded to whole items, for the exact enumeration."""
    return max(1, round(effective_n(n, repeats, rho, discordance, true_delta)))


def clustered_power(n: int, repeats: int, rho: float, discordance: float, margin: float,
                    alpha: float, true_delta: float = 0.0) -> float:
    """P(PASS) of the gate's clustered test at n items: the exact score-test power at
    the effective n (rounded; tests/validate/test_plan_family.py)."""
    return noninferiority_power_exact(
        effective_items(n, repeats, rho, discordance, true_delta), discordance, margin,
        alpha, true_delta, edge=False)


def clustered_power_normal(n: int, repeats: int, rho: float, discordance: float,
                           margin: float, alpha: float, true_delta: float = 0.0) -> float:
    """The same by the normal approximation at the (unrounded) effective n."""
    return noninferiority_power(effective_n(n, repeats, rho, discordance, true_delta),
                                discordance, margin, alpha, true_delta)


def clustered_sample_size(repeats: int, rho: float, discordance: float, margin: float,
                          alpha: float, power: float, true_delta: float = 0.0) -> int | None:
    """Items (each with ``repeats`` rows) for the clustered gate to PASS with ``power``;
    None when the true delta is at or below -margin. Solves x (x D' + 1) = R (deff x D'
    + r) for the rows x = n r, with R the unrepeated rows needed and D' = D - delta^2:
    n r / deff_gate(n) = R (module doc)."""
    rows = noninferiority_sample_size(discordance, margin, alpha, power, true_delta)
    if rows is None:
        return None
    d = max(discordance - true_delta * true_delta, 0.0)
    deff = design_effect(repeats, rho)
    if d == 0.0:
        return max(1, rows)  # no discordant row to estimate with: the prior's r, items alone
    linear = 1.0 - rows * deff * d
    x = (-linear + math.sqrt(linear * linear + 4.0 * d * rows * repeats)) / (2.0 * d)
    return max(1, math.ceil(x / repeats - 1e-9))


def clustered_mde(n: int, repeats: int, rho: float, discordance: float, alpha: float,
                  power: float, true_delta: float = 0.0) -> float:
    """Smallest margin the clustered gate certifies with ``power`` at n items."""
    return noninferiority_mde(effective_n(n, repeats, rho, discordance, true_delta),
                              discordance, alpha, power, true_delta)


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
