"""Speed that host drift cannot fake: variants measured in interleaved rounds.

Measured one after another, each variant in its own window, a speed-up absorbs
whatever the host did between the windows (frequency, other tenants, a warm cache):
the demo once reported 0.23x TTFT for bounded replay that way. Here every round serves
the same requests once per variant at the same concurrency, the order alternating from
round to round (A B, B A, A B, ...), so a drift that is linear over a pair of rounds
lands on both variants alike; and the speed-up's interval resamples whole rounds
(``ratio_of_means`` with the round as the cluster), so what is left of the drift
widens the interval instead of biasing it. An A/A run of identical variants then gives
ratios whose intervals contain 1 (``benchmarks/sweep_aa.py --interleaved``).

Requests are paired by (round, request index): byte-identical requests, the same
neighbours in flight, adjacent in time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tasks.request import Request
from validate.engines.base import Engine, Timings
from validate.speed.errors import SpeedError
from validate.speed.sweep import serve_level
from validate.stats.bootstrap import BootstrapSpec
from validate.stats.continuous import RatioEstimate, ratio_of_means
from validate.stats.outcomes import PairedOutcomes

METRICS = ("ttft_s", "tpot_s", "e2e_s")


@dataclass(frozen=True)
class RoundTimings:
    """One variant's pass in one round: ``slot`` is its place in the round's order."""

    round: int
    slot: int
    variant: str
    indexed: tuple[tuple[int, Timings], ...]
    n_failed: int = 0


def round_orders(names: Sequence[str], rounds: int) -> list[list[str]]:
    """The variants' order in each round: as given in even rounds, reversed in odd ones."""
    if rounds < 1:
        raise SpeedError(f"interleaved speed: rounds must be >= 1, got {rounds}")
    if len(set(names)) != len(names) or len(names) < 2:
        raise SpeedError(f"interleaved speed: need two or more distinct variants, got {names}")
    return [list(names) if r % 2 == 0 else list(reversed(names)) for r in range(rounds)]


def interleaved_rounds(engines: Mapping[str, Callable[[], Engine]],
                       requests: Sequence[Request], rounds: int,
                       on_pass: Callable[[int, str], None] | None = None
                       ) -> tuple[RoundTimings, ...]:
    """Serve ``requests`` once per variant per round (``engines[name]()`` gives a fresh
    engine of that variant, holding the concurrency being measured), in
    ``round_orders``; ``on_pass(round, variant)`` after each pass (progress)."""
    if not requests:
        raise SpeedError("interleaved speed: no requests")
    out = []
    for r, order in enumerate(round_orders(list(engines), rounds)):
        for slot, name in enumerate(order):
            indexed, failed = asyncio.run(serve_level(engines[name](), requests))
            out.append(RoundTimings(r, slot, name, tuple(indexed), failed))
            if on_pass is not None:
                on_pass(r, name)
    return tuple(out)


def rounds_to_record(measured: Sequence[RoundTimings]) -> dict:
    """What was measured, as JSON (every request's timings; nothing concluded)."""
    from validate.speed.stored import timings_to_dict

    return {"version": 1, "passes": [
        {"round": m.round, "slot": m.slot, "variant": m.variant, "n_failed": m.n_failed,
         "requests": [timings_to_dict(i, t) for i, t in m.indexed]} for m in measured]}


def rounds_from_record(record: Mapping) -> tuple[RoundTimings, ...]:
    from validate.speed.stored import timings_from_dict

    try:
        if record["version"] != 1:
            raise SpeedError(f"stored speed rounds: record version {record['version']!r}, "
                             f"this v41val reads 1")
        return tuple(RoundTimings(int(p["round"]), int(p["slot"]), str(p["variant"]),
                                  tuple(timings_from_dict(r) for r in p["requests"]),
                                  int(p["n_failed"])) for p in record["passes"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SpeedError(f"stored speed rounds are malformed: {type(exc).__name__}: "
                         f"{exc}") from None


def _metric(t: Timings, metric: str) -> float | None:
    value = t.tpot_s if metric == "tpot_s" else getattr(t, metric)
    return None if value is None else float(value)


def interleaved_speedup(measured: Sequence[RoundTimings], baseline: str, candidate: str,
                        metric: str = "e2e_s", alpha: float = 0.05,
                        bootstrap: BootstrapSpec | None = None) -> RatioEstimate:
    """Latency speed-up mean(baseline) / mean(candidate) of ``metric`` (> 1: the
    candidate is faster), pairing requests by (round, index), the interval from a
    bootstrap over rounds."""
    if metric not in METRICS:
        raise SpeedError(f"interleaved speed: metric must be one of {METRICS}, got {metric!r}")
    by = {(m.round, m.variant): dict(m.indexed) for m in measured}
    a, b, clusters = [], [], []
    for r in sorted({m.round for m in measured}):
        base, cand = by.get((r, baseline)), by.get((r, candidate))
        if base is None or cand is None:
            continue
        for index in sorted(set(base) & set(cand)):
            x, y = _metric(base[index], metric), _metric(cand[index], metric)
            if x is not None and y is not None:
                a.append(x)
                b.append(y)
                clusters.append(r)
    if not a:
        raise SpeedError(f"interleaved speed: no paired {metric} between {baseline!r} and "
                         f"{candidate!r}")
    paired = PairedOutcomes.from_arrays(np.array(a), np.array(b), clusters=np.array(clusters),
                                        task="speed", metric=metric, label_a=baseline,
                                        label_b=candidate)
    return ratio_of_means(paired, alpha, bootstrap or BootstrapSpec(replicates=2000),
                          invert=True)
