"""Speed metrics on synthetic timings with hand-computed expectations: percentiles,
TPOT and per-user rates, throughput windows, paired speed-ups, the concurrency sweep's
chosen point and the headline ratios."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.request import Generation, GenerationParams, Request
from validate.engines.base import EngineFailure, EngineResult, Timings
from validate.speed.errors import SpeedError
from validate.speed.headline import compare_headlines, headline
from validate.speed.metrics import (
    latency_speedup,
    output_tokens_per_s,
    rate_speedup,
    speed_summary,
    user_rates,
)
from validate.speed.sweep import choose, concurrency_sweep, measure_point
from validate.stats.bootstrap import BootstrapSpec

BOOT = BootstrapSpec(replicates=500, seed=1)


def _t(start, ttft, n_out, tpot):
    e2e = ttft + (n_out - 1) * tpot
    return Timings(started_at_s=start, e2e_s=e2e, ttft_s=ttft,
                   itl_s=(tpot,) * (n_out - 1), n_output_tokens=n_out)


def test_summary_percentiles_rates_and_window():
    ts = [_t(100.0, 0.1, 11, 0.01), _t(100.5, 0.2, 11, 0.02), _t(101.0, 0.3, 6, 0.04),
          _t(101.5, 0.4, 1, 0.05)]
    s = speed_summary(ts, concurrency=2)
    assert s.n_requests == 4 and s.concurrency == 2
    # TTFT 0.1..0.4: p50 = 0.25, p90 = 0.37, p99 = 0.397 (linear interpolation)
    assert (s.ttft_s.p50, s.ttft_s.p90, s.ttft_s.p99) == pytest.approx((0.25, 0.37, 0.397))
    # TPOT exists for the three requests with >= 2 tokens: 0.01, 0.02, 0.04
    assert s.tpot_s.n == 3 and s.tpot_s.mean == pytest.approx(0.07 / 3)
    assert user_rates(ts).tolist() == pytest.approx([100.0, 50.0, 25.0])
    assert s.tokens_per_s_per_user == pytest.approx(50.0)
    # e2e: 0.2, 0.4, 0.5, 0.4; window 100.0 -> max(100.2, 100.9, 101.5, 101.9) = 1.9 s
    assert s.e2e_s.p50 == pytest.approx(0.4)
    assert output_tokens_per_s(ts) == pytest.approx(29 / 1.9)
    assert s.output_tokens_per_s == pytest.approx(29 / 1.9)
    with pytest.raises(SpeedError, match="no timed requests"):
        speed_summary([], 1)


def test_paired_speedups_by_hand():
    base = [0.2, 0.4, 0.6, None]
    variant = [0.1, 0.2, 0.3, 0.1]
    up = latency_speedup("ttft", base, variant, bootstrap=BOOT)
    assert up.ratio == pytest.approx(2.0) and up.n == 3  # the None pair is dropped
    assert up.ci == pytest.approx((2.0, 2.0))  # every resample has ratio exactly 2
    mixed = latency_speedup("e2e", [1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 2.0], bootstrap=BOOT)
    assert mixed.ratio == pytest.approx(2.5 / 1.0)  # median 2.5 over median 1
    assert mixed.ci[0] <= 2.5 <= mixed.ci[1] and mixed.ci[0] < mixed.ci[1]
    # One slow baseline request: the ratio of means says 1.6x faster, the medians (the
    # p50s a report prints beside the ratio) say 2x slower; the speed-up follows the p50s.
    slow = latency_speedup("ttft", [1.0, 1.0, 1.0, 10.0], [2.0, 2.0, 2.0, 2.0], bootstrap=BOOT)
    assert np.mean([1.0, 1.0, 1.0, 10.0]) / 2.0 == pytest.approx(1.625)
    assert slow.ratio == pytest.approx(np.median([1.0, 1.0, 1.0, 10.0]) / 2.0) == 0.5
    assert slow.statistic.startswith("ratio of medians")
    rate = rate_speedup("tps", [100.0, 100.0, 200.0], [150.0, 120.0, 300.0], bootstrap=BOOT)
    assert rate.ratio == pytest.approx(np.median([150.0, 120.0, 300.0]) / 100.0)
    assert latency_speedup("x", [1.0], [1.0]) is None
    with pytest.raises(SpeedError, match="2 baseline values but 1"):
        latency_speedup("x", [1.0, 2.0], [1.0])


def test_measure_point_quantile_and_choice():
    ts = [(i, _t(0.0, 0.01, 101, 1 / r)) for i, r in enumerate([400, 300, 200, 160, 100])]
    p = measure_point(4, ts, n_failed=1, target=150.0, user_quantile=0.1)
    # 10th percentile of rates (100, 160, 200, 300, 400): 100 + 0.4 * 60 = 124 < 150
    assert p.user_rate_at_quantile == pytest.approx(124.0) and not p.meets_target
    q = measure_point(4, ts, n_failed=0, target=150.0, user_quantile=0.5)
    assert q.user_rate_at_quantile == pytest.approx(200.0) and q.meets_target
    a = measure_point(1, [(0, _t(0.0, 0.01, 101, 1 / 400))], 0, 150.0, 0.1)
    b = measure_point(2, [(0, _t(0.0, 0.01, 101, 1 / 300)), (1, _t(0.0, 0.01, 101, 1 / 300))],
                      0, 150.0, 0.1)
    # throughput: a: 101 tokens / (0.01 + 100/400) s; b: 202 / (0.01 + 100/300)
    assert a.summary.output_tokens_per_s == pytest.approx(101 / 0.26)
    assert b.summary.output_tokens_per_s == pytest.approx(202 / (0.01 + 1 / 3))
    assert choose([a, b, p]) is b  # p misses the target although its window is busiest
    assert choose([p]) is None


class FakeEngine:
    """Serves requests in waves of ``concurrency`` (a synthetic closed loop): per-user
    rate 1200 * speed / (concurrency + 1) tokens/s, TTFT 0.05 / speed s."""

    name = "fake"

    def __init__(self, concurrency, speed=1.0):
        self.c = concurrency
        self.speed = speed

    async def stream(self, requests):
        rate = 1200.0 * self.speed / (self.c + 1)
        ttft = 0.05 / self.speed
        for i, r in enumerate(requests):
            n = r.gen.max_gen_toks
            dur = ttft + (n - 1) / rate
            yield EngineResult(i, r, Generation("x" * n, "length", n),
                               Timings(started_at_s=(i // self.c) * dur, e2e_s=dur, ttft_s=ttft,
                                       itl_s=(1 / rate,) * (n - 1), n_output_tokens=n))
        yield EngineFailure(len(requests), requests[0], ValueError("extra"))

    async def aclose(self):
        return None


def _reqs(n=8):
    return [Request("toy", f"i{k}", "generate", prompt="p",
                    gen=GenerationParams(max_gen_toks=61)) for k in range(n)]


def test_sweep_picks_the_busiest_level_that_keeps_users_fast_and_headline_ratios():
    base = concurrency_sweep(lambda c: FakeEngine(c), _reqs(), levels=(1, 2, 4, 8, 16))
    # per-user rates 600, 400, 240, 133.3: level 8 misses 150 and stops the sweep
    assert [p.concurrency for p in base.points] == [1, 2, 4, 8]
    assert [p.meets_target for p in base.points] == [True, True, True, False]
    assert base.points[0].n_failed == 1
    # 8 requests of 61 tokens; a wave lasts 0.05 + 60 / rate: level 1: 8 x 0.15 s,
    # level 2: 4 x 0.2 s, level 4: 2 x 0.3 s -> level 4 is the busiest that meets it
    tput = [p.summary.output_tokens_per_s for p in base.points[:3]]
    assert tput == pytest.approx([488 / 1.2, 488 / 0.8, 488 / 0.6])
    assert base.chosen.concurrency == 4
    fast = concurrency_sweep(lambda c: FakeEngine(c, speed=2.0), _reqs(), levels=(1, 2, 4, 8))
    assert fast.chosen.concurrency == 8  # 2400 / 9 = 266.7 tokens/s per user
    h = headline(fast, "fast")
    assert h.single_stream_tokens_per_s == pytest.approx(1200.0)
    assert h.single_stream_ttft_s == pytest.approx(0.025)
    assert h.concurrency_at_target == 8
    assert h.tokens_per_s_per_user_at_target == pytest.approx(2400 / 9)
    cmp = compare_headlines(base, fast, variant_name="fast", baseline_name="base",
                            bootstrap=BOOT)
    assert cmp.single_stream_speedup.ratio == pytest.approx(2.0)
    assert cmp.ttft_speedup.ratio == pytest.approx(2.0)
    # fast level 8: one wave of 0.025 + 60 / 266.7 = 0.25 s
    assert cmp.throughput_ratio.ratio == pytest.approx((488 / 0.25) / (488 / 0.6))
    assert cmp.throughput_ratio.ci is None
    with pytest.raises(SpeedError, match="strictly increasing"):
        concurrency_sweep(lambda c: FakeEngine(c), _reqs(), levels=(2, 1))


def test_sweep_runs_through_asyncio_each_level_fresh():
    made = []

    def factory(c):
        made.append(c)
        return FakeEngine(c)

    concurrency_sweep(factory, _reqs(4), levels=(1, 16), stop_after_miss=False)
    assert made == [1, 16]
