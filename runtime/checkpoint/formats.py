"""Weight storage formats of the released checkpoint: FP8 block and MXFP4 experts.

Why these two: the released DeepSeek-V4.1-Flash stores attention projections, shared
experts and the Engram projection/tables as FP8 e4m3 with one power-of-two (ue8m0)
scale per 32 x 32 block (per 1 x 32 for the Engram tables), and the routed experts as
MXFP4: e2m1 values packed two per byte in an int8 container (element 2k in the low
nibble, 2k+1 in the high one) with one ue8m0 scale per row per 32 input channels.
A scale tensor sits next to each weight as ``<module>.scale`` (float8_e8m0fnu).

The runtime computes in float, so loading dequantises; saving quantises. Both are
plain arithmetic here, written so a reader can check each rounding rule:

- FP8: scale = 2^ceil(log2(amax / 448)); q = e4m3(w / scale) (round to nearest even);
- FP4: scale = 2^ceil(log2(amax / 6)); q = the nearest e2m1 value of w / scale, ties
  to the even code; the e2m1 grid is {0, 0.5, 1, 1.5, 2, 3, 4, 6} with a sign bit.

An all-zero block gets scale 1 (code 127). Quantising an already-dequantised tensor
gives it back exactly, which is what makes save -> load -> save idempotent.
"""

from __future__ import annotations

import math

import torch

E4M3_MAX = 448.0
E2M1_MAX = 6.0
E8M0_BIAS = 127
# e2m1 magnitudes by code 0..7 (sign is bit 3)
E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _pad_to_blocks(w: torch.Tensor, block: tuple[int, int]) -> torch.Tensor:
    rows, cols = w.shape
    pr, pc = _ceil_div(rows, block[0]) * block[0], _ceil_div(cols, block[1]) * block[1]
    if (pr, pc) == (rows, cols):
        return w
    out = w.new_zeros(pr, pc)
    out[:rows, :cols] = w
    return out


def _block_amax(w: torch.Tensor, block: tuple[int, int]) -> torch.Tensor:
    """Max |w| per (block[0] x block[1]) tile: [ceil(rows/b0), ceil(cols/b1)]."""
    padded = _pad_to_blocks(w.abs(), block)
    r, c = padded.shape
    tiles = padded.reshape(r // block[0], block[0], c // block[1], block[1])
    return tiles.amax(dim=3).amax(dim=1)


def _scale_codes(amax: torch.Tensor, qmax: float) -> torch.Tensor:
    """ue8m0 exponent codes (uint8) of 2^ceil(log2(amax / qmax)); 127 for amax == 0."""
    amax = amax.to(torch.float64)
    ratio = torch.where(amax > 0, amax / qmax, torch.ones_like(amax))
    exponent = torch.ceil(torch.log2(ratio))
    exponent = exponent.clamp(-E8M0_BIAS, E8M0_BIAS)
    return (exponent + E8M0_BIAS).to(torch.uint8)


def _expand_scales(codes: torch.Tensor, block: tuple[int, int], shape: torch.Size) -> torch.Tensor:
    """Per-element float32 scale 2^(code - 127) of a [rows, cols] weight."""
    scale = torch.exp2(codes.to(torch.float32) - E8M0_BIAS)
    scale = scale.repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)
    return scale[: shape[0], : shape[1]]


def codes_to_e8m0(codes: torch.Tensor) -> torch.Tensor:
    """uint8 exponent codes as a float8_e8m0fnu tensor (same bytes)."""
    return codes.contiguous().view(torch.float8_e8m0fnu)


def e8m0_to_codes(scale: torch.Tensor) -> torch.Tensor:
    if scale.dtype == torch.float8_e8m0fnu:
        return scale.contiguous().view(torch.uint8)
    if scale.dtype == torch.uint8:
        return scale
    raise TypeError(f"expected float8_e8m0fnu or uint8 scale codes, got {scale.dtype}")


# ---------------------------------------------------------------------- FP8 block
def quantize_fp8_block(w: torch.Tensor, block: tuple[int, int] = (32, 32)
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """w [rows, cols] -> (e4m3 [rows, cols], e8m0 scales [ceil(rows/b0), ceil(cols/b1)])."""
    w32 = w.detach().to(torch.float32)
    codes = _scale_codes(_block_amax(w32, block), E4M3_MAX)
    scaled = w32 / _expand_scales(codes, block, w32.shape)
    return scaled.to(torch.float8_e4m3fn), codes_to_e8m0(codes)


def dequantize_fp8_block(q: torch.Tensor, scale: torch.Tensor, block: tuple[int, int] = (32, 32),
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    codes = e8m0_to_codes(scale)
    return (q.to(torch.float32) * _expand_scales(codes, block, q.shape)).to(dtype)


# ---------------------------------------------------------------------- MXFP4
def _e2m1_codes(x: torch.Tensor) -> torch.Tensor:
    """Nearest e2m1 code (0..15, sign in bit 3) of float32 x already within [-6, 6];
    a tie goes to the even magnitude code.

    The grid spacing is 0.5 below 2, 1 in [2, 4) and 2 from 4 on. Dividing by the
    spacing (a power of two, exact) and rounding half to even lands on an integer whose
    parity is the code's, so ``torch.round`` gives the tie rule; the code is then
    2v below 2, v + 2 in [2, 4) and v / 2 + 4 from 4 on.
    """
    mag = x.abs().clamp(max=E2M1_MAX)
    step = torch.where(mag < 2.0, 0.5, torch.where(mag < 4.0, 1.0, 2.0))
    v = torch.round(mag / step) * step
    code = torch.where(v < 2.0, v * 2, torch.where(v < 4.0, v + 2, v / 2 + 4)).to(torch.uint8)
    sign = ((x < 0) & (code > 0)).to(torch.uint8)  # no negative zero
    return code | (sign << 3)


def _e2m1_values(codes: torch.Tensor) -> torch.Tensor:
    grid = torch.tensor(E2M1_GRID, dtype=torch.float32, device=codes.device)
    mag = grid[(codes & 7).long()]
    return torch.where((codes & 8) > 0, -mag, mag)


def quantize_mxfp4(w: torch.Tensor, block: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """w [rows, cols] (cols even) -> (int8 packed [rows, cols/2], e8m0 [rows, ceil(cols/block)])."""
    rows, cols = w.shape
    if cols % 2:
        raise ValueError(f"MXFP4 packing needs an even number of columns, got {cols}")
    w32 = w.detach().to(torch.float32)
    codes = _scale_codes(_block_amax(w32, (1, block)), E2M1_MAX)
    nib = _e2m1_codes(w32 / _expand_scales(codes, (1, block), w32.shape))
    packed = nib[:, 0::2] | (nib[:, 1::2] << 4)
    return packed.view(torch.int8), codes_to_e8m0(codes)


def dequantize_mxfp4(packed: torch.Tensor, scale: torch.Tensor, block: int = 32,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    raw = packed.contiguous().view(torch.uint8)
    rows, half = raw.shape
    nib = torch.stack([raw & 0x0F, raw >> 4], dim=-1).reshape(rows, 2 * half)
    codes = e8m0_to_codes(scale)
    return (_e2m1_values(nib) * _expand_scales(codes, (1, block), nib.shape)).to(dtype)


def scale_shape(weight_shape: tuple[int, int], block: tuple[int, int]) -> tuple[int, int]:
    return (math.ceil(weight_shape[0] / block[0]), math.ceil(weight_shape[1] / block[1]))
