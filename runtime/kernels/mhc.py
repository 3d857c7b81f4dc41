"""Fused "Mega-mHC" site: the previous sublayer's post (X' = post*out + C^T X), this site's
coefficients (unweighted RMS over 4D, the 24-wide GEMM with ``fn``, sigmoid / 2*sigmoid /
row softmax + Sinkhorn), the collapse with the shifted (previous) pre and the weighted
RMSNorm (DeepGEMM ``mega_mhc``; vLLM #56962).

Same signature and math as :func:`runtime.kernels.reference.mhc_site`, in two kernels on a
grid of row blocks (BLOCK_T rows) x D splits:
- ``_mhc_split_kernel`` sweeps its D range: X' (rounded to the stream dtype, as the
  reference rounds it) is written, the 24 projections accumulate as four
  [BLOCK_T, BLOCK_D] x [BLOCK_D, 32] GEMMs (one per stream), and sum(X'^2), the collapsed
  row and its sum of squares accumulate; it writes those partials per split;
- ``_mhc_finish_kernel`` adds the partials (one fixed reduction tree: deterministic), computes the
  coefficients (every program: the [BLOCK_T, 4, 4] Sinkhorn is cheap; split 0 stores
  them) and normalises its D range of the collapsed row.

Why split over D: with one program per row block sweeping all of D, decode shapes (one or
a handful of row blocks) left a site to one or a few SMs reading the whole 24 x 4D ``fn``
alone: 0.33 ms per site at ``mid`` with one row, two thirds of a static decode step
(benchmarks/results/decode_h200.md); split, 12 us per kernel. Many rows need no split
(one per row block, ``SPLIT_BELOW_PROGRAMS``); the float sums are then grouped exactly as
in one sweep.
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.config import V41Config
from runtime.kernels.backend import jit, next_pow2
from runtime.mhc import HcMix
from runtime.numerics import Numerics

TL_DTYPES = {torch.float32: tl.float32, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}
MIX_COLS = 32  # 24 projections padded to a power of two
SPLIT_BELOW_PROGRAMS = 64  # row blocks under which the site is split over D
SPLIT_PROGRAMS = 256  # programs the split grid aims for (row blocks x splits)
BLOCK_D = 64
NUM_WARPS = 4
# The 24 projections' tl.dot precision on CUDA. "tf32x3" (three TF32 tensor-core products)
# was 1.6-3.4x faster from 512 rows up in benchmarks/tile_sweep.py on the H200 (best with 2
# warps and 32-wide D tiles), and on the site alone it is the closest to a float64 oracle
# (9.4e-7 vs the FMA form's 8.5e-6). After the previous site's mixing (HAS_OUT) it is off
# by 1.1e-4, 18x the FMA form (benchmarks/results/mhc_precision_h200.md): the GPU parity
# test's one miss. Not understood yet, so the float32 FMA form ("ieee", 4 warps, 64-wide D
# tiles) stays the default. The interpreter computes in float32 whatever the request.
CUDA_PRECISION = "ieee"


def _mhc_split_kernel(
    streams_ptr, out_ptr, prev_post_ptr, prev_comb_ptr, pre_shift_ptr, fn_ptr,
    new_streams_ptr, x_ptr, part_ptr,
    T, D, SPLIT_D,
    HAS_OUT: tl.constexpr, DTYPE: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Sweep 1 over D range [split * SPLIT_D, (split + 1) * SPLIT_D);
    partials [split, T, 34]: 32 projection columns, sum X'^2, sum x^2."""
    HC: tl.constexpr = 4
    NCOL: tl.constexpr = 32
    PART: tl.constexpr = 34
    pid = tl.program_id(0)
    split = tl.program_id(1)
    rows = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    r_ok = rows < T
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, NCOL)
    c_ok = cols < 6 * HC
    width = HC * D
    p0 = tl.load(pre_shift_ptr + rows64 * HC + 0, mask=r_ok, other=0.0)
    p1 = tl.load(pre_shift_ptr + rows64 * HC + 1, mask=r_ok, other=0.0)
    p2 = tl.load(pre_shift_ptr + rows64 * HC + 2, mask=r_ok, other=0.0)
    p3 = tl.load(pre_shift_ptr + rows64 * HC + 3, mask=r_ok, other=0.0)
    m = tl.zeros((BLOCK_T, NCOL), dtype=tl.float32)
    sq = tl.zeros((BLOCK_T, BLOCK_D), dtype=tl.float32)
    xsq = tl.zeros((BLOCK_T, BLOCK_D), dtype=tl.float32)
    if HAS_OUT:  # the previous sublayer's post and combination, loaded once (not per D tile)
        cb = prev_comb_ptr + rows64 * HC * HC
        pp = prev_post_ptr + rows64 * HC
        q0 = tl.load(pp + 0, mask=r_ok, other=0.0)[:, None]
        q1 = tl.load(pp + 1, mask=r_ok, other=0.0)[:, None]
        q2 = tl.load(pp + 2, mask=r_ok, other=0.0)[:, None]
        q3 = tl.load(pp + 3, mask=r_ok, other=0.0)[:, None]
        c00 = tl.load(cb + 0, mask=r_ok, other=0.0)[:, None]
        c01 = tl.load(cb + 1, mask=r_ok, other=0.0)[:, None]
        c02 = tl.load(cb + 2, mask=r_ok, other=0.0)[:, None]
        c03 = tl.load(cb + 3, mask=r_ok, other=0.0)[:, None]
        c10 = tl.load(cb + 4, mask=r_ok, other=0.0)[:, None]
        c11 = tl.load(cb + 5, mask=r_ok, other=0.0)[:, None]
        c12 = tl.load(cb + 6, mask=r_ok, other=0.0)[:, None]
        c13 = tl.load(cb + 7, mask=r_ok, other=0.0)[:, None]
        c20 = tl.load(cb + 8, mask=r_ok, other=0.0)[:, None]
        c21 = tl.load(cb + 9, mask=r_ok, other=0.0)[:, None]
        c22 = tl.load(cb + 10, mask=r_ok, other=0.0)[:, None]
        c23 = tl.load(cb + 11, mask=r_ok, other=0.0)[:, None]
        c30 = tl.load(cb + 12, mask=r_ok, other=0.0)[:, None]
        c31 = tl.load(cb + 13, mask=r_ok, other=0.0)[:, None]
        c32 = tl.load(cb + 14, mask=r_ok, other=0.0)[:, None]
        c33 = tl.load(cb + 15, mask=r_ok, other=0.0)[:, None]
    d_lo = split * SPLIT_D
    for d0 in range(d_lo, d_lo + SPLIT_D, BLOCK_D):
        ds = d0 + tl.arange(0, BLOCK_D)
        d_ok = ds < D
        ok = r_ok[:, None] & d_ok[None, :]
        base = rows64[:, None] * width + ds[None, :]
        x0 = tl.load(streams_ptr + base + 0 * D, mask=ok, other=0.0).to(tl.float32)
        x1 = tl.load(streams_ptr + base + 1 * D, mask=ok, other=0.0).to(tl.float32)
        x2 = tl.load(streams_ptr + base + 2 * D, mask=ok, other=0.0).to(tl.float32)
        x3 = tl.load(streams_ptr + base + 3 * D, mask=ok, other=0.0).to(tl.float32)
        if HAS_OUT:
            o = tl.load(out_ptr + rows64[:, None] * D + ds[None, :], mask=ok, other=0.0).to(tl.float32)
            # X'_j = post_j * out + sum_i comb[i, j] * X_i (comb [hc, hc] row-major)
            y0 = q0 * o + (c00 * x0 + c10 * x1 + c20 * x2 + c30 * x3)
            y1 = q1 * o + (c01 * x0 + c11 * x1 + c21 * x2 + c31 * x3)
            y2 = q2 * o + (c02 * x0 + c12 * x1 + c22 * x2 + c32 * x3)
            y3 = q3 * o + (c03 * x0 + c13 * x1 + c23 * x2 + c33 * x3)
            x0 = y0.to(DTYPE).to(tl.float32)
            x1 = y1.to(DTYPE).to(tl.float32)
            x2 = y2.to(DTYPE).to(tl.float32)
            x3 = y3.to(DTYPE).to(tl.float32)
            tl.store(new_streams_ptr + base + 0 * D, x0.to(DTYPE), mask=ok)
            tl.store(new_streams_ptr + base + 1 * D, x1.to(DTYPE), mask=ok)
            tl.store(new_streams_ptr + base + 2 * D, x2.to(DTYPE), mask=ok)
            tl.store(new_streams_ptr + base + 3 * D, x3.to(DTYPE), mask=ok)
        sq += x0 * x0 + x1 * x1 + x2 * x2 + x3 * x3
        f_ok = d_ok[:, None] & c_ok[None, :]
        fcol = fn_ptr + cols[None, :] * width + ds[:, None]
        m += tl.dot(x0, tl.load(fcol + 0 * D, mask=f_ok, other=0.0), input_precision=PRECISION)
        m += tl.dot(x1, tl.load(fcol + 1 * D, mask=f_ok, other=0.0), input_precision=PRECISION)
        m += tl.dot(x2, tl.load(fcol + 2 * D, mask=f_ok, other=0.0), input_precision=PRECISION)
        m += tl.dot(x3, tl.load(fcol + 3 * D, mask=f_ok, other=0.0), input_precision=PRECISION)
        xc = (p0[:, None] * x0 + p1[:, None] * x1 + p2[:, None] * x2 + p3[:, None] * x3).to(DTYPE)
        tl.store(x_ptr + rows64[:, None] * D + ds[None, :], xc, mask=ok)
        xcf = xc.to(tl.float32)
        xsq += xcf * xcf
    part = part_ptr + (split * T + rows64) * PART  # [BLOCK_T] row starts
    tl.store(part[:, None] + cols[None, :], m, mask=r_ok[:, None])
    tl.store(part + NCOL, tl.sum(sq, axis=1), mask=r_ok)
    tl.store(part + NCOL + 1, tl.sum(xsq, axis=1), mask=r_ok)


