"""A sweep stored as a JSON record comes back as the same SweepResult, and its headline
equals a plain float64 recompute from the per-request timings (written independently
of validate.speed: hand-rolled quantile, window throughput, ratio of medians)."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from validate.engines.base import Timings
from validate.speed.errors import SpeedError
from validate.speed.headline import compare_headlines, headline
from validate.speed.stored import sweep_from_record, sweep_to_record
from validate.speed.sweep import SweepResult, choose, measure_point

N_OUT = 5


def level_timings(concurrency: int, rates: list[float], ttfts: list[float]):
    """Closed loop: requests go in waves of ``concurrency``, each wave after the last."""
    out, wave_start = [], 1000.0
    for wave in range(0, len(rates), concurrency):
        ends = []
        for i in range(wave, min(wave + concurrency, len(rates))):
            e2e = ttfts[i] + (N_OUT - 1) / rates[i]
            out.append((i, Timings(started_at_s=wave_start, e2e_s=e2e, ttft_s=ttfts[i],
                                   itl_s=(1 / rates[i],) * (N_OUT - 1), n_prompt_tokens=8,
                                   n_output_tokens=N_OUT)))
            ends.append(wave_start + e2e)
        wave_start = max(ends)
    return out


def make_sweep(levels: dict[int, tuple[list[float], list[float]]], target: float,
               quantile: float) -> SweepResult:
    points = [measure_point(c, level_timings(c, rates, ttfts), 0, target, quantile)
              for c, (rates, ttfts) in levels.items()]
    return SweepResult(target, quantile, tuple(points), choose(points))


BASE = {1: ([50.0, 52.0, 49.0, 51.0], [0.030, 0.032, 0.029, 0.031]),
        2: ([40.0, 41.0, 39.0, 42.0], [0.040, 0.045, 0.041, 0.043]),
        4: ([22.0, 21.0, 23.0, 20.0], [0.060, 0.061, 0.059, 0.062])}
FAST = {1: ([60.0, 58.0, 61.0, 59.0], [0.025, 0.026, 0.024, 0.027]),
        2: ([48.0, 47.0, 50.0, 49.0], [0.035, 0.034, 0.036, 0.033]),
        4: ([31.0, 30.0, 29.0, 32.0], [0.050, 0.052, 0.049, 0.051])}


def quantile(values: list[float], q: float) -> float:
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def reference(levels: dict, target: float, q: float) -> dict:
    """The headline from the raw timings, by hand."""
    by_level = {}
    for c, (rates, ttfts) in levels.items():
        timed = [t for _, t in level_timings(c, rates, ttfts)]
        user = [(t.n_output_tokens - 1) / (t.e2e_s - t.ttft_s) for t in timed]
        window = max(t.started_at_s + t.e2e_s for t in timed) - min(t.started_at_s for t in timed)
        by_level[c] = {"thru": sum(t.n_output_tokens for t in timed) / window,
                       "q": quantile(user, q), "median_rate": quantile(user, 0.5),
                       "ttft": quantile([t.ttft_s for t in timed], 0.5)}
    meeting = [c for c in by_level if by_level[c]["q"] >= target]
    best = max(meeting, key=lambda c: by_level[c]["thru"]) if meeting else None
    return {"single_rate": by_level[1]["median_rate"], "single_ttft": by_level[1]["ttft"],
            "best": best, "thru": None if best is None else by_level[best]["thru"],
            "user_q": None if best is None else by_level[best]["q"]}


@pytest.mark.parametrize(("target", "best"), [(35.0, 2), (15.0, 4), (1000.0, None)])
def test_stored_record_round_trips_and_matches_a_hand_recompute(target, best):
    sweep = make_sweep(BASE, target, 0.1)
    record = json.loads(json.dumps(sweep_to_record(sweep)))  # what the store keeps
    again = sweep_from_record(record)
    assert again.to_dict() == sweep.to_dict()
    assert [p.indexed for p in again.points] == [p.indexed for p in sweep.points]

    ref = reference(BASE, target, 0.1)
    h = headline(again, "base")
    assert ref["best"] == best == h.concurrency_at_target
    assert h.single_stream_tokens_per_s == pytest.approx(ref["single_rate"], rel=1e-12)
    assert h.single_stream_ttft_s == pytest.approx(ref["single_ttft"], rel=1e-12)
    if best is None:
        assert h.throughput_at_target is None and h.tokens_per_s_per_user_at_target is None
    else:
        assert h.throughput_at_target == pytest.approx(ref["thru"], rel=1e-12)
        assert h.tokens_per_s_per_user_at_target == pytest.approx(ref["user_q"], rel=1e-12)


def test_comparison_of_stored_sweeps_is_the_paired_ratio_of_medians():
    base = sweep_from_record(json.loads(json.dumps(sweep_to_record(make_sweep(BASE, 35, 0.1)))))
    fast = sweep_from_record(json.loads(json.dumps(sweep_to_record(make_sweep(FAST, 35, 0.1)))))
    c = compare_headlines(base, fast, variant_name="fast", baseline_name="base")
    rate = statistics.median(FAST[1][0]) / statistics.median(BASE[1][0])
    ttft = statistics.median(BASE[1][1]) / statistics.median(FAST[1][1])
    assert c.single_stream_speedup.ratio == pytest.approx(rate, rel=1e-9)
    assert c.ttft_speedup.ratio == pytest.approx(ttft, rel=1e-9)
    for s in (c.single_stream_speedup, c.ttft_speedup):
        assert s.n == 4 and s.ci[0] <= s.ratio <= s.ci[1] and s.ci[0] < s.ci[1]
    ref_b, ref_f = reference(BASE, 35, 0.1), reference(FAST, 35, 0.1)
    assert c.throughput_ratio.ratio == pytest.approx(ref_f["thru"] / ref_b["thru"], rel=1e-12)
    assert c.throughput_ratio.ci is None


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda r: r.pop("levels"), r"stored speed sweep is malformed: KeyError"),
    (lambda r: r.__setitem__("version", 9), r"record version 9"),
    (lambda r: r["levels"][0]["requests"][0].pop("e2e_s"), r"malformed: KeyError: 'e2e_s'"),
])
def test_a_malformed_record_is_a_one_line_speed_error(mutate, message):
    record = json.loads(json.dumps(sweep_to_record(make_sweep(BASE, 35, 0.1))))
    mutate(record)
    with pytest.raises(SpeedError, match=message) as info:
        sweep_from_record(record)
    assert "\n" not in str(info.value)
