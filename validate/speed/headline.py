"""The two headline operating points of a variant, and their ratios vs the baseline.

- Low latency: one user alone (concurrency 1): the median per-user decode rate
  (tokens/s) and the median TTFT.
- Throughput at the target: the aggregate output tokens/s of the sweep's chosen point
  (every user still gets >= N tokens/s, see ``sweep``), with that point's concurrency.

Ratios: single-stream rate and TTFT are ratios of medians (the figures the headline
prints), paired by request (both sweeps served the same requests) with paired
bootstrap CIs; the throughput ratio has no CI (one
measurement window per variant) and says so (``ci`` None).
"""

from __future__ import annotations

from dataclasses import dataclass

from validate.speed.metrics import latency_speedup, rate_speedup
from validate.speed.sweep import SweepResult
from validate.speed.types import AGGREGATE, Speedup
from validate.stats.bootstrap import BootstrapSpec


@dataclass(frozen=True)
class Headline:
    variant: str
    single_stream_tokens_per_s: float | None
    single_stream_ttft_s: float | None
    throughput_at_target: float | None
    concurrency_at_target: int | None
    tokens_per_s_per_user_at_target: float | None
    target_tokens_per_s_per_user: float
    user_quantile: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class HeadlineComparison:
    variant: str
    baseline: str
    single_stream_speedup: Speedup | None
    ttft_speedup: Speedup | None
    throughput_ratio: Speedup | None

    def to_dict(self) -> dict:
        return {"variant": self.variant, "baseline": self.baseline,
                **{k: None if v is None else v.to_dict() for k, v in (
                    ("single_stream_speedup", self.single_stream_speedup),
                    ("ttft_speedup", self.ttft_speedup),
                    ("throughput_ratio", self.throughput_ratio))}}


def headline(sweep: SweepResult, variant: str) -> Headline:
    single = sweep.point(1)
    chosen = sweep.chosen
    return Headline(
        variant=variant,
        single_stream_tokens_per_s=None if single is None else single.summary.tokens_per_s_per_user,
        single_stream_ttft_s=None if single is None or single.summary.ttft_s is None
        else single.summary.ttft_s.p50,
        throughput_at_target=None if chosen is None else chosen.summary.output_tokens_per_s,
        concurrency_at_target=None if chosen is None else chosen.concurrency,
        tokens_per_s_per_user_at_target=None if chosen is None else chosen.user_rate_at_quantile,
        target_tokens_per_s_per_user=sweep.target_tokens_per_s_per_user,
        user_quantile=sweep.user_quantile,
    )


def compare_headlines(base: SweepResult, variant: SweepResult, *, variant_name: str,
                      baseline_name: str, alpha: float = 0.05,
                      bootstrap: BootstrapSpec | None = None) -> HeadlineComparison:
    b1, v1 = base.point(1), variant.point(1)
    rate = ttft = None
    if b1 is not None and v1 is not None:
        bt, vt = dict(b1.indexed), dict(v1.indexed)
        common = sorted(set(bt) & set(vt))
        pairs = [(bt[i], vt[i]) for i in common if bt[i].tpot_s and vt[i].tpot_s]
        rate = rate_speedup("single_stream_tokens_per_s", [1 / a.tpot_s for a, _ in pairs],
                            [1 / b.tpot_s for _, b in pairs], alpha, bootstrap)
        ttft = latency_speedup("single_stream_ttft", [bt[i].ttft_s for i in common],
                               [vt[i].ttft_s for i in common], alpha, bootstrap)
    throughput = None
    if base.chosen is not None and variant.chosen is not None:
        throughput = Speedup(metric="throughput_at_target",
                             ratio=variant.chosen.summary.output_tokens_per_s
                             / base.chosen.summary.output_tokens_per_s,
                             ci=None, n=variant.chosen.summary.n_requests,
                             statistic=AGGREGATE)
    return HeadlineComparison(variant_name, baseline_name, rate, ttft, throughput)
