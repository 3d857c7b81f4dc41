"""Interleaved speed rounds against a host that drifts: identical variants measured one
after another show a "speed-up" whose interval excludes 1; the same variants in
alternating rounds (A B, B A, ...) with the interval resampling rounds contain 1, and a
real 1.25x difference is still found."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tasks.request import Generation, GenerationParams, Request
from validate.engines.base import EngineResult, Timings
from validate.speed.errors import SpeedError
from validate.speed.interleaved import (
    RoundTimings,
    interleaved_rounds,
    interleaved_speedup,
    round_orders,
)
from validate.speed.sweep import serve_level
from validate.stats.bootstrap import BootstrapSpec

REQUESTS = [Request(task="s", item_id=f"r{i}", kind="generate", prompt="x",
                    gen=GenerationParams(max_gen_toks=4)) for i in range(8)]
BOOT = BootstrapSpec(replicates=2000, seed=1)


class Host:
    """Shared time: every request served makes the host 0.5 % slower (a drift)."""

    def __init__(self, seed: int = 0) -> None:
        self.t = 0
        self.rng = np.random.default_rng(seed)


class DriftEngine:
    name = "drift"

    def __init__(self, host: Host, cost: float) -> None:
        self.host, self.cost = host, cost

    async def stream(self, requests):
        for i, r in enumerate(requests):
            e2e = self.cost * (1.0 + 0.005 * self.host.t) * self.host.rng.uniform(0.97, 1.03)
            self.host.t += 1
            yield EngineResult(i, r, Generation("x"), Timings(started_at_s=0.0, e2e_s=e2e,
                                                              ttft_s=e2e / 4,
                                                              n_output_tokens=4))

    async def aclose(self) -> None:
        return None


def _engines(host: Host, costs: dict[str, float]):
    return {name: (lambda c=cost: DriftEngine(host, c)) for name, cost in costs.items()}


def test_orders_alternate_and_bad_settings_are_refused():
    assert round_orders(["a", "b"], 3) == [["a", "b"], ["b", "a"], ["a", "b"]]
    for names, rounds in ((["a", "b"], 0), (["a"], 2), (["a", "a"], 2)):
        with pytest.raises(SpeedError):
            round_orders(names, rounds)


def _sequential(host: Host, rounds: int) -> list[RoundTimings]:
    """One window per variant: all of A's rounds, then all of B's (what a sweep does)."""
    out = []
    for variant in ("a", "b"):
        for r in range(rounds):
            indexed, _ = asyncio.run(serve_level(DriftEngine(host, 1.0), REQUESTS))
            out.append(RoundTimings(r, 0, variant, tuple(indexed)))
    return out


def test_sequential_windows_fake_a_speedup_that_interleaving_does_not():
    biased = interleaved_speedup(_sequential(Host(), 8), "a", "b", bootstrap=BOOT)
    assert biased.ratio < 0.8 and biased.ci_bootstrap[1] < 1.0  # B "slower": the drift

    measured = interleaved_rounds(_engines(Host(seed=1), {"a": 1.0, "b": 1.0}), REQUESTS, 8)
    assert [m.variant for m in measured[:4]] == ["a", "b", "b", "a"]
    for metric in ("e2e_s", "ttft_s"):
        aa = interleaved_speedup(measured, "a", "b", metric, bootstrap=BOOT)
        assert aa.ci_bootstrap[0] <= 1.0 <= aa.ci_bootstrap[1]
        assert aa.n_items == 8  # clusters: rounds, not requests


def test_a_real_difference_is_still_found():
    faster = interleaved_rounds(_engines(Host(seed=2), {"a": 1.0, "b": 0.8}), REQUESTS, 8)
    found = interleaved_speedup(faster, "a", "b", bootstrap=BOOT)
    assert found.ci_bootstrap[0] > 1.1 and found.ratio == pytest.approx(1.25, rel=0.05)
    with pytest.raises(SpeedError, match="no paired"):
        interleaved_speedup(faster, "a", "missing")
