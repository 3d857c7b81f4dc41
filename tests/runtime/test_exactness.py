"""Exact SWA mode is exact: chunked prefill == one-shot prefill, and a run after a
prefix-cache hit == a cold run, bit for bit (CPU, float32, batch-invariant numerics).

The default fast path is not bitwise across call shapes on this machine (a GEMM's row
results depend on the number of rows; see runtime/numerics.py), so exactness is held
on the batch-invariant path, which is what RuntimeOptions(batch_invariant=True) selects.
"""

from __future__ import annotations

import functools

import pytest
import torch

from runtime.config import V41Config
from runtime.model import SeqChunk, V41Model
from runtime.options import RuntimeOptions
from runtime.weights import V41Weights

pytestmark = pytest.mark.usefixtures("one_thread")


@functools.lru_cache(maxsize=1)
def tiny_weights() -> V41Weights:
    return V41Weights.random(V41Config.preset("tiny"), seed=0)


def prompt(n: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 512, (n,), generator=torch.Generator().manual_seed(seed))


def run_chunks(model: V41Model, tokens: torch.Tensor, cuts: list[int]) -> torch.Tensor:
    state = model.new_state()
    outs = []
    for a, b in zip([0, *cuts], [*cuts, len(tokens)], strict=True):
        outs.append(model.forward([SeqChunk(state, tokens[a:b], logits="all")])[0].logits)
    return torch.cat(outs)


def test_chunked_prefill_equals_one_shot_bit_for_bit():
    model = V41Model(tiny_weights(), RuntimeOptions(swa="exact", batch_invariant=True))
    tokens = prompt(330)
    one_shot = run_chunks(model, tokens, [])
    # Chunk edges: odd (splits ratio-2 groups), single tokens, crossing the window (128).
    chunked = run_chunks(model, tokens, [1, 2, 65, 128, 129, 200, 257])
    assert one_shot.shape == (330, 512)
    assert torch.equal(one_shot, chunked)


def decode(model: V41Model, states, firsts: list[torch.Tensor], steps: int) -> list[list[torch.Tensor]]:
    """Greedy-decode several requests together; returns each request's logits per step."""
    logits = [[f] for f in firsts]
    for _ in range(steps):
        chunks = [SeqChunk(st, lg[-1].argmax(-1).reshape(1)) for st, lg in zip(states, logits, strict=True)]
        for lg, out in zip(logits, model.forward(chunks), strict=True):
            lg.append(out.logits)
    return logits


def check_hit_equals_cold(n_prompt: int, hit: int, steps: int) -> None:
    model = V41Model(tiny_weights(), RuntimeOptions(swa="exact", batch_invariant=True))
    tokens = prompt(n_prompt, seed=2)
    donor = model.new_state()
    model.forward([SeqChunk(donor, tokens[:hit])])
    snapshot = donor.export_prefix(hit)

    cold = model.new_state()
    warm = model.new_state(snapshot)
    feed = warm.tokens_to_feed_after_hit(tokens)
    assert warm.num_computed == hit and len(feed) == n_prompt - hit
    first_cold = model.forward([SeqChunk(cold, tokens)])[0].logits
    first_warm = model.forward([SeqChunk(warm, feed)])[0].logits
    assert torch.equal(first_cold, first_warm)
    cold_logits, warm_logits = decode(model, [cold, warm], [first_cold, first_warm], steps)
    for a, b in zip(cold_logits, warm_logits, strict=True):
        assert torch.equal(a, b)
    for src in model.config.kv_source_layer_ids:
        assert torch.equal(cold.global_kv[src], warm.global_kv[src])
    assert cold.num_computed == warm.num_computed == n_prompt + steps


def test_prefix_hit_equals_cold_short_decode():
    check_hit_equals_cold(n_prompt=300, hit=256, steps=3)


@pytest.mark.slow
def test_prefix_hit_equals_cold_through_decode():
    check_hit_equals_cold(n_prompt=300, hit=256, steps=20)


@pytest.mark.slow
def test_prefix_hit_equals_cold_long_prompt():
    check_hit_equals_cold(n_prompt=1100, hit=1024, steps=24)
