"""Fused sparse-MQA indexer logits (DeepGEMM ``mqa_logits``):

    s[t, j] = sum_h w[t, h] * ReLU(q[t, h] . k[j]) * dI^-1/2,   -inf where j >= counts[t]

Same signature and math as :func:`runtime.kernels.reference.index_logits`. A program owns
BLOCK_T queries x all heads (the GEMM's M = BLOCK_T * nI rows) and BLOCK_N keys; the head
reduction happens in registers, so only the [T, N] scores are written (the reference
materialises one [T, N] product per head). Key tiles wholly past every query's visible
count are not read.
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.kernels.backend import jit, next_pow2
from runtime.numerics import Numerics


def _index_logits_kernel(
    q_ptr, w_ptr, k_ptr, counts_ptr, out_ptr,
    T, N, scale,
    NI: tl.constexpr, DI: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
    IEEE: tl.constexpr,
):
    # an eager launch passes Python floats as fp32, inductor's (torch.compile) as fp64: pin fp32
    scale = tl.cast(scale, tl.float32)
    pid_t = tl.program_id(0)
    pid_n = tl.program_id(1)
    M: tl.constexpr = BLOCK_T * NI
    qrow = pid_t * M + tl.arange(0, M)  # flat (query, head) rows
    q_ok = qrow < T * NI
    ts = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = ts < T
    js = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    counts = tl.load(counts_ptr + ts, mask=t_ok, other=0)
    visible = (js[None, :] < counts[:, None]) & (js[None, :] < N)  # [BLOCK_T, BLOCK_N]
    out_offs = ts[:, None].to(tl.int64) * N + js[None, :]
    out_ok = t_ok[:, None] & (js[None, :] < N)
    if pid_n * BLOCK_N < tl.max(counts, axis=0):
        dim = tl.arange(0, DI)
        q = tl.load(q_ptr + qrow[:, None].to(tl.int64) * DI + dim[None, :], mask=q_ok[:, None], other=0.0)
        k = tl.load(k_ptr + js[None, :].to(tl.int64) * DI + dim[:, None], mask=js[None, :] < N, other=0.0)
        if IEEE:
            dots = tl.dot(q.to(tl.float32), k.to(tl.float32), input_precision="ieee")
        else:
            dots = tl.dot(q, k)  # [M, BLOCK_N], fp32 accumulation
        w = tl.load(w_ptr + qrow, mask=q_ok, other=0.0)
        terms = w[:, None] * (tl.maximum(dots, 0.0) * scale)
        scores = tl.sum(tl.reshape(terms, (BLOCK_T, NI, BLOCK_N)), axis=1)
        scores = tl.where(visible, scores, float("-inf"))
    else:
        scores = tl.full((BLOCK_T, BLOCK_N), float("-inf"), dtype=tl.float32)
    tl.store(out_ptr + out_offs, scores, mask=out_ok)


class FusedIndexLogits:
    """Callable with :func:`runtime.kernels.reference.index_logits`'s signature."""

    def __init__(self, shared_query_rows: int = 128, num_warps: int | None = None) -> None:
        """Up to 16 queries, one program's dot holds ``shared_query_rows`` (query x head)
        rows, so that many queries share each key tile read from memory: with one query per
        program, 8 queries read the keys 8 times (16 % of the roofline at mid, T=8, 128k
        keys; 37 % with 128 rows and 8 warps, benchmarks/tile_sweep.py on the H200).
        ``num_warps`` None: 8 for a 128-row dot, else 4. Both are for benchmark sweeps."""
        self.kernel = jit(_index_logits_kernel)
        self.shared_query_rows = shared_query_rows
        self.num_warps = num_warps

    def __call__(self, q: torch.Tensor, head_w: torch.Tensor, keys: torch.Tensor, counts: torch.Tensor,
                 num: Numerics) -> torch.Tensor:
        t, n_heads, dim = q.shape
        n = keys.shape[0]
        if n_heads != next_pow2(n_heads) or dim != next_pow2(dim):
            raise ValueError(f"fused indexer: index heads {n_heads} and head dim {dim} must be powers of two")
        out = torch.empty(t, n, dtype=torch.float32, device=q.device)
        if t == 0 or n == 0:
            return out
        q = q.contiguous()
        keys = keys.contiguous()
        if q.dtype != keys.dtype:
            q, keys = q.float(), keys.float()
        ieee = q.dtype == torch.float32
        if t <= 16:
            block_t = max(1, min(next_pow2(t), self.shared_query_rows // n_heads))
        else:
            block_t = max(1, 64 // n_heads)
        block_n = 64
        grid = (-(-t // block_t), -(-n // block_n))
        self.kernel[grid](
            q, head_w.float().contiguous(), keys, counts.long().contiguous(), out, t, n, dim**-0.5,
            NI=n_heads, DI=dim, BLOCK_T=block_t, BLOCK_N=block_n, IEEE=ieee,
            num_warps=self.num_warps or (8 if block_t * n_heads >= 128 else 4),
        )
        return out
