"""Power of one claim inside the gate's family: Holm (or Bonferroni) over every
(optimization x task) claim.

The gate corrects all claims of one decision together (``validate.gate.verdict``), so
a claim that would PASS alone at alpha may not PASS in a family: 3 optimizations x 2
tasks at true delta 0 gave a per-claim PASS rate of 0.29 under Holm where the
single-claim power is 0.54 (issue 13). Bonferroni tests each of m claims at alpha / m,
so its power is the single-claim power at that level, exactly. Holm is uniformly more
powerful than Bonferroni and depends on the other claims' p-values, so its per-claim
power is computed by Monte Carlo: each claim's PASS p-value is drawn from its exact
distribution (the (b, c) tables of ``validate.stats.power.paired_table_distribution``
with the gate's score test; with repeats, at the effective n of
``validate.stats.power_repeats``), the draws of all claims are adjusted together with
the gate's own ``adjust``, and a claim passes when its adjusted p is at most alpha.

Assumption, stated in every plan: the claims are independent. Claims on different
tasks are; claims of several optimizations on one task share the baseline's outcomes,
which makes them slightly dependent when the optimizations change the same items (the
simulation through ``evaluate_family`` in tests/validate/test_plan_family.py uses a
shared baseline and independent changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from validate.stats.multiplicity import adjust
from validate.stats.power import paired_table_distribution
from validate.stats.power_repeats import effective_items
from validate.stats.score_interval import p_greater, p_less, pass_p_greater, pass_p_less

DRAWS = 20_000  # Monte Carlo SE of a per-claim rate at most 0.0035


@dataclass(frozen=True)
class ClaimModel:
    """One claim as the plan assumes it: n items, margin, per-row discordance and true
    delta (fractions), and the repeats with their within-item correlation."""

    n: int
    margin: float
    discordance: float
    true_delta: float = 0.0
    repeats: int = 1
    rho: float = 0.0
    equivalence: bool = False  # TOST: PASS also needs delta < +margin shown

    def pass_pvalues(self, b: np.ndarray, c: np.ndarray, n: int) -> np.ndarray:
        """The gate's PASS p-value of each (b, c) table: the non-inferiority score test,
        or with equivalence the larger of the two one-sided tests (``validate.gate.verdict``);
        the exact edge test joins them with one row per item, as in the gate."""
        above, below = (pass_p_greater, pass_p_less) if self.repeats == 1 else (p_greater, p_less)
        p = above(b, c, n, -self.margin)
        return np.maximum(p, below(b, c, n, self.margin)) if self.equivalence else p

    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(b, c, probability, n) of every table the claim can give (at the effective n
        with repeats)."""
        n = self.n if self.repeats == 1 else effective_items(
            self.n, self.repeats, self.rho, self.discordance, self.true_delta)
        b, c, weight = paired_table_distribution(n, self.discordance, self.true_delta)
        return b, c, weight, n

    def exact_power(self, level: float) -> float:
        """P(the PASS p-value <= level), summed over every table."""
        b, c, weight, n = self.tables()
        return float(weight[self.pass_pvalues(b, c, n) <= level].sum())

    def draw_pvalues(self, rng: np.random.Generator, draws: int) -> np.ndarray:
        """``draws`` PASS p-values from this claim's distribution under the model."""
        b, c, weight, n = self.tables()
        pick = rng.choice(b.size, size=draws, p=weight / weight.sum())
        return self.pass_pvalues(b[pick], c[pick], n)


@dataclass(frozen=True)
class FamilyPower:
    """Per-claim PASS rates under the correction, and P(every claim PASSes)."""

    per_claim: tuple[float, ...]
    all_pass: float
    correction: str
    draws: int

    @property
    def mc_se(self) -> float:
        """Largest Monte Carlo SE of the rates (0 when computed exactly)."""
        if self.draws == 0:
            return 0.0
        rates = np.asarray(self.per_claim + (self.all_pass,))
        return float(np.max(np.sqrt(rates * (1.0 - rates) / self.draws)))


def family_power(claims: Sequence[ClaimModel], correction: str, alpha: float,
                 draws: int = DRAWS, seed: int = 0) -> FamilyPower:
    """Monte Carlo power of each claim in the family (module doc); seeded, so a plan
    prints the same figures every time."""
    rng = np.random.default_rng(seed)
    pvalues = np.stack([claim.draw_pvalues(rng, draws) for claim in claims], axis=-1)
    passed = adjust(pvalues, correction) <= alpha  # (draws, claims)
    return FamilyPower(per_claim=tuple(float(x) for x in passed.mean(axis=0)),
                       all_pass=float(passed.all(axis=-1).mean()), correction=correction,
                       draws=draws)


def sizing_alpha(alpha: float, family_size: int, correction: str) -> float:
    """The per-claim level a plan sizes n at: alpha / m under Bonferroni and Holm (Holm
    rejects everything Bonferroni does, so n sized this way gives Holm at least the
    wanted power), alpha with no correction."""
    return alpha if correction == "none" else alpha / family_size
