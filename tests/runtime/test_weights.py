"""V41Weights: released tensor names, shapes, dtypes and deterministic random init."""

from __future__ import annotations

import math

import torch

from runtime.config import V41Config
from runtime.quant import fake_quant_fp8_ue8m0
from runtime.weights import V41Weights, parameter_specs


def test_released_names_and_shapes():
    cfg = V41Config.preset("tiny")
    sd = V41Weights(cfg).state_dict()
    expect = {
        "embed.weight": (512, 256),
        "head.weight": (512, 256),
        "norm.weight": (256,),
        "layers.0.hc_attn_fn": (24, 1024),
        "layers.0.attn.wq_b.weight": (4 * 128, 64),
        "layers.0.attn.wo_a.weight": (2 * 64, 2 * 128),
        "layers.0.attn.attn_sink": (4,),
        "layers.2.attn.compressor.wgate.weight": (128, 256),
        "layers.6.attn.compressor.wkv.weight": (128, 256),
        "layers.2.attn.indexer.wk.weight": (32, 128),
        "layers.8.attn.indexer.weights_proj.weight": (2, 256),
        "layers.8.attn.indexer.wq_b.weight": (64, 64),
        "layers.5.ffn.gate.bias": (8,),
        "layers.5.ffn.experts.7.w2.weight": (256, 128),
        "layers.5.ffn.shared_experts.w3.weight": (128, 256),
        "layers.1.engram.embed.weight": (6126, 32),
        "layers.4.engram.wkv.weight": (5 * 256, 6 * 32),
    }
    for name, shape in expect.items():
        assert tuple(sd[name].shape) == shape, name
    # Roles: ratio-1 sources have no gate, re-index layers own no keys, reuse layers no indexer.
    assert "layers.6.attn.compressor.wgate.weight" not in sd
    assert "layers.8.attn.indexer.wk.weight" not in sd
    assert not any(k.startswith("layers.7.attn.indexer") for k in sd)
    assert not any(k.startswith("layers.3.attn.compressor") for k in sd)
    assert sd["layers.0.hc_ffn_base"].dtype == torch.float32


def test_random_is_deterministic_and_shared_dtype_rules():
    cfg = V41Config.preset("tiny")
    a = V41Weights.random(cfg, seed=0).state_dict()
    b = V41Weights.random(cfg, seed=0).state_dict()
    c = V41Weights.random(cfg, seed=1).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["layers.3.attn.wkv.weight"], c["layers.3.attn.wkv.weight"])
    bf = V41Weights.random(cfg, seed=0, dtype=torch.bfloat16).state_dict()
    assert bf["layers.0.attn.wkv.weight"].dtype == torch.bfloat16
    assert bf["layers.0.attn.attn_sink"].dtype == torch.float32
    table = a["layers.1.engram.embed.weight"]
    assert torch.equal(fake_quant_fp8_ue8m0(table), table)  # stored on its FP8 grid


def test_flash_and_mid_sizes_on_meta():
    flash = sum(math.prod(s.shape) for s in parameter_specs(V41Config.preset("flash")))
    assert 740e9 < flash < 760e9  # ~552B backbone + ~197B engram
    mid = sum(p.numel() for p in V41Weights(V41Config.preset("mid"), device="meta").parameters())
    assert 4e9 < mid < 8e9


def test_draw_on_device_uses_that_devices_generator():
    # on the CPU, drawing "on the device" is the CPU draw: the same numbers, parameter by
    # parameter (on a GPU the same code draws there, with that generator's numbers)
    config = V41Config.preset("tiny")
    cpu = dict(V41Weights.random(config, 7).named_parameters())
    drawn = dict(V41Weights.random(config, 7, device="cpu", draw_on_device=True).named_parameters())
    assert cpu.keys() == drawn.keys()
    for name, value in cpu.items():
        assert torch.equal(value, drawn[name]), name


def test_engram_tables_snapped_in_row_blocks_equal_one_snap():
    """copy_fp8_snapped bounds the fake-quant's temporaries by snapping a table in row
    blocks; the scale blocks lie inside a row, so the result is the one-shot snap's."""
    from runtime.weights import copy_fp8_snapped

    value = torch.randn(37, 64, generator=torch.Generator().manual_seed(0)) * torch.logspace(-3, 3, 64)
    for dtype in (torch.float32, torch.bfloat16):
        whole = fake_quant_fp8_ue8m0(value).to(dtype)
        for rows in (1, 5, 37, 100):
            out = torch.empty(37, 64, dtype=dtype)
            copy_fp8_snapped(out, value, rows=rows)
            assert torch.equal(out, whole), (dtype, rows)
