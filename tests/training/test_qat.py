"""The training-time weight view equals what the checkpoint writer and loader produce,
so the exported testbed holds exactly the weights that were trained."""

from __future__ import annotations

import torch

from runtime.checkpoint import load_weights, save_checkpoint
from runtime.config import V41Config
from runtime.weights import V41Weights
from training.qat import quantised_view, release_roundtrip, snap_to_release


def _weights(seed: int = 3) -> V41Weights:
    return V41Weights.random(V41Config.preset("testbed"), seed, dtype=torch.float32)


def test_roundtrip_equals_checkpoint_save_and_load(tmp_path):
    weights = _weights()
    expected = {n: release_roundtrip(n, p) for n, p in weights.named_parameters()}
    save_checkpoint(weights, tmp_path)
    loaded = dict(load_weights(tmp_path, dtype=torch.float32).named_parameters())
    assert set(loaded) == set(expected)
    for name, value in expected.items():
        assert torch.equal(loaded[name], value), name


def test_roundtrip_is_idempotent_so_export_is_lossless(tmp_path):
    weights = _weights(seed=5)
    snap_to_release(weights)
    snapped = {n: p.detach().clone() for n, p in weights.named_parameters()}
    save_checkpoint(weights, tmp_path)
    loaded = dict(load_weights(tmp_path, dtype=torch.float32).named_parameters())
    changed = [n for n, v in snapped.items() if not torch.equal(loaded[n], v)]
    assert changed == []


def test_quantised_view_is_straight_through():
    w = torch.randn(64, 64, requires_grad=True)
    name = "layers.0.attn.wq_a.weight"  # FP8 32x32 blocks in the release
    view = quantised_view({name: w})[name]
    assert torch.equal(view.detach(), release_roundtrip(name, w))
    assert not torch.equal(view.detach(), w.detach())  # the rounding is real
    (view * torch.arange(64.0)).sum().backward()
    assert torch.equal(w.grad, torch.arange(64.0).expand(64, 64))
