"""``plan``: how many items a non-inferiority gate needs, and what a full task can show.

Inputs are the gate's own parameters (margin, alpha, power) plus the per-item
discordance rate D between the two variants, either assumed (``--discordance``) or
measured on an A/A run (two runs of the *same* configuration: batching makes greedy
decoding nondeterministic, so D is never 0 on real engines and is the noise floor an
A/B discordance has to be compared with). Formulas: ``validate.stats.power``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from validate.stats._checks import check_alpha, check_power, check_rate, points
from validate.stats.outcomes import PairedOutcomes
from validate.stats.paired import discordance_table
from validate.stats.power import (
    difference_mde,
    noninferiority_mde,
    noninferiority_power,
    noninferiority_power_exact,
    noninferiority_sample_size,
)


@dataclass(frozen=True)
class PowerPlan:
    task: str
    n_full: int
    margin: float
    discordance: float
    alpha: float
    power: float
    true_delta: float
    n_needed: int | None
    power_at_full: float  # exact, by enumeration of the paired table
    power_at_full_normal: float  # the normal-approximation formula
    mde_margin_at_full: float
    mde_difference_at_full: float
    discordance_source: str  # "assumed" or "A/A run: <labels>, n=<items>"

    @property
    def test(self) -> str:
        return (
            "one-sided non-inferiority, Tango score test on paired 0/1 outcomes "
            "(normal-approximation power)"
        )

    @property
    def fits(self) -> bool:
        return self.n_needed is not None and self.n_needed <= self.n_full

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(test=self.test, fits=self.fits)
        return out

    def report(self) -> str:
        need = "never (true delta at or below -margin)" if self.n_needed is None else (
            f"{self.n_needed} items" + ("" if self.fits else f" (> the {self.n_full} available)")
        )
        return "\n".join(
            [
                f"plan {self.task}: margin {points(self.margin)} pts, alpha={self.alpha} "
                f"(one-sided), power {self.power}, discordance {points(self.discordance)} % "
                f"({self.discordance_source}), assumed true delta {points(self.true_delta)} pts",
                f"  n needed: {need}",
                f"  at the full size n={self.n_full}: power {self.power_at_full:.3f} exact "
                f"({self.power_at_full_normal:.3f} normal approx.); "
                f"smallest certifiable margin (MDE) {points(self.mde_margin_at_full)} pts; "
                f"two-sided difference MDE {points(self.mde_difference_at_full)} pts",
                f"  test: {self.test}",
            ]
        )


def plan_noninferiority(
    task: str,
    n_full: int,
    margin: float,
    discordance: float,
    alpha: float = 0.05,
    power: float = 0.8,
    true_delta: float = 0.0,
    discordance_source: str = "assumed",
) -> PowerPlan:
    """All rates and the margin as fractions (1 point = 0.01)."""
    check_alpha(alpha)
    check_power(power)
    check_rate(discordance, "discordance")
    return PowerPlan(
        task=task, n_full=n_full, margin=margin, discordance=discordance, alpha=alpha,
        power=power, true_delta=true_delta,
        n_needed=noninferiority_sample_size(discordance, margin, alpha, power, true_delta),
        power_at_full=noninferiority_power_exact(n_full, discordance, margin, alpha, true_delta),
        power_at_full_normal=noninferiority_power(n_full, discordance, margin, alpha, true_delta),
        mde_margin_at_full=noninferiority_mde(n_full, discordance, alpha, power, true_delta),
        mde_difference_at_full=difference_mde(n_full, discordance, alpha, power),
        discordance_source=discordance_source,
    )


def observed_discordance(paired: PairedOutcomes) -> float:
    """Share of rows where two runs disagree (0/1 outcomes)."""
    table = discordance_table(paired.a, paired.b)
    return table.discordant / table.n


def plan_from_aa(
    paired: PairedOutcomes, n_full: int, margin: float, alpha: float = 0.05,
    power: float = 0.8,
) -> PowerPlan:
    """Plan with the discordance of an observed A/A run (true delta 0)."""
    rate = observed_discordance(paired)
    source = f"A/A run {paired.label_a} vs {paired.label_b}, n={paired.n_items}"
    return plan_noninferiority(
        paired.task, n_full, margin, rate, alpha, power, 0.0, discordance_source=source
    )
