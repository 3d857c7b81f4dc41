"""FP8-block and MXFP4 weight formats against an independent float64 reference."""

from __future__ import annotations

import math

import torch

from runtime.checkpoint import formats


def _e4m3_table() -> tuple[list[float], list[int]]:
    """All finite e4m3 values with their byte codes (decoded by bit arithmetic)."""
    values, codes = [], []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exp, man = (code >> 3) & 0xF, code & 0x7
        if exp == 0xF and man == 0x7:
            continue  # NaN
        if exp == 0:
            v = man / 8 * 2.0**-6
        else:
            v = (1 + man / 8) * 2.0 ** (exp - 7)
        values.append(sign * v)
        codes.append(code)
    return values, codes


def _nearest_even(x: float, grid: list[float], codes: list[int]) -> float:
    """Nearest grid value; on a tie the one whose code is even."""
    best = min(range(len(grid)), key=lambda k: (abs(grid[k] - x), codes[k] % 2, abs(grid[k])))
    return grid[best]


def _nearest_even_tensor(x: torch.Tensor, grid: list[float], codes: list[int]) -> torch.Tensor:
    """Vectorised _nearest_even in float64."""
    g = torch.tensor(grid, dtype=torch.float64)
    odd = torch.tensor([c % 2 for c in codes], dtype=torch.float64)
    dist = (x.unsqueeze(-1) - g).abs()
    nearest = dist == dist.min(dim=-1, keepdim=True).values
    # among the nearest, prefer an even code (odd codes get +1 so argmin skips them)
    pick = torch.where(nearest, odd, torch.full_like(odd, 2.0)).argmin(dim=-1)
    return g[pick]


def _pow2_scale(amax: float, qmax: float) -> float:
    if amax == 0:
        return 1.0
    m, e = math.frexp(amax / qmax)  # amax/qmax = m * 2^e, m in [0.5, 1)
    return 2.0 ** (e - 1 if m == 0.5 else e)


def test_fp8_block_matches_float64_reference():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(40, 70, generator=g) * torch.logspace(-3, 2, 70)  # blocks of mixed magnitude
    w[0:32, 0:32] = 0.0  # an all-zero block gets scale 1
    q, scale = formats.quantize_fp8_block(w, (32, 32))
    assert q.dtype == torch.float8_e4m3fn and scale.dtype == torch.float8_e8m0fnu
    assert tuple(scale.shape) == (2, 3)
    deq = formats.dequantize_fp8_block(q, scale, (32, 32)).double()
    grid, codes = _e4m3_table()
    wd = w.double()
    for bi in range(2):
        for bj in range(3):
            blk = wd[bi * 32:(bi + 1) * 32, bj * 32:(bj + 1) * 32]
            s = _pow2_scale(float(blk.abs().max()), 448.0)
            assert float(scale.float()[bi, bj]) == s
            ref = _nearest_even_tensor(blk / s, grid, codes) * s
            assert torch.equal(deq[bi * 32:(bi + 1) * 32, bj * 32:(bj + 1) * 32], ref)
    # Whole-tensor check of the rounding with a vectorised float64 recompute.
    err = (deq - wd).abs()
    blockwise_scale = torch.tensor(
        [[_pow2_scale(float(wd[i:i + 32, j:j + 32].abs().max()), 448.0) for j in range(0, 70, 32)]
         for i in range(0, 40, 32)], dtype=torch.float64)
    s_full = blockwise_scale.repeat_interleave(32, 0).repeat_interleave(32, 1)[:40, :70]
    # e4m3 has 3 mantissa bits: relative half-ulp 1/16, and subnormal spacing 2^-9 at the bottom.
    assert bool((err <= torch.maximum(wd.abs() / 16, s_full * 2.0**-10) + 1e-12).all())


def test_fp8_row_blocks_for_engram_tables():
    w = torch.randn(5, 64)
    q, scale = formats.quantize_fp8_block(w, (1, 32))
    assert tuple(scale.shape) == (5, 2)
    for r in range(5):
        for c in range(2):
            assert float(scale.float()[r, c]) == _pow2_scale(float(w[r, c * 32:(c + 1) * 32].abs().max()), 448)


def test_mxfp4_matches_float64_reference_and_packs_low_nibble_first():
    grid = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    signed = grid + [-v for v in grid[1:]]
    codes = list(range(8)) + list(range(9, 16))
    g = torch.Generator().manual_seed(2)
    w = torch.randn(6, 64, generator=g)
    # exact ties: with amax 6 in the block the scale is 1; 0.25 -> 0, 0.75 -> 1, 2.5 -> 2, 5 -> 4
    w[0, :8] = torch.tensor([6.0, 0.25, 0.75, 2.5, 5.0, -1.25, -3.5, 1.75])
    packed, scale = formats.quantize_mxfp4(w)
    assert packed.dtype == torch.int8 and tuple(packed.shape) == (6, 32)
    assert tuple(scale.shape) == (6, 2)
    deq = formats.dequantize_mxfp4(packed, scale)
    assert deq[0, :8].tolist() == [6.0, 0.0, 1.0, 2.0, 4.0, -1.0, -4.0, 2.0]
    for r in range(6):
        for c in range(64):
            s = _pow2_scale(float(w[r, c // 32 * 32:(c // 32 + 1) * 32].abs().max()), 6.0)
            ref = _nearest_even(float(w[r, c]) / s, signed, codes) * s
            assert float(deq[r, c]) == ref
    # nibble order: element 0 in the low nibble of byte 0 (6.0 -> code 7, 0.25 -> code 0)
    assert int(packed.view(torch.uint8)[0, 0]) == 0x07


def test_quantising_dequantised_weights_is_exact():
    w = torch.randn(64, 96)
    q, s = formats.quantize_fp8_block(w)
    once = formats.dequantize_fp8_block(q, s)
    q2, s2 = formats.quantize_fp8_block(once)
    assert torch.equal(formats.dequantize_fp8_block(q2, s2), once)
    p, s = formats.quantize_mxfp4(w)
    once = formats.dequantize_mxfp4(p, s)
    p2, s2 = formats.quantize_mxfp4(once)
    assert torch.equal(formats.dequantize_mxfp4(p2, s2), once)
