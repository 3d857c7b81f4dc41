"""Determinism and the batch-invariant mode: a request's numbers do not depend on what
else is in the step (so an A/A comparison has zero discordance)."""

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
def weights() -> V41Weights:
    return V41Weights.random(V41Config.preset("tiny"), seed=7)


def prompt(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 512, (n,), generator=torch.Generator().manual_seed(seed))


def test_same_request_alone_or_batched_gives_identical_logits():
    model = V41Model(weights(), RuntimeOptions(batch_invariant=True))
    target = prompt(100, seed=1)
    alone = model.new_state()
    alone_logits = [model.forward([SeqChunk(alone, target)])[0].logits]
    for step in range(2):
        alone_logits.append(model.forward([SeqChunk(alone, target[step : step + 1])])[0].logits)

    # Batched: the target shares each step with other requests (prefills and decodes).
    other_a, other_b = model.new_state(), model.new_state()
    model.forward([SeqChunk(other_a, prompt(70, seed=2))])
    mine = model.new_state()
    outs = model.forward([
        SeqChunk(other_a, prompt(1, seed=3)),
        SeqChunk(mine, target),
        SeqChunk(other_b, prompt(90, seed=4), logits="all"),
    ])
    batched_logits = [outs[1].logits]
    for step in range(2):
        chunks = [SeqChunk(mine, target[step : step + 1]), SeqChunk(other_b, prompt(1 + step, seed=5 + step))]
        batched_logits.append(model.forward(chunks[::-1] if step % 2 else chunks)[step % 2].logits)
    for a, b in zip(alone_logits, batched_logits, strict=True):
        assert torch.equal(a, b)


def test_same_inputs_same_outputs_on_the_default_path():
    model = V41Model(weights(), RuntimeOptions())
    runs = []
    for _ in range(2):
        st = model.new_state()
        runs.append(model.forward([SeqChunk(st, prompt(60, seed=9), logits="all")])[0].logits)
    assert torch.equal(runs[0], runs[1])


def test_two_models_share_one_weights_object():
    w = weights()
    exact, bounded = V41Model(w, RuntimeOptions()), V41Model(w, RuntimeOptions(swa="bounded"))
    assert exact.weights is bounded.weights
    assert exact.options.decoder_trim is False and bounded.options.decoder_trim is True
    before = {k: v.data_ptr() for k, v in w.state_dict().items()}
    st = bounded.new_state()
    bounded.forward([SeqChunk(st, prompt(20, seed=1))])
    assert {k: v.data_ptr() for k, v in w.state_dict().items()} == before
