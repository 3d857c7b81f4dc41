"""The speed result types, beside the code that produces them (``validate.speed.metrics``,
``validate.speed.sweep``); the analysis (``validate.analysis.model``) re-exports them."""

from __future__ import annotations

from dataclasses import dataclass

from validate.stats.jsonable import ToDict


@dataclass(frozen=True)
class Percentiles(ToDict):
    n: int
    mean: float
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True)
class SpeedSummary(ToDict):
    """Latency and throughput of one (variant, task), with its operating point.

    ``output_tokens_per_s`` is the aggregate rate over the wall window of the stored
    requests (sum of output tokens / (last end - first start)); ``tokens_per_s_per_user``
    is the median per-request decode rate 1 / TPOT. ``concurrency`` is the engine's
    bound on requests in flight (the operating point stated beside every figure).
    """

    n_requests: int
    ttft_s: Percentiles | None
    tpot_s: Percentiles | None
    e2e_s: Percentiles | None
    output_tokens_per_s: float | None
    tokens_per_s_per_user: float | None
    concurrency: int | None
    warm: bool = False


MEDIANS = "ratio of medians, paired item bootstrap CI"
AGGREGATE = "ratio of aggregate output tok/s over each variant's window, no CI"
SPEED_CI_CAVEAT = (
    "Speed CIs cover request-to-request variation only: each variant was measured once, "
    "in its own time window (not interleaved with the baseline), so drift of the host "
    "between windows (other load, clocks, caches) is not in them and can be larger: "
    "rerun, or read speed-ups near 1x as unresolved.")


@dataclass(frozen=True)
class Speedup(ToDict):
    """baseline / variant for latencies (> 1: the variant is faster) and variant /
    baseline for throughput, with a paired bootstrap CI over items.

    ``statistic`` names what the ratio is of: latencies and per-user rates are ratios
    of medians, so they agree with the p50 figures printed beside them; the aggregate
    throughput is one window per variant and has no CI."""

    metric: str  # "ttft" | "tpot" | "e2e" | "throughput"
    ratio: float
    ci: tuple[float, float] | None
    n: int
    statistic: str = MEDIANS
