"""Latency and throughput of a set of engine results, at one operating point.

Definitions (per request, from ``validate.engines.base.Timings``):
- TTFT: send -> first output token; TPOT: (e2e - TTFT) / (n_output - 1), the mean gap
  after the first token; e2e: send -> last byte.
- per-user rate: 1 / TPOT, the decode speed one user sees (tokens/s).
- output tokens/s: all output tokens / the wall window (first send -> last end), the
  aggregate throughput of the operating point.
Percentiles are numpy's linear interpolation (p50, p90, p99).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from validate.engines.base import EngineResult, Timings
from validate.speed.errors import SpeedError
from validate.speed.types import Percentiles, SpeedSummary, Speedup
from validate.stats.bootstrap import BootstrapSpec
from validate.stats.continuous import ratio_of_medians
from validate.stats.outcomes import PairedOutcomes


def percentiles(values: Sequence[float | None]) -> Percentiles | None:
    data = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if data.size == 0:
        return None
    p50, p90, p99 = np.percentile(data, [50, 90, 99])
    return Percentiles(n=int(data.size), mean=float(data.mean()), p50=float(p50),
                       p90=float(p90), p99=float(p99))


def timings_of(results: Sequence[EngineResult]) -> list[Timings]:
    return [r.timings for r in results if isinstance(r, EngineResult)]


def user_rates(timings: Sequence[Timings]) -> np.ndarray:
    """Per-request decode rate 1/TPOT (tokens/s) of requests with >= 2 output tokens."""
    return np.asarray([1.0 / t.tpot_s for t in timings if t.tpot_s], dtype=np.float64)


def output_tokens_per_s(timings: Sequence[Timings]) -> float | None:
    """All output tokens over the wall window from the first send to the last end."""
    timed = [t for t in timings if t.e2e_s is not None]
    if not timed:
        return None
    start = min(t.started_at_s for t in timed)
    end = max(t.started_at_s + t.e2e_s for t in timed)
    tokens = sum(t.n_output_tokens or 0 for t in timed)
    return tokens / (end - start) if end > start else None


def speed_summary(timings: Sequence[Timings], concurrency: int | None,
                  warm: bool = False) -> SpeedSummary:
    """The analysis' ``SpeedSummary`` of ``timings`` measured at ``concurrency``."""
    if not timings:
        raise SpeedError("speed: no timed requests to summarise")
    rates = user_rates(timings)
    return SpeedSummary(
        n_requests=len(timings),
        ttft_s=percentiles([t.ttft_s for t in timings]),
        tpot_s=percentiles([t.tpot_s for t in timings]),
        e2e_s=percentiles([t.e2e_s for t in timings]),
        output_tokens_per_s=output_tokens_per_s(timings),
        tokens_per_s_per_user=float(np.median(rates)) if rates.size else None,
        concurrency=concurrency,
        warm=warm,
    )


def latency_speedup(metric: str, base: Sequence[float | None], variant: Sequence[float | None],
                    alpha: float = 0.05, bootstrap: BootstrapSpec | None = None) -> Speedup | None:
    """median(base) / median(variant) of a latency (> 1: the variant is faster), with a
    paired bootstrap CI (medians: the reports print p50 latencies beside it); ``base[i]`` and ``variant[i]`` are the same request. Pairs with
    a missing side are dropped; None when fewer than two pairs remain."""
    if len(base) != len(variant):
        raise SpeedError(f"speed-up {metric}: {len(base)} baseline values but "
                         f"{len(variant)} variant values")
    pairs = [(a, b) for a, b in zip(base, variant, strict=True) if a is not None and b is not None]
    if len(pairs) < 2:
        return None
    paired = PairedOutcomes.from_arrays([a for a, _ in pairs], [b for _, b in pairs],
                                        task="speed", metric=metric, label_a="baseline",
                                        label_b="variant")
    est = ratio_of_medians(paired, alpha, bootstrap or BootstrapSpec(replicates=2000),
                           invert=True)
    return Speedup(metric=metric, ratio=est.ratio, ci=tuple(est.ci_bootstrap), n=paired.n_rows)


def rate_speedup(metric: str, base: Sequence[float], variant: Sequence[float],
                 alpha: float = 0.05, bootstrap: BootstrapSpec | None = None) -> Speedup | None:
    """median(variant) / median(base) of a rate (tokens/s; > 1: the variant is faster),
    paired by request, with a paired bootstrap CI (the headline shows median rates)."""
    if len(base) != len(variant):
        raise SpeedError(f"speed-up {metric}: {len(base)} baseline values but "
                         f"{len(variant)} variant values")
    if len(base) < 2:
        return None
    paired = PairedOutcomes.from_arrays(base, variant, task="speed", metric=metric,
                                        label_a="baseline", label_b="variant")
    est = ratio_of_medians(paired, alpha, bootstrap or BootstrapSpec(replicates=2000))
    return Speedup(metric=metric, ratio=est.ratio, ci=tuple(est.ci_bootstrap), n=paired.n_rows)
