"""RoPE (main, YaRN compress, inverse) and mHC (Sinkhorn, coefficients, collapse,
expand) against float64 recomputes written with explicit loops / complex numbers."""

from __future__ import annotations

import cmath
import math

import numpy as np
import torch

from runtime.config import V41Config, YarnScaling
from runtime.mhc import collapse, expand, hc_mix, sinkhorn
from runtime.numerics import Numerics
from runtime.rope import RopePair, apply_rope, default_inv_freq, yarn_inv_freq


def yarn_ref(dim: int, theta: float, y: YarnScaling) -> list[float]:
    """Per pair: wavelength-based blend between theta^(-2i/d) and that / factor."""
    def dim_for(rotations):
        return dim * math.log(y.original_max_position_embeddings / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    lo, hi = max(math.floor(dim_for(y.beta_fast)), 0), min(math.ceil(dim_for(y.beta_slow)), dim - 1)
    out = []
    for i in range(dim // 2):
        freq = theta ** (-(2 * i) / dim)
        ramp = 0.0 if i <= lo else 1.0 if i >= hi else (i - lo) / (hi - lo)
        out.append(freq * (1 - ramp) + (freq / y.factor) * ramp)
    return out


def test_yarn_frequencies():
    y = YarnScaling(factor=16, original_max_position_embeddings=65536, beta_fast=32, beta_slow=1)
    for dim in (16, 64):
        got = yarn_inv_freq(dim, 160000.0, y).double()
        assert torch.allclose(got, torch.tensor(yarn_ref(dim, 160000.0, y), dtype=torch.float64), rtol=1e-6)
    plain = default_inv_freq(64, 10000.0).double()
    assert torch.allclose(plain, torch.tensor([10000.0 ** (-(2 * i) / 64) for i in range(32)],
                                              dtype=torch.float64), rtol=1e-6)


def test_rope_interleaved_pairs_complex_reference_and_inverse():
    cfg = V41Config.preset("tiny")
    rope = RopePair(cfg)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, 128, generator=gen)
    positions = torch.tensor([0, 1, 7, 300, 4095])
    for table, inv in ((rope.main, default_inv_freq(16, cfg.rope_theta)),
                       (rope.compress, yarn_inv_freq(16, cfg.compress_rope_theta, cfg.rope_scaling))):
        cos, sin = table.lookup(positions, x.device)
        y = apply_rope(x, cos, sin)
        assert torch.equal(y[..., :112], x[..., :112])  # only the trailing 16 rotate
        for t, p in enumerate(positions.tolist()):
            for h in range(3):
                for i in range(8):
                    # The angle is p * inv_freq rounded once to float32 (as the model defines it).
                    angle = float(np.float32(p) * np.float32(inv[i]))
                    z = complex(x[t, h, 112 + 2 * i], x[t, h, 113 + 2 * i]) * cmath.exp(1j * angle)
                    assert abs(z.real - float(y[t, h, 112 + 2 * i])) < 2e-5
                    assert abs(z.imag - float(y[t, h, 113 + 2 * i])) < 2e-5
        back = apply_rope(y, cos, sin, inverse=True)
        assert torch.allclose(back, x, atol=1e-5)


def sinkhorn_ref(logits: list[list[float]], iters: int, eps: float) -> list[list[float]]:
    n = len(logits)
    m = []
    for row in logits:
        top = max(row)
        e = [math.exp(v - top) for v in row]
        s = sum(e)
        m.append([v / s + eps for v in e])
    def col_norm(m):
        sums = [sum(m[i][j] for i in range(n)) for j in range(n)]
        return [[m[i][j] / (sums[j] + eps) for j in range(n)] for i in range(n)]
    def row_norm(m):
        return [[v / (sum(row) + eps) for v in row] for row in m]
    m = col_norm(m)
    for _ in range(iters - 1):
        m = col_norm(row_norm(m))
    return m


def test_sinkhorn_matches_loops_and_is_doubly_stochastic():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 4, 4, generator=gen) * 2
    got = sinkhorn(logits, 20, 1e-6)
    for b in range(3):
        ref = torch.tensor(sinkhorn_ref(logits[b].double().tolist(), 20, 1e-6), dtype=torch.float64)
        assert torch.allclose(got[b].double(), ref, atol=1e-6)
    assert torch.allclose(got.sum(-2), torch.ones(3, 4), atol=1e-5)
    assert torch.allclose(got.sum(-1), torch.ones(3, 4), atol=1e-3)


def test_hc_mix_collapse_expand_against_loops():
    t, hc, d = 3, 4, 64
    gen = torch.Generator().manual_seed(2)
    streams = torch.randn(t, hc, d, generator=gen)
    fn = torch.randn(24, hc * d, generator=gen) / 16
    base = torch.randn(24, generator=gen) * 0.3
    scale = torch.tensor([0.9, 1.1, 1.3])
    mix = hc_mix(streams, fn, base, scale, norm_eps=1e-6, hc_eps=1e-6, sinkhorn_iters=20, num=Numerics())
    out = torch.randn(t, d, generator=gen)
    collapsed = collapse(streams, mix.pre)
    expanded = expand(out, streams, mix)
    for r in range(t):
        flat = streams[r].double().reshape(-1).tolist()
        rms = math.sqrt(sum(v * v for v in flat) / len(flat) + 1e-6)
        m = [sum(f / rms * float(w) for f, w in zip(flat, fn[k].double().tolist(), strict=True))
             for k in range(24)]
        sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
        pre = [sig(m[k] * 0.9 + float(base[k])) + 1e-6 for k in range(4)]
        post = [2 * sig(m[4 + k] * 1.1 + float(base[4 + k])) for k in range(4)]
        comb = sinkhorn_ref([[m[8 + 4 * i + j] * float(scale[2]) + float(base[8 + 4 * i + j]) for j in range(4)]
                             for i in range(4)], 20, 1e-6)
        assert torch.allclose(mix.pre[r].double(), torch.tensor(pre, dtype=torch.float64), atol=1e-5)
        assert torch.allclose(mix.post[r].double(), torch.tensor(post, dtype=torch.float64), atol=1e-5)
        assert torch.allclose(mix.comb[r].double(), torch.tensor(comb, dtype=torch.float64), atol=1e-5)
        x = streams[r].double()
        ref_collapse = sum(float(mix.pre[r, k]) * x[k] for k in range(4))
        assert torch.allclose(collapsed[r].double(), ref_collapse, atol=1e-5)
        for k in range(4):  # comb[j, k]: from stream j into stream k
            ref = float(mix.post[r, k]) * out[r].double() + sum(float(mix.comb[r, j, k]) * x[j] for j in range(4))
            assert torch.allclose(expanded[r, k].double(), ref, atol=1e-5)
