"""Argument checks shared by the statistics modules (one-line errors)."""

from __future__ import annotations

from validate.errors import StatsInputError


def check_alpha(alpha: float, name: str = "alpha") -> float:
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"{name} must be in (0, 1), got {alpha}")
    return alpha


GATE_ALPHA_RANGE = "(0, 0.5)"  # one-sided: 0.5 or more would PASS a coin flip


def gate_alpha_problem(alpha: float) -> str | None:
    """Why ``alpha`` cannot be the gate's one-sided level, or None: one wording for the
    policy's ``gate.alpha`` and ``v41val plan --alpha`` (callers prefix the field)."""
    if not 0.0 < alpha < 0.5:
        return f"expected a number in {GATE_ALPHA_RANGE} (the one-sided level), got {alpha}"
    return None


def check_power(power: float) -> float:
    power = float(power)
    if not 0.0 < power < 1.0:
        raise StatsInputError(f"power must be in (0, 1), got {power}")
    return power


def check_rate(value: float, name: str) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise StatsInputError(f"{name} must be a fraction in [0, 1], got {value}")
    return value


def points(x: float | None) -> str:
    """A proportion shown in accuracy points (0.0123 -> '1.23')."""
    return "n/a" if x is None else f"{100.0 * x:.2f}"
