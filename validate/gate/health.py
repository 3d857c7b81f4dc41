"""Health checks: is a run fit to be compared at all?

A broken run (missing items, a parser that stopped matching, empty outputs, a length
blow-up) is not "slightly worse", it is invalid, and its statistics mean nothing
(an accuracy of 0.0 in an accuracy CI is usually a broken run, not a regression).
The gate therefore checks health before any statistics and answers INVALID.

The three rate checks (invalid answers, empty outputs, answers cut at max_gen_toks) are
tests, so that INVALID scales with n instead of turning noise into "a broken run" (2
items of 100 once failed a fixed 1-point threshold). A rate check fails only when both

- the rise in the rate exceeds the policy's practical minimum (``max_*_rate_increase``,
  in rate points, the thresholds of v41val 0.1, unchanged), and
- the rise is significant: the one-sided exact McNemar test on the items flagged under
  one variant only (``b`` flagged in the candidate only, ``c`` in the baseline only;
  under "the candidate's rate is no higher" ``b ~ Binomial(b + c, 1/2)`` given ``b + c``)
  gives ``p = P[X >= b] <= alpha`` (``[health] alpha``, default 0.001).

So a check false-alarms with probability at most ``alpha`` when the candidate's rate
equals the baseline's, whatever n and the rates are (the conditional test is exact,
hence conservative; ``tests/validate/test_health_tests.py`` enumerates it), and a rise
below the practical minimum never fails however large n is. ``alpha = 1`` gives the
fixed thresholds alone. A report without item-level counts (rates only) is judged by
the fixed thresholds, as before.
Coverage and the length ratio stay fixed bounds: a missing item is not noise.

This module only *judges* a ``HealthReport``; ``validate.health`` measures one from
stored runs (``pair_health``) and ``validate.lmeval_samples.health_from_runs`` from
lm-eval sample files. Thresholds live in the policy (``[health]`` table).
"""

from __future__ import annotations

from dataclasses import dataclass

from validate.stats.mcnemar import exact_worse_p

DEFAULT_HEALTH_ALPHA = 0.001


@dataclass(frozen=True)
class HealthReport:
    """Measured health of a baseline (A) / candidate (B) pair on one task.

    Rates are fractions; None means "not measured" and is not checked.
    ``coverage`` is the share of the baseline's (item, repeat) rows the candidate has.
    ``length_ratio`` is mean output length of B over A (characters or tokens).
    ``*_discordant`` are the item-level counts of a rate check over the rows both
    variants have: (flagged in A only, flagged in B only); None when not known, and the
    check then uses its fixed threshold alone.
    """

    coverage: float = 1.0
    invalid_rate_a: float | None = None
    invalid_rate_b: float | None = None
    empty_rate_a: float | None = None
    empty_rate_b: float | None = None
    length_ratio: float | None = None
    source: str = ""
    truncated_rate_a: float | None = None  # share of outputs cut at max_gen_toks
    truncated_rate_b: float | None = None
    invalid_discordant: tuple[int, int] | None = None
    empty_discordant: tuple[int, int] | None = None
    truncated_discordant: tuple[int, int] | None = None


@dataclass(frozen=True)
class HealthThresholds:
    """When a pair is INVALID. Increases are absolute (candidate minus baseline) and are
    the practical minimum of each rate check; ``alpha`` is the false-alarm rate of each
    rate check's test (see the module doc)."""

    min_coverage: float = 1.0
    max_invalid_rate_increase: float = 0.02
    max_empty_rate_increase: float = 0.01
    max_length_ratio: float = 1.5
    min_length_ratio: float = 0.5
    max_truncated_rate_increase: float = 0.05
    alpha: float = DEFAULT_HEALTH_ALPHA


def _increase(base: float | None, cand: float | None) -> float | None:
    if base is None or cand is None:
        return None
    return cand - base


def rise_p(discordant: tuple[int, int] | None) -> float | None:
    """One-sided exact McNemar p of "the candidate is flagged more often" from
    (flagged in A only, flagged in B only); None without counts."""
    if discordant is None:
        return None
    only_a, only_b = discordant
    return float(exact_worse_p(only_b, only_a))


def rate_failure(label: str, base: float | None, cand: float | None, limit: float,
                 discordant: tuple[int, int] | None, alpha: float) -> str | None:
    """The reason a rate check fails, or None: the rise exceeds ``limit`` and, when the
    item-level counts are known, is significant at ``alpha``."""
    rise = _increase(base, cand)
    if rise is None or rise <= limit:
        return None
    p = rise_p(discordant)
    text = (f"{label} {100 * cand:.2f} % vs baseline {100 * base:.2f} % "
            f"(+{100 * rise:.2f} > {100 * limit:.2f} pts")
    if p is None:
        return text + "; no item-level counts, fixed threshold)"
    if p > alpha:
        return None
    only_a, only_b = discordant
    return text + (f"; {only_b} items flagged in the candidate only, {only_a} in the "
                   f"baseline only: one-sided exact p = {p:.2g} <= alpha {alpha:g})")


def health_failures(report: HealthReport, limits: HealthThresholds) -> tuple[str, ...]:
    """One short reason per failed check; empty when healthy."""
    reasons = []
    if report.coverage < limits.min_coverage:
        reasons.append(
            f"coverage {100 * report.coverage:.2f} % < {100 * limits.min_coverage:.2f} %"
        )
    rate_checks = (
        ("invalid-answer rate", report.invalid_rate_a, report.invalid_rate_b,
         limits.max_invalid_rate_increase, report.invalid_discordant),
        ("empty-output rate", report.empty_rate_a, report.empty_rate_b,
         limits.max_empty_rate_increase, report.empty_discordant),
        ("truncated at max_gen_toks", report.truncated_rate_a, report.truncated_rate_b,
         limits.max_truncated_rate_increase, report.truncated_discordant),
    )
    for label, base, cand, limit, discordant in rate_checks:
        reason = rate_failure(label, base, cand, limit, discordant, limits.alpha)
        if reason is not None:
            reasons.append(reason)
    ratio = report.length_ratio
    if ratio is not None and not limits.min_length_ratio <= ratio <= limits.max_length_ratio:
        reasons.append(
            f"output length ratio B/A {ratio:.3f} outside "
            f"[{limits.min_length_ratio}, {limits.max_length_ratio}]"
        )
    return tuple(reasons)
