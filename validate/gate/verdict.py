"""Per-task verdicts of the non-inferiority gate, decided jointly over the family.

For each (task, metric) with margin M (a fraction), delta = acc(B) - acc(A):
- PASS: H0 delta <= -M rejected at the family-corrected one-sided level, i.e. the
  one-sided lower bound of delta (at the level that claim was tested at) is above -M.
  With one row per item the score test is joined by the exact test at the null's
  never-better edge (``validate.stats.score_interval``: PASS's size there was up to
  0.069 without it), and the bound shown is the two tests' smaller.
- WARN: a PASS where the candidate is also significantly worse than the baseline
  (H0 delta >= 0 rejected at the unadjusted alpha): inside the margin, but not free.
  A flag on PASS; it passes.
- FAIL: H0 delta >= -M rejected at the corrected level, i.e. the upper bound is below
  -M: worse than the margin, and the data show it. The score test runs this claim
  with a continuity correction (its size at the boundary was up to 0.09 without;
  ``validate.stats.score_interval``), and the upper bound shown is that test's.
- INCONCLUSIVE: neither; the report gives the n that would decide at the observed
  delta and discordance with the policy's power.
- INVALID: health checks failed (or no outcomes); no statistics are trusted.
With ``equivalence`` (TOST), PASS also needs H0 delta >= +M rejected (p = max of the
two one-sided p-values), and a FAIL is also declared when delta is shown above +M
(the two one-sided FAIL p-values are Bonferroni-combined: 2 * min).

The family: every task that reached the statistics (not INVALID) is one hypothesis;
the PASS p-values are adjusted together (Holm/Bonferroni/none, as the policy says) and
so are the FAIL p-values. Bounds are reported at each claim's effective level
alpha * p / p_adj so that "bound clears the margin" and "adjusted p <= alpha" agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from validate.decisions import FAIL, INCONCLUSIVE, INVALID, PASS, PASSING, WARN
from validate.gate.evidence import ClusteredEvidence, ScoreEvidence
from validate.gate.policy import GatePolicy, TaskPolicy
from validate.stats._checks import points
from validate.stats.multiplicity import adjust, effective_alpha
from validate.stats.power import decisive_sample_size, noninferiority_mde

__all__ = ["FAIL", "INCONCLUSIVE", "INVALID", "PASS", "PASSING", "WARN", "TaskVerdict",
           "decide_family", "invalid_verdict"]


@dataclass(frozen=True)
class TaskVerdict:
    task: str
    metric: str
    tier: str
    verdict: str
    margin: float
    alpha: float
    correction: str
    test: str
    n_items: int = 0
    delta: float | None = None
    lower_bound: float | None = None
    upper_bound: float | None = None
    bound_alpha: float | None = None  # level of the lower bound (the PASS claim)
    upper_bound_alpha: float | None = None  # level of the upper bound (the FAIL claim)
    p_noninferior: float | None = None
    p_noninferior_adjusted: float | None = None
    p_fail: float | None = None
    p_fail_adjusted: float | None = None
    p_worse: float | None = None
    discordance: float | None = None
    mde: float | None = None
    n_to_decide: int | None = None
    equivalence: bool = False
    reasons: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.verdict in PASSING

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {
            "margin_points": 100 * self.margin
        }

    def report(self) -> str:
        head = (
            f"{self.verdict:<12} {self.task}/{self.metric} [{self.tier}] margin "
            f"{points(self.margin)} pts, alpha={self.alpha} one-sided ({self.correction})"
        )
        if self.verdict == INVALID:
            return head + "; " + "; ".join(self.reasons)
        body = (
            f"; n={self.n_items}, delta {points(self.delta)} pts, one-sided bounds: lower "
            f"{points(self.lower_bound)} (alpha {self.bound_alpha:.4g}), upper "
            f"{points(self.upper_bound)} (alpha {self.upper_bound_alpha:.4g}); "
            f"p(NI) {self.p_noninferior:.4g} "
            f"(adj {self.p_noninferior_adjusted:.4g}), p(worse) {self.p_worse:.4g}; "
            f"MDE {points(self.mde)} pts; test: {self.test}"
        )
        if self.verdict == INCONCLUSIVE:
            body += "; n to decide: " + (
                "none (delta sits on the margin)" if self.n_to_decide is None
                else str(self.n_to_decide)
            )
        return head + body


def invalid_verdict(tp: TaskPolicy, policy: GatePolicy, reasons, metric: str = "") -> TaskVerdict:
    return TaskVerdict(
        task=tp.task, metric=metric or (tp.metric or ""), tier=tp.tier, verdict=INVALID,
        margin=tp.margin, alpha=policy.alpha, correction=policy.correction,
        test="health checks", equivalence=policy.equivalence, reasons=tuple(reasons),
    )


def _claim_pvalues(ev, margin: float, equivalence: bool) -> tuple[float, float]:
    """(p for PASS, p for FAIL) of one task; the FAIL claim's test is the evidence's
    ``fail_*`` one (continuity-corrected for the score test, so that FAIL at the
    boundary holds its size like PASS does: ``validate.stats.score_interval``)."""
    p_ni = ev.pass_p_greater(-margin)
    p_fail = ev.fail_p_less(-margin)
    if equivalence:
        p_ni = max(p_ni, ev.pass_p_less(margin))
        p_fail = min(1.0, 2.0 * min(p_fail, ev.fail_p_greater(margin)))
    return p_ni, p_fail


def _n_to_decide(ev, margin: float, alpha: float, power: float) -> int | None:
    """Items for a verdict at the observed delta and discordance; with repeats, the
    rows the score test needs times the design effect, per item's rows."""
    rows = decisive_sample_size(ev.discordance, margin, alpha, power, ev.delta)
    if rows is None or not isinstance(ev, ClusteredEvidence):
        return rows
    return int(np.ceil(rows * ev.design_effect * ev.n_items / ev.n_rows))