def _mhc_finish_kernel(
    part_ptr, base_ptr, scale_ptr, norm_w_ptr,
    pre_ptr, post_ptr, comb_ptr, x_ptr,
    T, D, SPLIT_D, N_SPLITS, norm_eps, hc_eps, sinkhorn_iters,
    DTYPE: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, SPLITS_P2: tl.constexpr,
):
    """Partials summed over the splits -> coefficients (split 0 stores them) and the
    RMSNorm of this program's D range of the collapsed row. Every split's partials are
    loaded at once ([BLOCK_T, SPLITS_P2, ...] tiles, one memory round trip) and reduced
    by one fixed tree, so the sum is deterministic; a loop over the splits waited for
    one load per split (32 at ``mid`` decode)."""
    # an eager launch passes Python floats as fp32, inductor's (torch.compile) as fp64: pin fp32
    norm_eps, hc_eps = tl.cast(norm_eps, tl.float32), tl.cast(hc_eps, tl.float32)
    HC: tl.constexpr = 4
    PART: tl.constexpr = 34
    NCOL: tl.constexpr = 32
    pid = tl.program_id(0)
    split = tl.program_id(1)
    rows = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    r_ok = rows < T
    rows64 = rows.to(tl.int64)
    h = tl.arange(0, HC)
    c_idx = h[:, None] * HC + h[None, :]
    sp = tl.arange(0, SPLITS_P2)
    ok2 = r_ok[:, None] & (sp[None, :] < N_SPLITS)  # [BLOCK_T, SPLITS_P2]
    at = part_ptr + (sp[None, :].to(tl.int64) * T + rows64[:, None]) * PART  # [BLOCK_T, SPLITS_P2]
    z_pre = tl.sum(tl.load(at[:, :, None] + h[None, None, :], mask=ok2[:, :, None], other=0.0), axis=1)
    z_post = tl.sum(tl.load(at[:, :, None] + HC + h[None, None, :], mask=ok2[:, :, None], other=0.0), axis=1)
    z_comb = tl.sum(tl.load(at[:, :, None, None] + 2 * HC + c_idx[None, None, :, :], mask=ok2[:, :, None, None],
                            other=0.0), axis=1)
    sq = tl.sum(tl.load(at + NCOL, mask=ok2, other=0.0), axis=1)
    xsq = tl.sum(tl.load(at + NCOL + 1, mask=ok2, other=0.0), axis=1)
    rstd = 1.0 / tl.sqrt(sq / (HC * D) + norm_eps)
    s0 = tl.load(scale_ptr + 0)
    s1 = tl.load(scale_ptr + 1)
    s2 = tl.load(scale_ptr + 2)
    z_pre = (z_pre * rstd[:, None]) * s0 + tl.load(base_ptr + h)[None, :]
    z_post = (z_post * rstd[:, None]) * s1 + tl.load(base_ptr + HC + h)[None, :]
    z_comb = (z_comb * rstd[:, None, None]) * s2 + tl.load(base_ptr + 2 * HC + c_idx)[None, :, :]
    pre = 1.0 / (1.0 + tl.exp(-z_pre)) + hc_eps
    post = 2.0 / (1.0 + tl.exp(-z_post))
    e = tl.exp(z_comb - tl.max(z_comb, axis=2)[:, :, None])
    c = e / tl.sum(e, axis=2)[:, :, None] + hc_eps
    c = c / (tl.sum(c, axis=1)[:, None, :] + hc_eps)
    for _ in range(sinkhorn_iters - 1):
        c = c / (tl.sum(c, axis=2)[:, :, None] + hc_eps)
        c = c / (tl.sum(c, axis=1)[:, None, :] + hc_eps)
    if split == 0:
        tl.store(pre_ptr + rows64[:, None] * HC + h[None, :], pre, mask=r_ok[:, None])
        tl.store(post_ptr + rows64[:, None] * HC + h[None, :], post, mask=r_ok[:, None])
        tl.store(comb_ptr + rows64[:, None, None] * HC * HC + c_idx[None, :, :], c, mask=r_ok[:, None, None])
    rstd_x = 1.0 / tl.sqrt(xsq / D + norm_eps)
    d_lo = split * SPLIT_D
    for d0 in range(d_lo, d_lo + SPLIT_D, BLOCK_D):
        ds = d0 + tl.arange(0, BLOCK_D)
        d_ok = ds < D
        ok = r_ok[:, None] & d_ok[None, :]
        ptr = x_ptr + rows64[:, None] * D + ds[None, :]
        xc = tl.load(ptr, mask=ok, other=0.0).to(tl.float32)
        y = (xc * rstd_x[:, None]).to(DTYPE).to(tl.float32)
        w = tl.load(norm_w_ptr + ds, mask=d_ok, other=0.0).to(tl.float32)
        tl.store(ptr, (w[None, :] * y).to(DTYPE), mask=ok)


