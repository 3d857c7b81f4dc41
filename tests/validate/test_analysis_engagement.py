"""What the analysis expects of a candidate and how it reads the ledger: expectations
from the variants' configs, engagement per item (unknown stays unknown), the server
log's "replay is off", and the prompt-length buckets."""

from __future__ import annotations

from validate.analysis.engagement import (
    engaged,
    expected_optimizations,
    hit_notes,
    length_bucket,
    replay_said_off,
)
from validate.engines.engagement import Engagement, ServerCounters


def _opts(**o):
    base = {"encoder_replay": False, "decoder_trim": False, "kernels": "reference"}
    return {"options": {**base, **o}}


def test_expected_optimizations_are_what_the_candidate_adds():
    exact = _opts()
    assert expected_optimizations("builtin", exact, _opts(encoder_replay=True,
                                                          decoder_trim=True)) == (
        "encoder_replay", "decoder_trim")
    assert expected_optimizations("builtin", _opts(encoder_replay=True),
                                  _opts(encoder_replay=True, kernels="+gate")) == ("fused gate",)
    off, on = {"args": ["--no-swa-bounded-replay"]}, {"args": []}
    assert expected_optimizations("vllm", off, on) == ("encoder_replay",)
    assert expected_optimizations("vllm", on, {"args": ["--kv-cache-dtype", "fp8"]}) == ()
    assert expected_optimizations("openai", {}, {}) == ()


def test_engagement_per_item_and_unknown():
    runtime = Engagement("runtime", 300, 256, 32, True, 2, 12, {"gate": "fused (cuda)",
                                                                 "mhc": "reference"})
    assert engaged("encoder_replay", runtime) is True
    assert engaged("decoder_trim", runtime) is True
    assert engaged("fused gate", runtime) is True and engaged("fused mhc", runtime) is False
    http = Engagement("usage", prompt_tokens=300, hit_tokens=256)
    assert engaged("encoder_replay", http) is True  # a hit: replay's precondition
    assert engaged("encoder_replay", http, replay_off=True) is False
    assert engaged("decoder_trim", http) is None and engaged("fused gate", http) is None
    assert engaged("encoder_replay", Engagement("usage", prompt_tokens=300)) is None
    assert engaged("encoder_replay", None) is None


def test_replay_off_lines_and_length_buckets():
    assert replay_said_off(["WARNING SWA bounded replay needs model runner V2; disabled"])
    assert not replay_said_off(["Decoder SWA bounded replay is off: sequence parallelism"])
    assert not replay_said_off(["INFO SWA bounded replay enabled (window 128)"])
    assert [length_bucket(n) for n in (None, 0, 1, 255, 256, 511, 512)] == [
        "unknown", "unknown", "1-1", "128-255", "256-511", "256-511", "512-1023"]


def test_warm_run_flags():
    zero = {("i", 0): Engagement("runtime", 300, 0, 0, False, None, 0, {})}
    assert "found no prefix-cache hit" in hit_notes("v", "t", zero, 1, [])[0]
    unknown = {("i", 0): Engagement("usage", prompt_tokens=300)}
    assert "hits are unknown" in hit_notes("v", "t", unknown, 1, [])[0]
    metrics = ServerCounters("metrics", {"prefix_cache_queries": 10.0, "prefix_cache_hits": 0.0},
                             {"prefix_cache_queries": 910.0, "prefix_cache_hits": 0.0})
    hit = {("i", 0): Engagement("usage", prompt_tokens=300, hit_tokens=64)}
    [note] = hit_notes("v", "t", hit, 1, [metrics])
    assert "counted 900 prefix-cache query tokens and 0 hits" in note
    # vLLM with prefix caching off never queries its cache: both counters stand still
    still = ServerCounters("metrics", {"prefix_cache_queries": 5.0, "prefix_cache_hits": 0.0},
                           {"prefix_cache_queries": 5.0, "prefix_cache_hits": 0.0})
    [note] = hit_notes("v", "t", unknown, 1, [still])[1:]
    assert "counted no prefix-cache queries" in note and "off" in note
    assert hit_notes("v", "t", hit, 0, [still]) == []  # nothing was sent: nothing to say
