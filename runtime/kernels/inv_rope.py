"""Fused inverse RoPE + cast for the grouped output projection's input (the first half of
sglang's ``fused_wo_a`` / vLLM's ``fused_inv_rope_fp8_quant``).

Same signature and math as :func:`runtime.kernels.reference.inverse_rope`: rotate each
head's trailing rope pairs by -angle and cast the whole row to the model dtype in one
pass (the reference makes a rotated copy, a concatenation and a cast). The FP8 quant of
the release's path is not applied: the reference projection runs on the model dtype.
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.kernels.backend import jit, next_pow2
from runtime.kernels.mhc import TL_DTYPES


def _inv_rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, H,
                     BLOCK_H: tl.constexpr, HD: tl.constexpr, HALF: tl.constexpr, DTYPE: tl.constexpr):
    """Every load is issued before the first store. The compiler keeps a load after a
    store to a pointer that may alias it, so the form that stored the leading channels
    before loading the rope pairs took two memory round trips (LDG, STG, LDG, STG in the
    sm_90 SASS), the whole cost of a one-row call beyond the launch."""
    r = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < H
    base = (r * H + heads[:, None]) * HD  # [BLOCK_H, 1]
    dim = tl.arange(0, HD)
    rope_start: tl.constexpr = HD - 2 * HALF
    i = tl.arange(0, HALF)
    even_at = base + rope_start + 2 * i[None, :]  # [BLOCK_H, HALF]
    x = tl.load(x_ptr + base + dim[None, :], mask=h_ok[:, None], other=0.0)  # [BLOCK_H, HD]
    even = tl.load(x_ptr + even_at, mask=h_ok[:, None], other=0.0).to(tl.float32)
    odd = tl.load(x_ptr + even_at + 1, mask=h_ok[:, None], other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + r * HALF + i)[None, :]
    s = -tl.load(sin_ptr + r * HALF + i)[None, :]
    tl.store(out_ptr + base + dim[None, :], x.to(DTYPE), mask=h_ok[:, None] & (dim[None, :] < rope_start))
    tl.store(out_ptr + even_at, (even * c - odd * s).to(DTYPE), mask=h_ok[:, None])
    tl.store(out_ptr + even_at + 1, (even * s + odd * c).to(DTYPE), mask=h_ok[:, None])


TILE_ELEMENTS = 1024  # per program: one row's heads in blocks of at most this many values


class FusedInverseRope:
    """Callable with :func:`runtime.kernels.reference.inverse_rope`'s signature.

    A program owns one row and a block of its heads: one program for all 64 heads of a
    ``flash`` row held a [64, 512] tile and spilled (41-54 % of the roofline from 512 rows
    up), and a single-row call waited on one program's long chain of loads. Blocks of
    TILE_ELEMENTS values (the best of 1k-32k in benchmarks/mhc_rope_tiles.py on the H200:
    88-97 % of the roofline from 64 flash rows up, 1.5 us for one row) keep every tile in
    registers and spread a row over several SMs."""

    def __init__(self, tile_elements: int = TILE_ELEMENTS, num_warps: int = 4) -> None:
        self.kernel = jit(_inv_rope_kernel)
        self.tile_elements = tile_elements
        self.num_warps = num_warps

    def __call__(self, out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        rows, n_heads, hd = out.shape
        half = cos.shape[-1]
        if hd != next_pow2(hd) or half != next_pow2(half):
            raise ValueError(f"fused inv_rope: head_dim {hd} and rope pairs {half} must be powers of two")
        result = torch.empty(rows, n_heads, hd, dtype=dtype, device=out.device)
        if rows == 0:
            return result
        block_h = max(1, min(next_pow2(n_heads), self.tile_elements // hd))
        self.kernel[(rows, -(-n_heads // block_h))](
            out.float().contiguous(), cos.float().contiguous(), sin.float().contiguous(), result, n_heads,
            BLOCK_H=block_h, HD=hd, HALF=half, DTYPE=TL_DTYPES[dtype], num_warps=self.num_warps,
        )
        return result
