"""Fused "Mega-mHC" site: the previous sublayer's post (X' = post*out + C^T X), this site's
coefficients (unweighted RMS over 4D, the 24-wide GEMM with ``fn``, sigmoid / 2*sigmoid /
row softmax + Sinkhorn), the collapse with the shifted (previous) pre and the weighted
RMSNorm, in one Triton kernel (DeepGEMM ``mega_mhc``; vLLM #56962).

Same signature and math as :func:`runtime.kernels.reference.mhc_site`. One program per
row; two sweeps over D: the first writes X' (rounded to the stream dtype, as the
reference rounds it), accumulates the 24 projections, sum(X'^2) and the collapsed row;
the second applies the RMSNorm. The 4x4 Sinkhorn runs in registers.
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.config import V41Config
from runtime.kernels.backend import jit
from runtime.mhc import HcMix
from runtime.numerics import Numerics

TL_DTYPES = {torch.float32: tl.float32, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


def _mhc_kernel(
    streams_ptr, out_ptr, prev_post_ptr, prev_comb_ptr, pre_shift_ptr,
    fn_ptr, base_ptr, scale_ptr, norm_w_ptr,
    new_streams_ptr, pre_ptr, post_ptr, comb_ptr, x_ptr,
    D, norm_eps, hc_eps, sinkhorn_iters,
    HAS_OUT: tl.constexpr, DTYPE: tl.constexpr, BLOCK_D: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    HC: tl.constexpr = 4
    h = tl.arange(0, HC)
    r16 = tl.arange(0, 16)
    row_base = t * HC * D
    pre_s = tl.load(pre_shift_ptr + t * HC + h)
    if HAS_OUT:
        post_in = tl.load(prev_post_ptr + t * HC + h)
        comb_in = tl.load(prev_comb_ptr + t * HC * HC + h[:, None] * HC + h[None, :])  # [j, k]
    m_pre = tl.zeros((HC,), dtype=tl.float32)
    m_post = tl.zeros((HC,), dtype=tl.float32)
    m_comb = tl.zeros((16,), dtype=tl.float32)
    sq = tl.zeros((HC, BLOCK_D), dtype=tl.float32)
    xsq = tl.zeros((BLOCK_D,), dtype=tl.float32)
    width = HC * D
    for d0 in range(0, D, BLOCK_D):
        ds = d0 + tl.arange(0, BLOCK_D)
        d_ok = ds < D
        tile = h[:, None] * D + ds[None, :]
        tile_ok = d_ok[None, :] & (h[:, None] < HC)
        xs = tl.load(streams_ptr + row_base + tile, mask=tile_ok, other=0.0).to(tl.float32)  # [HC, BD]
        if HAS_OUT:
            o = tl.load(out_ptr + t * D + ds, mask=d_ok, other=0.0).to(tl.float32)
            mixed = tl.sum(comb_in[:, :, None] * xs[:, None, :], axis=0)  # [k, BD]
            xs = (post_in[:, None] * o[None, :] + mixed).to(DTYPE).to(tl.float32)
            tl.store(new_streams_ptr + row_base + tile, xs.to(DTYPE), mask=tile_ok)
        sq += xs * xs
        fcol = h[None, :, None] * D + ds[None, None, :]  # [1, HC, BD] column of the flat row
        f_ok = d_ok[None, None, :] & (h[None, :, None] < HC)
        f_pre = tl.load(fn_ptr + h[:, None, None] * width + fcol, mask=f_ok, other=0.0)
        f_post = tl.load(fn_ptr + (HC + h[:, None, None]) * width + fcol, mask=f_ok, other=0.0)
        f_comb = tl.load(fn_ptr + (2 * HC + r16[:, None, None]) * width + fcol, mask=f_ok, other=0.0)
        m_pre += tl.sum(tl.sum(f_pre * xs[None, :, :], axis=2), axis=1)
        m_post += tl.sum(tl.sum(f_post * xs[None, :, :], axis=2), axis=1)
        m_comb += tl.sum(tl.sum(f_comb * xs[None, :, :], axis=2), axis=1)
        xc = tl.sum(pre_s[:, None] * xs, axis=0).to(DTYPE)
        tl.store(x_ptr + t * D + ds, xc, mask=d_ok)
        xcf = xc.to(tl.float32)
        xsq += xcf * xcf
    rstd = 1.0 / tl.sqrt(tl.sum(tl.sum(sq, axis=1), axis=0) / width + norm_eps)
    s0 = tl.load(scale_ptr + 0)
    s1 = tl.load(scale_ptr + 1)
    s2 = tl.load(scale_ptr + 2)
    z_pre = m_pre * rstd * s0 + tl.load(base_ptr + h)
    z_post = m_post * rstd * s1 + tl.load(base_ptr + HC + h)
    z_comb = tl.reshape(m_comb * rstd * s2 + tl.load(base_ptr + 2 * HC + r16), (HC, HC))
    pre = 1.0 / (1.0 + tl.exp(-z_pre)) + hc_eps
    post = 2.0 / (1.0 + tl.exp(-z_post))
    e = tl.exp(z_comb - tl.max(z_comb, axis=1)[:, None])
    c = e / tl.sum(e, axis=1)[:, None] + hc_eps
    c = c / (tl.sum(c, axis=0)[None, :] + hc_eps)
    for _ in range(sinkhorn_iters - 1):
        c = c / (tl.sum(c, axis=1)[:, None] + hc_eps)
        c = c / (tl.sum(c, axis=0)[None, :] + hc_eps)
    tl.store(pre_ptr + t * HC + h, pre)
    tl.store(post_ptr + t * HC + h, post)
    tl.store(comb_ptr + t * HC * HC + h[:, None] * HC + h[None, :], c)
    rstd_x = 1.0 / tl.sqrt(tl.sum(xsq, axis=0) / D + norm_eps)
    for d0 in range(0, D, BLOCK_D):
        ds = d0 + tl.arange(0, BLOCK_D)
        d_ok = ds < D
        xc = tl.load(x_ptr + t * D + ds, mask=d_ok, other=0.0).to(tl.float32)
        y = (xc * rstd_x).to(DTYPE).to(tl.float32)
        w = tl.load(norm_w_ptr + ds, mask=d_ok, other=0.0).to(tl.float32)
        tl.store(x_ptr + t * D + ds, (w * y).to(DTYPE), mask=d_ok)


class FusedMhc:
    """Callable with :func:`runtime.kernels.reference.mhc_site`'s signature (hc = 4)."""

    def __init__(self) -> None:
        self.kernel = jit(_mhc_kernel)

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
        self.kernel[(t,)](
            streams, out_arg, post_arg, comb_arg, pre_shift.float().contiguous(),
            fn.float().contiguous(), base.float().contiguous(), scale.float().contiguous(),
            norm_weight.contiguous(),
            new_streams, pre, post, comb, x,
            d, config.rms_norm_eps, config.hc_eps, config.hc_sinkhorn_iters,
            HAS_OUT=out is not None, DTYPE=TL_DTYPES[streams.dtype], BLOCK_D=64,
        )
        return new_streams, HcMix(pre, post, comb), x