def _mde(ev, alpha: float, power: float) -> float:
    """Smallest margin this n certifies with ``power`` when the truth is delta = 0
    (at the effective n: rows / design effect; the discordance floored at one row)."""
    return noninferiority_mde(ev.n_effective, max(ev.discordance, 1.0 / ev.n), alpha, power)


def decide_family(
    policy: GatePolicy, tested: list[tuple[TaskPolicy, str, ScoreEvidence | ClusteredEvidence]]
) -> list[TaskVerdict]:
    """Verdicts for the tasks that reached the statistics, adjusted as one family."""
    if not tested:
        return []
    alpha = policy.alpha
    claims = [_claim_pvalues(ev, tp.margin, policy.equivalence) for tp, _, ev in tested]
    p_pass = np.array([c[0] for c in claims])
    p_fail = np.array([c[1] for c in claims])
    p_pass_adj = adjust(p_pass, policy.correction)
    p_fail_adj = adjust(p_fail, policy.correction)
    alpha_pass = effective_alpha(alpha, p_pass, p_pass_adj)
    alpha_fail = effective_alpha(alpha, p_fail, p_fail_adj)
    out = []
    for i, (tp, metric, ev) in enumerate(tested):
        upper_alpha = float(alpha_pass[i] if policy.equivalence else alpha_fail[i])
        lower = ev.pass_lower(float(alpha_pass[i]))
        upper = ev.pass_upper(upper_alpha) if policy.equivalence else ev.fail_upper(upper_alpha)
        p_worse = ev.p_less(0.0)
        n_decide = None
        if p_pass_adj[i] <= alpha:
            verdict = WARN if p_worse <= alpha else PASS
        elif p_fail_adj[i] <= alpha:
            verdict = FAIL
        else:
            verdict = INCONCLUSIVE
            n_decide = _n_to_decide(ev, tp.margin, float(alpha_pass[i]), policy.power)
        out.append(
            TaskVerdict(
                task=tp.task, metric=metric, tier=tp.tier, verdict=verdict, margin=tp.margin,
                alpha=alpha, correction=policy.correction, test=ev.name,
                n_items=ev.n_items, delta=ev.delta, lower_bound=lower, upper_bound=upper,
                bound_alpha=float(alpha_pass[i]), upper_bound_alpha=upper_alpha,
                p_noninferior=float(p_pass[i]),
                p_noninferior_adjusted=float(p_pass_adj[i]), p_fail=float(p_fail[i]),
                p_fail_adjusted=float(p_fail_adj[i]), p_worse=float(p_worse),
                discordance=ev.discordance, mde=_mde(ev, alpha, policy.power),
                n_to_decide=n_decide, equivalence=policy.equivalence,
            )
        )
    return out
