"""FP8 / NVFP4 / MXFP4 fake-quant against float64 recomputes written from the format
definitions (grid enumeration, nearest value, ties to the even code)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from runtime.quant import (
    fake_quant_fp8_ue8m0,
    fake_quant_mxfp4,
    fake_quant_nvfp4,
    pow2_ceil,
    round_to_e2m1,
)


def e4m3_grid() -> list[tuple[float, int]]:
    """(value, code) of every finite non-negative float8_e4m3fn number."""
    out = []
    for e in range(16):
        for m in range(8):
            if e == 15 and m == 7:
                continue  # NaN
            value = (m / 8) * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
            out.append((value, e * 8 + m))
    return out


E2M1 = [(v, code) for code, v in enumerate([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])]


def nearest_even(x: float, grid: list[tuple[float, int]]) -> float:
    """Round |x| to the grid: nearest value, ties to the even code; keep the sign."""
    mag = abs(x)
    best = min(grid, key=lambda vc: (abs(vc[0] - mag), vc[1] % 2))
    return math.copysign(best[0], x)


def f32(x: float) -> float:
    return float(np.float32(x))


def pow2_ceil_ref(t: float) -> float:
    m, e = math.frexp(t)
    return 2.0 ** (e - 1) if m == 0.5 else 2.0**e


def test_pow2_ceil():
    t = torch.tensor([1.0, 1.5, 0.25, 0.3, 3.0, 4.0, 1e-30, 2.0**-140], dtype=torch.float32)
    assert pow2_ceil(t).tolist() == [pow2_ceil_ref(float(v)) for v in t]


def test_e2m1_ties_and_values_by_hand():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.2, 0.3, 5.1, -0.75, -2.5, 6.0, 2.9])
    expected = [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 0.0, 0.5, 6.0, -1.0, -2.0, 6.0, 3.0]
    assert round_to_e2m1(x).tolist() == expected
    grid = torch.linspace(-6, 6, 2401)
    assert round_to_e2m1(grid).tolist() == [nearest_even(float(v), E2M1) for v in grid]


def fp8_block_ref(block: list[float]) -> list[float]:
    amax = max(max(abs(v) for v in block), f32(1e-4))
    scale = pow2_ceil_ref(f32(f32(amax) * f32(1.0 / 448.0)))
    grid = e4m3_grid()
    return [nearest_even(max(-448.0, min(448.0, v / scale)), grid) * scale for v in block]


def fp4_block_ref(block: list[float], e4m3_scale: bool) -> list[float]:
    amax = max(abs(v) for v in block)
    if e4m3_scale:
        scale = nearest_even(f32(max(amax, 6.0 * 2.0**-9) / 6.0), e4m3_grid())
    else:
        scale = pow2_ceil_ref(f32(f32(max(amax, 6.0 * 2.0**-126)) * f32(1.0 / 6.0)))
    return [nearest_even(max(-6.0, min(6.0, f32(v / scale))), E2M1) * scale for v in block]


@pytest.mark.parametrize("kind", ["fp8", "nvfp4", "mxfp4"])
def test_fake_quant_matches_format_definition(kind):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 64, generator=gen) * torch.tensor([1e-3, 0.1, 1.0, 7.0, 300.0, 1e4])[:, None]
    if kind == "fp8":
        got, block, ref = fake_quant_fp8_ue8m0(x), 32, fp8_block_ref
    elif kind == "nvfp4":
        got, block, ref = fake_quant_nvfp4(x), 16, lambda b: fp4_block_ref(b, True)
    else:
        got, block, ref = fake_quant_mxfp4(x), 32, lambda b: fp4_block_ref(b, False)
    rows = x.double().tolist()
    expected = [sum((ref(r[i : i + block]) for i in range(0, len(r), block)), []) for r in rows]
    assert torch.equal(got.double(), torch.tensor(expected, dtype=torch.float64))


def test_fp8_agrees_with_torch_cast_and_is_idempotent():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 128, generator=gen) * 3
    q = fake_quant_fp8_ue8m0(x)
    assert torch.equal(fake_quant_fp8_ue8m0(q), q)
    # With a power-of-two scale the division is exact, so the cast alone decides.
    blocks = x.reshape(4, 4, 32)
    scale = pow2_ceil(blocks.abs().amax(-1, keepdim=True) * (1.0 / 448.0))
    cast = (blocks / scale).to(torch.float8_e4m3fn).float() * scale
    assert torch.equal(cast.reshape(4, 128), q)
    assert (q - x).abs().max() <= x.abs().max() / 8  # 3 mantissa bits


def test_bad_width_is_rejected():
    with pytest.raises(ValueError, match="not a multiple of block 32"):
        fake_quant_mxfp4(torch.zeros(2, 48))
