"""Concurrency sweep: the throughput an engine reaches while users still get >= N
tokens/s each (N = 150 by default, the AgentX constraint).

At each concurrency level a fresh engine from ``factory(level)`` serves the requests
(at most ``level`` in flight: a closed loop of ``level`` users). A level *meets the
target* when the ``user_quantile`` quantile of per-user decode rates (1/TPOT) is at
least the target: with the default 0.1, nine users in ten get the target rate or
better (the minimum would hinge on one outlier). The chosen operating point is the
level with the highest aggregate output tokens/s among those that meet the target.
Per-user rates only fall as concurrency grows, so by default the sweep stops at the
first level that misses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tasks.request import Request
from validate.engines.base import Engine, EngineFailure, EngineResult, Timings, iterate_blocking
from validate.speed.errors import SpeedError
from validate.speed.metrics import speed_summary, user_rates
from validate.speed.types import SpeedSummary

DEFAULT_LEVELS = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_TARGET = 150.0
DEFAULT_USER_QUANTILE = 0.1
WARM_UP_TOKENS = 4  # output tokens of each warm-up request: enough for batched decode steps


def warm_up(factory: Callable[[int], Engine], requests: Sequence[Request],
            levels: Sequence[int], tokens: int = WARM_UP_TOKENS) -> EngineFailure | None:
    """Untimed, before a sweep: at every level, ``level`` requests at once with ``tokens``
    output tokens, so one-off costs (allocations, kernel and primitive caches for each
    batch shape, a server's first-request compile) land outside the measured windows.
    A single warm-up request was not enough: an A/A sweep of identical variants
    (benchmarks/sweep_aa.py) gave the copies swept later 1.5x the first one's speed.
    Returns the first failure (the caller decides how to report it), else None."""
    from dataclasses import replace

    short = [replace(r, gen=replace(r.gen, max_gen_toks=tokens)) for r in requests]
    for level in levels:
        for outcome in iterate_blocking(factory(level), short[:level]):
            if isinstance(outcome, EngineFailure):
                return outcome
    return None


@dataclass(frozen=True)
class SweepPoint:
    """One concurrency level: its summary, the per-user rate quantile, and whether it
    meets the target. ``indexed`` keeps (request index, timings) for paired ratios."""

    concurrency: int
    summary: SpeedSummary
    user_rate_at_quantile: float | None
    meets_target: bool
    n_failed: int
    indexed: tuple[tuple[int, Timings], ...]

    def to_dict(self) -> dict:
        return {"concurrency": self.concurrency, "summary": self.summary.to_dict(),
                "user_rate_at_quantile": self.user_rate_at_quantile,
                "meets_target": self.meets_target, "n_failed": self.n_failed}


@dataclass(frozen=True)
class SweepResult:
    target_tokens_per_s_per_user: float
    user_quantile: float
    points: tuple[SweepPoint, ...]
    chosen: SweepPoint | None

    def point(self, concurrency: int) -> SweepPoint | None:
        return next((p for p in self.points if p.concurrency == concurrency), None)

    def to_dict(self) -> dict:
        return {"target_tokens_per_s_per_user": self.target_tokens_per_s_per_user,
                "user_quantile": self.user_quantile,
                "points": [p.to_dict() for p in self.points],
                "chosen_concurrency": None if self.chosen is None else self.chosen.concurrency}


def measure_point(concurrency: int, indexed: Sequence[tuple[int, Timings]], n_failed: int,
                  target: float, user_quantile: float, warm: bool = False) -> SweepPoint:
    """A ``SweepPoint`` from the timings measured at ``concurrency``."""
    timings = [t for _, t in indexed]
    if not timings:
        raise SpeedError(f"speed sweep: no request succeeded at concurrency {concurrency}")
    rates = user_rates(timings)
    at_q = float(np.quantile(rates, user_quantile)) if rates.size else None
    return SweepPoint(concurrency, speed_summary(timings, concurrency, warm), at_q,
                      at_q is not None and at_q >= target, n_failed, tuple(indexed))


def choose(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The highest-throughput point that meets the target (lowest concurrency on ties)."""
    meeting = [p for p in points if p.meets_target and p.summary.output_tokens_per_s]
    if not meeting:
        return None
    return max(meeting, key=lambda p: (p.summary.output_tokens_per_s, -p.concurrency))


def _check(levels: Sequence[int], target: float, user_quantile: float) -> None:
    if not levels or any(int(c) != c or c < 1 for c in levels):
        raise SpeedError(f"speed sweep: levels must be positive integers, got {list(levels)}")
    if list(levels) != sorted(set(levels)):
        raise SpeedError(f"speed sweep: levels must be strictly increasing, got {list(levels)}")
    if not target > 0:
        raise SpeedError(f"speed sweep: target tokens/s per user must be > 0, got {target}")
    if not 0 <= user_quantile <= 1:
        raise SpeedError(f"speed sweep: user_quantile must be in [0, 1], got {user_quantile}")


async def serve_level(engine: Engine, requests: Sequence[Request],
                      on_request: Callable[[], None] | None = None):
    """Serve ``requests`` on ``engine`` (closed afterwards): ([(index, Timings)] in
    request order, failures)."""
    indexed, failed = [], 0
    try:
        async for outcome in engine.stream(requests):
            if on_request is not None:
                on_request()
            if isinstance(outcome, EngineResult):
                indexed.append((outcome.index, outcome.timings))
            else:
                failed += 1
    finally:
        await engine.aclose()
    return sorted(indexed, key=lambda pair: pair[0]), failed


def concurrency_sweep(factory: Callable[[int], Engine], requests: Sequence[Request], *,
                      levels: Sequence[int] = DEFAULT_LEVELS,
                      target_tokens_per_s_per_user: float = DEFAULT_TARGET,
                      user_quantile: float = DEFAULT_USER_QUANTILE,
                      stop_after_miss: bool = True, warm: bool = False,
                      on_request: Callable[[], None] | None = None) -> SweepResult:
    """Serve ``requests`` at each level with ``factory(level)``; see the module doc.
    ``on_request()`` after each request served (progress)."""
    _check(levels, target_tokens_per_s_per_user, user_quantile)
    if not requests:
        raise SpeedError("speed sweep: no requests")
    points = []
    for level in levels:
        indexed, failed = asyncio.run(serve_level(factory(level), requests, on_request))
        point = measure_point(level, indexed, failed, target_tokens_per_s_per_user,
                              user_quantile, warm)
        points.append(point)
        if stop_after_miss and not point.meets_target:
            break
    return SweepResult(target_tokens_per_s_per_user, user_quantile, tuple(points),
                       choose(points))