class FusedMhc:
    """Callable with :func:`runtime.kernels.reference.mhc_site`'s signature (hc = 4)."""

    def __init__(self, split: bool | None = None, precision: str | None = None, num_warps: int = NUM_WARPS,
                 block_t: int = 16, block_d: int = BLOCK_D) -> None:
        """``split``: None chooses by the row count (see the module doc); True/False force
        a split over D or one D range per row block (tests run both). ``precision``: the
        projections' ``tl.dot`` input precision (None: ``CUDA_PRECISION`` on CUDA, "ieee"
        interpreted); ``num_warps``, ``block_t`` (rows per program of the split kernel, >= 16
        for ``tl.dot``) and ``block_d``: tile choices for benchmark sweeps."""
        self.split_kernel = jit(_mhc_split_kernel)
        self.finish_kernel = jit(_mhc_finish_kernel)
        self.split = split
        self.precision = precision
        self.num_warps = num_warps
        self.block_t = block_t
        self.block_d = block_d

    def splits_for(self, t: int, d: int) -> int:
        """D splits for ``t`` rows (1: one program sweeps all of D for its rows)."""
        row_blocks = -(-t // self.block_t)
        use = self.split if self.split is not None else row_blocks < SPLIT_BELOW_PROGRAMS
        if not use:
            return 1
        d_blocks = -(-d // self.block_d)
        return max(1, min(d_blocks, -(-SPLIT_PROGRAMS // row_blocks)))

    def __call__(self, streams, out, prev: HcMix | None, pre_shift, fn, base, scale, norm_weight,
                 config: V41Config, num: Numerics) -> tuple[torch.Tensor, HcMix, torch.Tensor]:
        t, hc, d = streams.shape
        if hc != 4:
            raise ValueError(f"fused mhc: hc_mult must be 4, got {hc}")
        dev = streams.device
        streams = streams.contiguous()
        new_streams = torch.empty_like(streams) if out is not None else streams
        pre = torch.empty(t, hc, dtype=torch.float32, device=dev)
        post = torch.empty(t, hc, dtype=torch.float32, device=dev)
        comb = torch.empty(t, hc, hc, dtype=torch.float32, device=dev)
        x = torch.empty(t, d, dtype=streams.dtype, device=dev)
        if t == 0:
            return new_streams, HcMix(pre, post, comb), x
        if out is not None:
            out_arg = out.contiguous()
            post_arg, comb_arg = prev.post.float().contiguous(), prev.comb.float().contiguous()
        else:
            out_arg, post_arg, comb_arg = x, pre, comb  # unused (HAS_OUT=False)
        block_t, block_d = self.block_t, self.block_d
        pre_shift, fn = pre_shift.float().contiguous(), fn.float().contiguous()
        base, scale, norm_weight = base.float().contiguous(), scale.float().contiguous(), norm_weight.contiguous()
        dtype = TL_DTYPES[streams.dtype]
        splits = self.splits_for(t, d)
        split_d = -(-d // (splits * block_d)) * block_d
        splits = -(-d // split_d)
        part = torch.empty(splits, t, MIX_COLS + 2, dtype=torch.float32, device=dev)
        grid = (-(-t // block_t), splits)
        precision = self.precision or (CUDA_PRECISION if dev.type == "cuda" else "ieee")
        self.split_kernel[grid](
            streams, out_arg, post_arg, comb_arg, pre_shift, fn, new_streams, x, part,
            t, d, split_d, HAS_OUT=out is not None, DTYPE=dtype, BLOCK_T=block_t, BLOCK_D=block_d,
            PRECISION=precision, num_warps=self.num_warps,
        )
        # The finish kernel needs no tl.dot: few rows get small row blocks (more programs,
        # fewer masked lanes), many rows the split kernel's.
        finish_t = min(block_t, max(2, next_pow2(t)))
        self.finish_kernel[(-(-t // finish_t), splits)](
            part, base, scale, norm_weight, pre, post, comb, x,
            t, d, split_d, splits, config.rms_norm_eps, config.hc_eps, config.hc_sinkhorn_iters,
            DTYPE=dtype, BLOCK_T=finish_t, BLOCK_D=block_d, SPLITS_P2=max(2, next_pow2(splits)),
            num_warps=self.num_warps,
        )
        return new_streams, HcMix(pre, post, comb), x
