"""Fused "Mega-Gate": gate GEMM + score function + bias-for-selection + top-k +
renormalise x routed_scaling_factor, in one Triton kernel (DeepGEMM ``bf16_mega_gate``).

Same signature and math as :func:`runtime.moe.route`. One program owns BLOCK_M rows and
all experts: the [BLOCK_M, E] logits stay in registers, the top-k is k rounds of
"row max, lowest index among equal values, knock it out", which is exactly the
reference's stable-sort tie rule.
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.config import V41Config
from runtime.kernels.backend import jit, next_pow2
from runtime.numerics import Numerics

SCORING_CODES = {"sqrtsoftplus": 0, "sigmoid": 1, "softmax": 2}


def _gate_kernel(
    x_ptr, w_ptr, bias_ptr, out_w_ptr, out_ids_ptr,
    T, E, D,
    inv_temp, route_scale,
    TOPK: tl.constexpr, BLOCK_K_OUT: tl.constexpr, SCORING: tl.constexpr, RENORM: tl.constexpr,
    IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_E)
    row_ok = rows < T
    col_ok = cols < E
    acc = tl.zeros((BLOCK_M, BLOCK_E), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        ds = d0 + tl.arange(0, BLOCK_D)
        d_ok = ds < D
        a = tl.load(x_ptr + rows[:, None] * D + ds[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        b = tl.load(w_ptr + cols[None, :] * D + ds[:, None], mask=col_ok[None, :] & d_ok[:, None], other=0.0)
        if IEEE:
            acc += tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        else:
            acc += tl.dot(a, b)
    z = acc * inv_temp
    if SCORING == 0:  # sqrt(softplus(z)), torch's threshold 20
        soft = tl.maximum(z, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(z)))
        soft = tl.where(z > 20.0, z, soft)
        scores = tl.sqrt(soft)
    elif SCORING == 1:
        scores = 1.0 / (1.0 + tl.exp(-z))
    else:
        zm = tl.where(col_ok[None, :], z, float("-inf"))
        e = tl.exp(zm - tl.max(zm, axis=1)[:, None])
        scores = e / tl.sum(e, axis=1)[:, None]
    bias = tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    sel = tl.where(col_ok[None, :], scores + bias[None, :], float("-inf"))
    kcols = tl.arange(0, BLOCK_K_OUT)
    top_w = tl.zeros((BLOCK_M, BLOCK_K_OUT), dtype=tl.float32)
    top_i = tl.zeros((BLOCK_M, BLOCK_K_OUT), dtype=tl.int64)
    for i in tl.static_range(TOPK):
        best = tl.max(sel, axis=1)
        pick = tl.min(tl.where(sel == best[:, None], cols[None, :], BLOCK_E), axis=1)
        hit = cols[None, :] == pick[:, None]
        w = tl.sum(tl.where(hit, scores, 0.0), axis=1)
        top_w = tl.where(kcols[None, :] == i, w[:, None], top_w)
        top_i = tl.where(kcols[None, :] == i, pick[:, None].to(tl.int64), top_i)
        sel = tl.where(hit, float("-inf"), sel)
    if RENORM:
        top_w = top_w / (tl.sum(top_w, axis=1)[:, None] + 1e-20)
    top_w = top_w * route_scale
    out_mask = row_ok[:, None] & (kcols[None, :] < TOPK)
    offs = rows[:, None] * TOPK + kcols[None, :]
    tl.store(out_w_ptr + offs, top_w, mask=out_mask)
    tl.store(out_ids_ptr + offs, top_i, mask=out_mask)


class FusedGate:
    """Callable with :func:`runtime.moe.route`'s signature."""

    def __init__(self) -> None:
        self.kernel = jit(_gate_kernel)

    def __call__(self, x: torch.Tensor, gate_w: torch.Tensor, bias: torch.Tensor, config: V41Config,
                 num: Numerics) -> tuple[torch.Tensor, torch.Tensor]:
        t, d = x.shape
        e = gate_w.shape[0]
        k = config.num_experts_per_tok
        x = x.contiguous()
        w = gate_w.contiguous()
        if x.dtype != w.dtype:
            x, w = x.float(), w.float()
        ieee = x.dtype == torch.float32
        out_w = torch.empty(t, k, dtype=torch.float32, device=x.device)
        out_ids = torch.empty(t, k, dtype=torch.int64, device=x.device)
        if t == 0:
            return out_w, out_ids
        block_e = max(16, next_pow2(e))
        block_m = 16
        block_d = 64 if block_e <= 128 else 32
        renorm = config.norm_topk_prob and k > 1
        self.kernel[(triton_cdiv(t, block_m),)](
            x, w, bias.float().contiguous(), out_w, out_ids, t, e, d,
            1.0 / config.gate_temp, config.routed_scaling_factor,
            TOPK=k, BLOCK_K_OUT=max(2, next_pow2(k)), SCORING=SCORING_CODES[config.scoring_func],
            RENORM=renorm, IEEE=ieee, BLOCK_M=block_m, BLOCK_E=block_e, BLOCK_D=block_d,
        )
        return out_w, out_ids


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
