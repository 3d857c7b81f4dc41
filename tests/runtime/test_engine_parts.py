"""Engine building blocks on synthetic tensors: sampling, logprobs, stop strings, prefix cache."""

from __future__ import annotations

import math

import pytest
import torch

from runtime.engine.errors import EngineError
from runtime.engine.prefix_cache import PrefixCache, block_hashes
from runtime.engine.requests import GenerateRequest
from runtime.engine.sampling import (
    filtered_probs,
    greedy,
    log_softmax,
    new_generator,
    sample,
    token_logprob,
)
from runtime.engine.stops import StopMatcher


def test_greedy_breaks_ties_to_lowest_id():
    assert greedy(torch.tensor([0.0, 3.0, 1.0, 3.0])) == 1


def test_filtered_probs_top_k_top_p_against_hand_values():
    logits = torch.log(torch.tensor([0.1, 0.4, 0.2, 0.3]))
    p = filtered_probs(logits, 1.0)
    assert torch.allclose(p, torch.tensor([0.1, 0.4, 0.2, 0.3], dtype=torch.float64))
    # top_p 0.6: sorted 0.4, 0.3 (mass before: 0, 0.4) -> keep {1, 3}; 0.2 has 0.7 before -> drop
    p = filtered_probs(logits, 1.0, top_p=0.6)
    assert torch.allclose(p, torch.tensor([0, 4 / 7, 0, 3 / 7], dtype=torch.float64))
    p = filtered_probs(logits, 1.0, top_k=1)
    assert p.tolist() == [0.0, 1.0, 0.0, 0.0]
    # temperature 2 flattens: p_i ~ sqrt(q_i)
    q = torch.tensor([0.1, 0.4, 0.2, 0.3], dtype=torch.float64).sqrt()
    assert torch.allclose(filtered_probs(logits, 2.0), q / q.sum())


def test_sampling_is_reproducible_and_follows_the_distribution():
    logits = torch.log(torch.tensor([0.1, 0.4, 0.2, 0.3]))
    g1, g2 = new_generator(7), new_generator(7)
    a = [sample(logits, 1.0, g1) for _ in range(50)]
    b = [sample(logits, 1.0, g2) for _ in range(50)]
    assert a == b
    g = new_generator(0)
    draws = [sample(logits, 1.0, g) for _ in range(4000)]
    freq = [draws.count(i) / 4000 for i in range(4)]
    # ~4.5 standard errors at p=0.4, n=4000 is 0.035
    assert all(abs(f - p) < 0.035 for f, p in zip(freq, [0.1, 0.4, 0.2, 0.3], strict=True))
    # inverse-CDF mapping checked against the uniform draws themselves
    g, g_copy = new_generator(3), new_generator(3)
    for _ in range(20):
        u = float(torch.rand((), generator=g_copy, dtype=torch.float64))
        expect = next(i for i, c in enumerate([0.1, 0.5, 0.7, 1.0]) if u < c)
        assert sample(logits, 1.0, g) == expect
    # top_p filtered tokens are never drawn
    g = new_generator(1)
    assert set(sample(logits, 1.0, g, top_p=0.6) for _ in range(200)) <= {1, 3}


def test_token_logprob_top_k_against_float64():
    logits = torch.tensor([1.0, 3.0, 2.0, 3.0, -1.0])
    lp = log_softmax(logits)
    ref = logits.double() - math.log(sum(math.exp(v) for v in logits.tolist()))
    out = token_logprob(lp, 2, k=3)
    assert out.token_id == 2 and abs(out.logprob - float(ref[2])) < 1e-6
    assert out.top_ids == (1, 3, 2)  # tie between 1 and 3 -> lower id first
    assert all(abs(a - float(ref[i])) < 1e-6 for a, i in zip(out.top_logprobs, out.top_ids, strict=True))
    assert not out.is_greedy and token_logprob(lp, 1, k=1).is_greedy


def test_stop_matcher_cuts_before_the_earliest_stop():
    m = StopMatcher(("Question:", "\n\n"))
    assert not m.push("The answer is 4.")
    assert not m.push("\nQues")
    assert m.push("tion: next")
    assert m.hit == "Question:" and m.output_text() == "The answer is 4.\n"
    m = StopMatcher(("ab", "b"))
    assert m.push("xab")
    assert m.hit == "ab" and m.output_text() == "x"  # earliest start wins
    assert StopMatcher(()).push("anything") is False


def test_block_hashes_are_chained_and_prefix_cache_is_lru():
    a = list(range(100))
    b = list(range(64)) + [7] * 36
    ha, hb = block_hashes(a, 32), block_hashes(b, 32)
    assert len(ha) == 3 and ha[:2] == hb[:2] and ha[2] != hb[2]
    cache = PrefixCache(32, capacity=2)
    cache.store(a[:32], "s32")
    cache.store(a[:64], "s64")
    hit = cache.lookup(b, max_tokens=len(b) - 1)
    assert (hit.tokens, hit.snapshot) == (64, "s64")
    assert cache.lookup(a, max_tokens=40).snapshot == "s32"  # cap on the hit length
    cache.store(a[:96], "s96")  # evicts the least recently used (s64; s32 was just used)
    assert cache.contains(a[:32]) and cache.contains(a[:96]) and not cache.contains(a[:64])
    assert cache.lookup([5] * 64, 63) is None
    with pytest.raises(ValueError):
        cache.store(a[:40], "x")
    assert PrefixCache(32, capacity=0).lookup(a, 99) is None


@pytest.mark.parametrize("kwargs, match", [
    ({}, "exactly one of prompt"),
    ({"prompt_ids": ()}, "empty"),
    ({"prompt_ids": (1,), "temperature": -1}, "temperature"),
    ({"prompt_ids": (1,), "top_p": 0}, "top_p"),
    ({"prompt_ids": (1,), "stop": ("",)}, "non-empty"),
])
def test_bad_requests(kwargs, match):
    with pytest.raises(EngineError, match=match):
        GenerateRequest(**kwargs)
