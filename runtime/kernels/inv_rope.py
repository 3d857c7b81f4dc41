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
    """One load and one store per head, both of whole rows: the rope pairs are split out of
    the loaded row in registers (``tl.reshape`` + ``tl.split``) and joined back, as in
    runtime/kernels/rope_quant.py, where loading each pair's lanes again as stride-2
    gathers (and storing them so) measured slower. Every pair outside the rope tail keeps
    its loaded values (the ``where``). Here it replaced three loads and three stores
    (static sm_90 SASS 6 LDG / 3 STG -> 4 / 1, 82 -> 77 instructions); on the H200
    (benchmarks/results/tile_sweep_h200_inv_rope_compress.md, same run) `flash` 8 / 64 rows
    1.76 / 3.02 -> 1.65 / 2.83 us, `mid` one row 1.43 -> 1.36, elsewhere within 0.02 us
    either way or a little faster."""
    r = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < H
    base = (r * H + heads[:, None]) * HD  # [BLOCK_H, 1]
    dim = tl.arange(0, HD)
    x = tl.load(x_ptr + base + dim[None, :], mask=h_ok[:, None], other=0.0)  # [BLOCK_H, HD]
    pairs = tl.reshape(x, (BLOCK_H, HD // 2, 2))  # [BLOCK_H, HD/2, (even, odd)]
    even, odd = tl.split(pairs)
    even, odd = even.to(tl.float32), odd.to(tl.float32)
    # [BLOCK_H, HD/2] rope pair index (< 0: not rotated), the same for every head: cos / sin
    # loaded in the pairs' own shape (loaded as [HD/2] and broadcast they took a layout of
    # their own, converted through shared memory behind barriers)
    i = tl.arange(0, HD // 2)[None, :] - (HD // 2 - HALF) + 0 * heads[:, None]
    in_rope = i >= 0
    c = tl.load(cos_ptr + r * HALF + i, mask=in_rope, other=1.0)
    s = -tl.load(sin_ptr + r * HALF + i, mask=in_rope, other=0.0)
    rotated = tl.join((even * c - odd * s).to(DTYPE), (even * s + odd * c).to(DTYPE))  # [BLOCK_H, HD/2, 2]
    y = tl.where(in_rope[:, :, None], rotated, pairs.to(DTYPE))
    tl.store(out_ptr + base + dim[None, :], tl.reshape(y, (BLOCK_H, HD)), mask=h_ok[:, None])


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
