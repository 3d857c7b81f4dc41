"""Prefix-cache cost, exact vs bounded: bytes per cached token from the cache formats,
and the hit rate a fixed budget buys, on workloads small enough to count by hand."""

from __future__ import annotations

import pytest

from runtime.config import V41Config
from runtime.kv_bytes import kv_bytes_per_token
from runtime.prefix_budget import budget_hit_rates, play


def test_bytes_per_cached_token_at_flash():
    kv = kv_bytes_per_token(V41Config.preset("flash"))
    assert kv.prefix_cache_bytes_per_token(False, 64) == kv.persistent_bytes_per_token == 890
    layers, window = kv.swa_layers, kv.sliding_window
    # blocks of 64 < W - 1: every cached token keeps its 528 B window entry in every layer
    assert kv.prefix_cache_bytes_per_token(True, 64) == 890 + layers * 528
    # blocks longer than the window keep only the last W - 1 tokens' entries per block
    big = 4 * window
    assert kv.prefix_cache_bytes_per_token(True, big) == pytest.approx(
        890 + layers * (window - 1) * 528 / big)
    with pytest.raises(ValueError):
        kv.prefix_cache_bytes_per_token(True, 0)


def test_play_counts_hits_and_what_replay_recomputes():
    shared = list(range(8))
    prompts = [shared + [100, 101, 102], shared + [200, 201, 202], shared + [100, 101, 102]]
    # blocks of 4, room for everything: the 2nd prompt hits the 8 shared tokens, the 3rd
    # its whole-block prefix of 8 (at most len - 1 = 10 tokens deep, whole blocks only)
    assert play(prompts, 4, 100, None) == (33, 16, 16)
    # bounded with W = 4: each hit of 8 saves 8 - 4
    assert play(prompts, 4, 100, 4) == (33, 16, 8)
    # W = 8: a hit of H <= W is ignored, nothing saved
    assert play(prompts, 4, 100, 8) == (33, 16, 0)
    # room for one block: the shared head survives (tails are evicted first), the second
    # block does not
    assert play(prompts, 4, 1, None) == (33, 8, 8)
    assert play(prompts, 4, 0, None) == (33, 0, 0)


def test_a_budget_holds_more_blocks_in_bounded_mode():
    cfg = V41Config.preset("testbed")
    kv = kv_bytes_per_token(cfg)
    prompts = [[1] * 256 + [k] * 64 for k in range(2, 12)]
    budget = 40 * 64 * kv.prefix_cache_bytes_per_token(False, 64)
    exact, bounded = budget_hit_rates(prompts, kv, budget, 64)
    assert bounded.capacity_blocks == 40 and exact.capacity_blocks < bounded.capacity_blocks
    assert exact.bytes_per_token > bounded.bytes_per_token
    assert 0 <= exact.hit_rate <= 1 and bounded.saved_tokens <= bounded.hit_tokens
