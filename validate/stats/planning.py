"""``plan``: how many items a non-inferiority gate needs, and what a full task can show.

Inputs are the gate's own parameters (margin, alpha, power) plus the per-item
discordance rate D between the two variants, either assumed (``--discordance``) or
measured on an A/A run (two runs of the *same* configuration: batching makes greedy
decoding nondeterministic, so D is never 0 on real engines and is the noise floor an
A/B discordance has to be compared with). An observed D is floored at one discordant
item of the pilot (1 / n), as the gate floors it for its MDE: a pilot with no
disagreement shows that D is small, not that it is 0 (a one-item pilot gave power 1.0).

The family: the gate corrects all (optimization x task) claims of one decision together
(Holm by default), so a plan for one claim of a family of m sizes n at the per-claim
level alpha / m (``sizing_alpha``: Bonferroni's, which Holm's power is at least) and
prints the claim's power under the family's correction at the full size
(``validate.stats.family_power``). Repeats: a task run with ``repeats = r`` is gated
by the clustered path, so its plan uses the design effect 1 + (r - 1) rho
(``validate.stats.power_repeats``). Formulas: ``validate.stats.power``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from validate.errors import StatsInputError
from validate.stats._checks import check_alpha, check_power, check_rate, points
from validate.stats.family_power import ClaimModel, FamilyPower, family_power, sizing_alpha
from validate.stats.multiplicity import adjust
from validate.stats.outcomes import PairedOutcomes
from validate.stats.paired import discordance_table
from validate.stats.power import (
    difference_mde,
    noninferiority_mde,
    noninferiority_power,
    noninferiority_power_exact,
    noninferiority_sample_size,
)
from validate.stats.power_repeats import (
    check_repeats,
    clustered_mde,
    clustered_power,
    clustered_power_normal,
    clustered_sample_size,
    effective_n,
    within_item_correlation,
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
    n_needed: int | None  # at sized_alpha
    power_at_full: float  # alone at alpha: exact by enumeration (repeats: at the effective n)
    power_at_full_normal: float  # the normal-approximation formula, alone at alpha
    mde_margin_at_full: float  # at sized_alpha
    mde_difference_at_full: float
    discordance_source: str  # "assumed" or "A/A run: <labels>, n=<items>"
    family_size: int = 1
    correction: str = "none"
    sized_alpha: float = 0.0  # the per-claim level n_needed and the MDE are sized at
    power_at_full_family: float = 0.0  # this claim's PASS rate under the correction
    family_draws: int = 0  # Monte Carlo draws behind it (0: exact)
    repeats: int = 1
    rho: float = 0.0
    equivalence: bool = False  # the policy's TOST: PASS needs -margin < delta < +margin

    @property
    def test(self) -> str:
        if self.equivalence:
            rows = (f" at the effective n ({self.repeats} repeats, within-item correlation "
                    f"{self.rho:.3g})" if self.repeats > 1 else "")
            return ("equivalence (TOST): both one-sided Tango score tests on paired 0/1 "
                    f"outcomes{rows}; power and n exact by enumeration, the MDE of the "
                    "non-inferiority side")
        if self.repeats > 1:
            return (f"one-sided non-inferiority, Tango score test on the rows with the "
                    f"variance times the design effect ({self.repeats} repeats, within-item "
                    f"correlation {self.rho:.3g}; normal-approximation power)")
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

    def _family_line(self) -> str:
        if self.family_size == 1:
            return "  family: this claim alone (no correction)"
        how = (f"Monte Carlo, {self.family_draws} draws, claims independent"
               if self.family_draws else "exact")
        sized = ("alpha (no correction)" if self.correction == "none" else
                 f"alpha/{self.family_size} = {self.sized_alpha:.4g} (Bonferroni; "
                 f"{self.correction} passes at least as often)")
        return (f"  family: {self.family_size} claims, {self.correction}; sized at {sized}; "
                f"power at n={self.n_full} under {self.correction} "
                f"{self.power_at_full_family:.3f} ({how})")

    def report(self) -> str:
        never = ("never (true delta outside +-margin, or beyond the search)" if self.equivalence
                 else "never (true delta at or below -margin)")
        need = never if self.n_needed is None else (
            f"{self.n_needed} items" + ("" if self.fits else f" (> the {self.n_full} available)")
        )
        alone = (f"exact{'' if self.repeats == 1 else ' at the effective n'} "
                 + ("(TOST)" if self.equivalence else
                    f"({self.power_at_full_normal:.3f} normal approx.)"))
        rows = f" x {self.repeats} repeats" if self.repeats > 1 else ""
        return "\n".join(
            [
                f"plan {self.task}: margin {points(self.margin)} pts, alpha={self.alpha} "
                f"(one-sided), power {self.power}, discordance {points(self.discordance)} % "
                f"({self.discordance_source}), assumed true delta {points(self.true_delta)} pts",
                self._family_line(),
                f"  n needed: {need}{rows} at alpha {self.sized_alpha:.4g}",
                f"  at the full size n={self.n_full}{rows}: power alone at alpha "
                f"{self.power_at_full:.3f} {alone}; "
                f"smallest certifiable margin (MDE) {points(self.mde_margin_at_full)} "
                f"pts at alpha {self.sized_alpha:.4g}; two-sided difference MDE "
                f"{points(self.mde_difference_at_full)} pts",
                f"  test: {self.test}",
            ]
        )


@dataclass(frozen=True)
class FamilyPlan:
    """Plans of every task of a policy, each one claim per optimization in one family."""

    plans: tuple[PowerPlan, ...]
    variants: int
    all_pass: float  # P(every claim of the family PASSes), claims independent
    mc_se: float

    def to_dict(self) -> dict:
        return {"variants": self.variants, "family_size": self.plans[0].family_size,
                "correction": self.plans[0].correction, "all_pass": self.all_pass,
                "mc_se": self.mc_se, "plans": [p.to_dict() for p in self.plans]}

    def report(self) -> str:
        head = (f"family: {self.variants} optimization(s) x {len(self.plans)} task(s) = "
                f"{self.plans[0].family_size} claims, {self.plans[0].correction}; "
                f"P(every claim PASSes at the full sizes) {self.all_pass:.3f} "
                f"(Monte Carlo SE {self.mc_se:.3f}, claims independent)")
        return "\n".join([head] + [p.report() for p in self.plans])


@dataclass(frozen=True)
class ClaimSpec:
    """One task of a plan: its name, full size, margin (a fraction) and repeats."""

    task: str
    n_full: int
    margin: float
    repeats: int = 1


def _check(discordance: float, alpha: float, power: float, family_size: int,
           correction: str, repeats: int, rho: float) -> None:
    check_alpha(alpha)
    check_power(power)
    check_rate(discordance, "discordance")
    check_repeats(repeats, rho)
    adjust([0.5], correction)  # an unknown correction is an error naming the choices
    if family_size < 1:
        raise StatsInputError(
            f"--claims: expected a whole number >= 1, got {family_size}")


def _one(spec: ClaimSpec, discordance: float, alpha: float, power: float,
         true_delta: float, source: str, family_size: int, correction: str,
         rho: float, family: FamilyPower, index: int, equivalence: bool = False) -> PowerPlan:
    level = sizing_alpha(alpha, family_size, correction)
    n, margin, repeats = spec.n_full, spec.margin, spec.repeats
    rho = rho if repeats > 1 else 0.0
    if repeats > 1:
        alone = clustered_power(n, repeats, rho, discordance, margin, alpha, true_delta)
        alone_normal = clustered_power_normal(n, repeats, rho, discordance, margin, alpha,
                                              true_delta)
        needed = clustered_sample_size(repeats, rho, discordance, margin, level, power,
                                       true_delta)
        mde = clustered_mde(n, repeats, rho, discordance, level, power, true_delta)
        difference = difference_mde(effective_n(n, repeats, rho, discordance, true_delta),
                                    discordance, alpha, power)
    else:
        alone = noninferiority_power_exact(n, discordance, margin, alpha, true_delta)
        alone_normal = noninferiority_power(n, discordance, margin, alpha, true_delta)
        needed = noninferiority_sample_size(discordance, margin, level, power, true_delta)
        mde = noninferiority_mde(n, discordance, level, power, true_delta)
        difference = difference_mde(n, discordance, alpha, power)
    if equivalence:  # power and n of both sides; the MDEs stay the non-inferiority side's
        model = ClaimModel(n, margin, discordance, true_delta, repeats, rho, equivalence=True)
        alone = alone_normal = model.exact_power(alpha)
        needed = _tost_sample_size(model, level, power)
    return PowerPlan(
        task=spec.task, n_full=n, margin=margin, discordance=discordance, alpha=alpha,
        power=power, true_delta=true_delta, n_needed=needed, power_at_full=alone,
        power_at_full_normal=alone_normal, mde_margin_at_full=mde,
        mde_difference_at_full=difference,
        discordance_source=source, family_size=family_size, correction=correction,
        sized_alpha=level, power_at_full_family=family.per_claim[index],
        family_draws=family.draws, repeats=repeats, rho=rho, equivalence=equivalence,
    )


TOST_MAX_ITEMS = 1_000_000  # the search for an equivalence n stops here ("never")


def _tost_sample_size(model: ClaimModel, level: float, power: float) -> int | None:
    """Smallest n (items) whose exact TOST power at ``level`` reaches ``power``: doubling,
    then bisection (the exact power has a small sawtooth in n, so this is the first n the
    bisection lands on, within a few items of the smallest)."""
    def enough(n: int) -> bool:
        return replace(model, n=n).exact_power(level) >= power

    hi = 16
    while not enough(hi):
        if hi >= TOST_MAX_ITEMS:
            return None
        hi = min(2 * hi, TOST_MAX_ITEMS)
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def _family(specs: Sequence[ClaimSpec], variants: int, discordance: float, alpha: float,
            true_delta: float, correction: str, rho: float,
            equivalence: bool = False) -> FamilyPower:
    """The family's per-claim power: exact where no other claim matters (one claim,
    no correction, Bonferroni), else Monte Carlo over every claim."""
    size = variants * len(specs)
    if size == 1 or correction in ("none", "bonferroni"):
        level = sizing_alpha(alpha, size, correction)
        rates = []
        for spec in specs:
            model = ClaimModel(spec.n_full, spec.margin, discordance, true_delta,
                               spec.repeats, rho, equivalence)
            rates.append(_power_at(model, level))
        return FamilyPower(tuple(rates), float("nan"), correction, 0)
    claims = [ClaimModel(s.n_full, s.margin, discordance, true_delta, s.repeats, rho,
                         equivalence) for _ in range(variants) for s in specs]
    mc = family_power(claims, correction, alpha)
    per_task = [sum(mc.per_claim[v * len(specs) + i] for v in range(variants)) / variants
                for i in range(len(specs))]
    return FamilyPower(tuple(per_task), mc.all_pass, correction, mc.draws)


def _power_at(model: ClaimModel, level: float) -> float:
    if model.equivalence:
        return model.exact_power(level)
    if model.repeats > 1:
        return clustered_power(model.n, model.repeats, model.rho, model.discordance,
                               model.margin, level, model.true_delta)
    return noninferiority_power_exact(model.n, model.discordance, model.margin, level,
                                      model.true_delta)


def plan_family(specs: Sequence[ClaimSpec], discordance: float, alpha: float = 0.05,
                power: float = 0.8, true_delta: float = 0.0, variants: int = 1,
                correction: str = "holm", rho: float = 0.0,
                discordance_source: str = "assumed", equivalence: bool = False) -> FamilyPlan:
    """Plans for ``variants`` optimizations x ``specs`` tasks gated as one family
    (``equivalence``: the policy's TOST)."""
    size = variants * len(specs)
    for spec in specs:
        _check(discordance, alpha, power, size, correction, spec.repeats, rho)
    family = _family(specs, variants, discordance, alpha, true_delta, correction, rho,
                     equivalence)
    plans = tuple(_one(s, discordance, alpha, power, true_delta, discordance_source, size,
                       correction, rho, family, i, equivalence) for i, s in enumerate(specs))
    all_pass = family.all_pass
    if family.draws == 0:  # exact rates, independent claims
        all_pass = 1.0
        for rate in family.per_claim:
            all_pass *= rate**variants
    rates = [p.power_at_full_family for p in plans] + [all_pass]
    mc_se = 0.0 if family.draws == 0 else max(
        (r * (1 - r) / family.draws) ** 0.5 for r in rates)
    return FamilyPlan(plans, variants, all_pass, mc_se)


def plan_noninferiority(
    task: str,
    n_full: int,
    margin: float,
    discordance: float,
    alpha: float = 0.05,
    power: float = 0.8,
    true_delta: float = 0.0,
    discordance_source: str = "assumed",
    family_size: int = 1,
    correction: str = "holm",
    repeats: int = 1,
    rho: float = 0.0,
    equivalence: bool = False,
) -> PowerPlan:
    """One claim of a family of ``family_size`` alike claims (1: alone). All rates and
    the margin as fractions (1 point = 0.01); ``equivalence``: the gate's TOST."""
    _check(discordance, alpha, power, family_size, correction, repeats, rho)
    specs = [ClaimSpec(task, n_full, margin, repeats)]
    family = _family(specs, family_size, discordance, alpha, true_delta, correction, rho,
                     equivalence)
    return _one(specs[0], discordance, alpha, power, true_delta, discordance_source,
                family_size, correction if family_size > 1 else "none", rho, family, 0,
                equivalence)


def observed_discordance(paired: PairedOutcomes) -> float:
    """Share of rows where two runs disagree (0/1 outcomes)."""
    table = discordance_table(paired.a, paired.b)
    return table.discordant / table.n


def plan_from_aa(
    paired: PairedOutcomes, n_full: int, margin: float, alpha: float = 0.05,
    power: float = 0.8, family_size: int = 1, correction: str = "holm",
    repeats: int | None = None, rho: float | None = None,
) -> PowerPlan:
    """Plan with the discordance of an observed A/A run (true delta 0), floored at one
    discordant row of the pilot (module doc). A pilot with repeats also gives rho and,
    unless given, the repeats."""
    rate = observed_discordance(paired)
    floor = 1.0 / paired.n_rows
    source = f"A/A run {paired.label_a} vs {paired.label_b}, n={paired.n_items}"
    if rate < floor:
        source += f", no disagreement: floored at one item of {paired.n_rows}"
    if paired.has_repeats:
        rho = within_item_correlation(paired) if rho is None else rho
        repeats = round(paired.n_rows / paired.n_items) if repeats is None else repeats
        source += f", within-item correlation {rho:.3g}"
    return plan_noninferiority(
        paired.task, n_full, margin, max(rate, floor), alpha, power, 0.0,
        discordance_source=source, family_size=family_size, correction=correction,
        repeats=repeats or 1, rho=rho or 0.0,
    )
