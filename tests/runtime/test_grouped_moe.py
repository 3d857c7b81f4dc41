"""grouped_moe (fixed shapes, no host sync) against a float64 per-row recompute and
against the engine's runtime.moe.moe."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import runtime.grouped_moe as gm
from runtime.config import V41Config
from runtime.grouped_moe import StackedExperts, grouped_moe, stack_all_layers
from runtime.moe import moe, route
from runtime.numerics import Numerics
from runtime.weights import V41Weights

CFG = V41Config.preset("tiny")


@pytest.fixture(scope="module")
def weights():
    return V41Weights.random(CFG, seed=3)


def moe_float64(x, ffn, cfg):
    """Per row: the routed experts it picked (route's own choice), each a clamped SwiGLU in
    float64, weighted, plus the shared expert."""
    w, ids = route(x, ffn.gate.weight, ffn.gate.bias, cfg, Numerics())
    lim = cfg.swiglu_limit

    def swiglu(v, e_w1, e_w2, e_w3, scale):
        g = (v @ e_w1.double().T).clamp(max=lim)
        u = (v @ e_w3.double().T).clamp(-lim, lim)
        return (scale * F.silu(g) * u) @ e_w2.double().T

    out = []
    for t in range(x.shape[0]):
        v = x[t].double()
        acc = torch.zeros(x.shape[1], dtype=torch.float64)
        for j in range(ids.shape[1]):
            ex = ffn.experts[int(ids[t, j])]
            acc += swiglu(v, ex.w1.weight, ex.w2.weight, ex.w3.weight, float(w[t, j]))
        sh = ffn.shared_experts
        acc += swiglu(v, sh.w1.weight, sh.w2.weight, sh.w3.weight, 1.0)
        out.append(acc)
    return torch.stack(out)


@pytest.mark.parametrize("rows", [1, 3, 64])
def test_grouped_moe_equals_float64_and_the_engine_moe(weights, rows):
    gen = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, CFG.hidden_size, generator=gen)
    ffn = weights.layers[2].ffn
    stacked = StackedExperts.from_ffn(ffn, CFG.n_routed_experts)
    got = grouped_moe(x, ffn, stacked, CFG, Numerics())
    oracle = moe_float64(x, ffn, CFG)
    scale = oracle.abs().max()
    assert (got.double() - oracle).abs().max() / scale < 1e-5
    engine = moe(x, ffn, CFG, Numerics())
    assert (got - engine).abs().max() / scale < 1e-6


def test_fallback_product_equals_grouped_mm(weights, monkeypatch):
    x = torch.randn(17, CFG.hidden_size, generator=torch.Generator().manual_seed(1))
    ffn = weights.layers[5].ffn
    stacked = stack_all_layers(weights)[5]
    grouped = grouped_moe(x, ffn, stacked, CFG, Numerics())
    monkeypatch.setattr(gm, "_grouped_mm_supported", lambda *a: False)
    fallback = grouped_moe(x, ffn, stacked, CFG, Numerics())
    assert (grouped - fallback).abs().max() / grouped.abs().max() < 1e-6


def test_no_host_sync(weights, monkeypatch):
    """Every read of a tensor's value on the host raises: the step may not branch on data."""
    x = torch.randn(9, CFG.hidden_size, generator=torch.Generator().manual_seed(2))
    ffn = weights.layers[0].ffn
    stacked = StackedExperts.from_ffn(ffn, CFG.n_routed_experts)

    def refuse(*_a, **_k):
        raise AssertionError("host sync")

    for name in ("item", "tolist", "__int__", "__bool__", "__index__", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    out = grouped_moe(x, ffn, stacked, CFG, Numerics())
    monkeypatch.undo()
    assert torch.isfinite(out).all()


def test_batch_invariant_numerics_are_refused(weights):
    ffn = weights.layers[0].ffn
    with pytest.raises(ValueError, match="batch-invariant"):
        grouped_moe(torch.zeros(2, CFG.hidden_size), ffn, StackedExperts.from_ffn(ffn, CFG.n_routed_experts),
                    CFG, Numerics(64))
