"""Health checks: is a run fit to be compared at all?

A broken run (missing items, a parser that stopped matching, empty outputs, a length
blow-up) is not "slightly worse", it is invalid, and its statistics mean nothing
(an accuracy of 0.0 in an accuracy CI is usually a broken run, not a regression).
The gate therefore checks health before any statistics and answers INVALID.

This module only *judges* a ``HealthReport``; ``validate.health`` measures one from
stored runs (``pair_health``) and ``validate.lmeval_samples.health_from_runs`` from
lm-eval sample files. Thresholds live in the policy (``[health]`` table).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HealthReport:
    """Measured health of a baseline (A) / candidate (B) pair on one task.

    Rates are fractions; None means "not measured" and is not checked.
    ``coverage`` is the share of the baseline's (item, repeat) rows the candidate has.
    ``length_ratio`` is mean output length of B over A (characters or tokens).
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


@dataclass(frozen=True)
class HealthThresholds:
    """When a pair is INVALID. Increases are absolute (candidate minus baseline)."""

    min_coverage: float = 1.0
    max_invalid_rate_increase: float = 0.02
    max_empty_rate_increase: float = 0.01
    max_length_ratio: float = 1.5
    min_length_ratio: float = 0.5
    max_truncated_rate_increase: float = 0.05


def _increase(base: float | None, cand: float | None) -> float | None:
    if base is None or cand is None:
        return None
    return cand - base


def health_failures(report: HealthReport, limits: HealthThresholds) -> tuple[str, ...]:
    """One short reason per failed check; empty when healthy."""
    reasons = []
    if report.coverage < limits.min_coverage:
        reasons.append(
            f"coverage {100 * report.coverage:.2f} % < {100 * limits.min_coverage:.2f} %"
        )
    rate_checks = (
        ("invalid-answer rate", report.invalid_rate_a, report.invalid_rate_b,
         limits.max_invalid_rate_increase),
        ("empty-output rate", report.empty_rate_a, report.empty_rate_b,
         limits.max_empty_rate_increase),
        ("truncated at max_gen_toks", report.truncated_rate_a, report.truncated_rate_b,
         limits.max_truncated_rate_increase),
    )
    for label, base, cand, limit in rate_checks:
        rise = _increase(base, cand)
        if rise is not None and rise > limit:
            reasons.append(
                f"{label} {100 * cand:.2f} % vs baseline {100 * base:.2f} % "
                f"(+{100 * rise:.2f} > {100 * limit:.2f} pts)"
            )
    ratio = report.length_ratio
    if ratio is not None and not limits.min_length_ratio <= ratio <= limits.max_length_ratio:
        reasons.append(
            f"output length ratio B/A {ratio:.3f} outside "
            f"[{limits.min_length_ratio}, {limits.max_length_ratio}]"
        )
    return tuple(reasons)
