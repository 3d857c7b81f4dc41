"""What ``v41val plan`` was asked, checked flag by flag before anything heavy loads.

The flags are in the units a user types (margins and deltas in accuracy points, as in a
policy's ``tasks.<name>.margin``); each check names the flag and the range, once, in
the same words as the policy's checks (``validate.gate_limits``): a margin in (0, 50]
points, alpha in (0, 0.5). This module imports no numpy, so a usage error costs no
statistics import; ``validate.gate.sizing`` turns a checked request into a plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from validate.errors import StatsInputError
from validate.gate_limits import CORRECTIONS, MAX_MARGIN_POINTS, gate_alpha_problem


@dataclass(frozen=True)
class PlanRequest:
    """``v41val plan``'s flags as given (None: not given)."""

    margin_points: float | None = None
    discordance: float | None = None
    alpha: float | None = None
    power: float | None = None
    delta_points: float = 0.0
    n: int | None = None
    task: str | None = None
    claims: int = 1
    correction: str | None = None
    repeats: Mapping[str, int] = field(default_factory=dict)  # task (or "*") -> repeats
    rho: float | None = None
    policy: str | None = None
    variants: int = 1


def _finite(value: float, flag: str, what: str) -> None:
    if not math.isfinite(value):
        raise StatsInputError(f"{flag}: expected {what}, got {value}")


def check_request(req: PlanRequest) -> None:
    """One-line errors naming the flag, in the flag's own unit."""
    if req.margin_points is not None:
        _finite(req.margin_points, "--margin", "a number of points")
        if not 0.0 < req.margin_points <= MAX_MARGIN_POINTS:
            raise StatsInputError(f"--margin: expected points in (0, {MAX_MARGIN_POINTS:g}] "
                                  f"(1.5 = 1.5 accuracy points), got {req.margin_points:g}")
    _finite(req.delta_points, "--delta", "a finite number of points")
    if req.alpha is not None:
        problem = gate_alpha_problem(req.alpha)
        if problem:
            raise StatsInputError(f"--alpha: {problem}")
    if req.power is not None and not 0.0 < req.power < 1.0:
        raise StatsInputError(f"--power: expected a number in (0, 1), got {req.power}")
    if req.discordance is not None:
        if not 0.0 <= req.discordance <= 1.0:
            raise StatsInputError(f"--discordance: expected a fraction in [0, 1] "
                                  f"(0.03 = 3 % of items), got {req.discordance}")
        if abs(req.delta_points) / 100.0 > req.discordance + 1e-12:
            raise StatsInputError(
                f"--delta: a true delta of {req.delta_points:g} pts needs at least "
                f"{abs(req.delta_points):g} % of items discordant; --discordance is "
                f"{100 * req.discordance:g} %")
    if req.claims < 1:
        raise StatsInputError(f"--claims: expected a whole number >= 1, got {req.claims}")
    if req.variants < 1:
        raise StatsInputError(f"--variants: expected a whole number >= 1, got {req.variants}")
    if req.correction is not None and req.correction not in CORRECTIONS:
        raise StatsInputError(f"--correction: expected one of {', '.join(CORRECTIONS)}, "
                              f"got {req.correction!r}")
    for task, count in req.repeats.items():
        if count < 1:
            raise StatsInputError(f"--repeats: expected a whole number >= 1 for {task}, "
                                  f"got {count}")
    if req.rho is not None and not 0.0 <= req.rho <= 1.0:
        raise StatsInputError(f"--rho: expected the within-item correlation in [0, 1], "
                              f"got {req.rho}")
    if req.policy is not None:
        for flag, given in (("--margin", req.margin_points is not None),
                            ("--claims", req.claims != 1), ("--task", req.task is not None)):
            if given:
                raise StatsInputError(f"{flag}: not with --policy (the policy gives the "
                                      "tasks, margins and family)")
    elif req.margin_points is None:
        raise StatsInputError("plan needs --margin (points) or --policy FILE")


def parse_repeats(values: list[str]) -> dict[str, int]:
    """``--repeats 4`` (every task) or ``--repeats TASK=4`` (repeatable)."""
    out: dict[str, int] = {}
    for value in values:
        task, _, count = value.rpartition("=")
        try:
            out[task or "*"] = int(count)
        except ValueError:
            raise StatsInputError(
                f"--repeats: expected N or TASK=N (a whole number), got {value!r}") from None
    return out


