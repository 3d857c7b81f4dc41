"""Argument checks shared by the statistics modules (one-line errors)."""

from __future__ import annotations

from validate.errors import StatsInputError


def check_alpha(alpha: float, name: str = "alpha") -> float:
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"{name} must be in (0, 1), got {alpha}")
    return alpha


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
