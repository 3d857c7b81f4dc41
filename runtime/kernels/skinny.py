"""Fused skinny GEMM: the decode step's projections, x [M, K] @ W[N, K]^T for M = 1-64
rows, and the grouped form (G independent blocks, ``wo_a``) in the same kernel.

Same signature and math as :func:`runtime.kernels.reference.linear`: float32 accumulation,
the result rounded once to the weight's dtype. Only the order of the K sum differs from
cuBLAS's (K splits summed in split order, each split in ``tl.dot`` / tree order), so the
result is deterministic but not bit-equal to the reference.

Why a kernel: at decode shapes cuBLAS picked tiles that gave a 2 MiB weight 8-16
programs (runtime/kernels/skinny_tiles.py says how the grid is sized instead). Calls with
more rows or a large weight, and batch-invariant numerics, stay with the reference.
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.kernels.backend import interpret_requested, jit
from runtime.kernels.mhc import TL_DTYPES
from runtime.kernels.reference import linear as reference_linear
from runtime.kernels.skinny_tiles import SkinnyPolicy
from runtime.kernels.tickets import TicketCounters

# Under Triton's interpreter every program runs one after another in numpy, so the GPU
# policy's ~1,000 programs per one-row call cost seconds; there the default is one program
# per output tile (the same kernel and branches; the parity tests force the split forms).
INTERPRETED = SkinnyPolicy(programs=1, programs_one_row=1)


def _linear_kernel(
    x_ptr, w_ptr, out_ptr, part_ptr, count_ptr,
    M, N, K, SPLIT_K, x_sg, x_sm, w_sg, w_sn, o_sg, o_sm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLITS: tl.constexpr,
    DOT: tl.constexpr, IEEE: tl.constexpr, DTYPE: tl.constexpr,
):
    """Program (tile, split): tile = (group, row block, column block), split = K range
    [split * SPLIT_K, (split + 1) * SPLIT_K). out[g, m, n] = sum_k x[g, m, k] w[g, n, k]."""
    tile = tl.program_id(0)
    split = tl.program_id(1)
    n_blocks = tl.cdiv(N, BLOCK_N)
    m_blocks = tl.cdiv(M, BLOCK_M)
    g = (tile // (n_blocks * m_blocks)).to(tl.int64)
    rows = (tile // n_blocks) % m_blocks * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile % n_blocks * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    x_rows = x_ptr + g * x_sg + rows.to(tl.int64)[:, None] * x_sm  # [BLOCK_M, 1]
    w_cols = w_ptr + g * w_sg + cols.to(tl.int64)[None, :] * w_sn  # [1, BLOCK_N]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_lo = split * SPLIT_K
    k_hi = tl.minimum(k_lo + SPLIT_K, K)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < k_hi
        a = tl.load(x_rows + ks[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)  # [BM, BK]
        b = tl.load(w_cols + ks[:, None], mask=col_ok[None, :] & k_ok[:, None], other=0.0)  # [BK, BN]
        if DOT:
            if IEEE:
                acc += tl.dot(a, b, input_precision="ieee")
            else:
                acc += tl.dot(a, b)
        else:  # one row: multiply-adds, [1, BK, 1] x [1, BK, BN] summed over K
            acc += tl.sum(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], axis=1)
    out_at = out_ptr + g * o_sg + rows.to(tl.int64)[:, None] * o_sm + cols[None, :]
    ok = row_ok[:, None] & col_ok[None, :]
    if SPLITS == 1:
        tl.store(out_at, acc.to(DTYPE), mask=ok)
    else:
        n_tiles = tl.num_programs(0)
        cell = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        tile_cells = BLOCK_M * BLOCK_N
        tl.store(part_ptr + (split * n_tiles + tile).to(tl.int64) * tile_cells + cell, acc)
        tl.debug_barrier()  # every thread's partial is written before the ticket releases them
        ticket = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel")
        last = ticket == SPLITS - 1
        tl.store(count_ptr + tile, 0, mask=last)  # all others have taken theirs: reset for the next call
        for _ in range(0, tl.where(last, 1, 0)):
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for s in tl.static_range(SPLITS):  # split order, whoever finished last
                # .cg: read through L2, never a stale L1 line of another program's partial
                total += tl.load(part_ptr + (s * n_tiles + tile).to(tl.int64) * tile_cells + cell,
                                 cache_modifier=".cg")
            tl.store(out_at, total.to(DTYPE), mask=ok)


class FusedLinear:
    """Callable with :func:`runtime.kernels.reference.linear`'s signature: ``(x, weight)``,
    weight [N, K] (x [..., K] -> [..., N]) or [G, N, K] (x [R, G, K] -> [R, G, N]).

    Calls the policy does not take (more rows, a large weight) and dtypes the kernel has no
    code for run the reference. Holds the tiles' ticket counters (``tickets``)."""

    def __init__(self, policy: SkinnyPolicy | None = None) -> None:
        self.kernel = jit(_linear_kernel)
        self.policy = policy or (INTERPRETED if interpret_requested() else SkinnyPolicy())
        self.tickets = TicketCounters()

    def runs_kernel(self, x: torch.Tensor, weight: torch.Tensor) -> bool:
        """Whether a call with these operands runs the kernel (else the reference)."""
        groups = weight.shape[0] if weight.dim() == 3 else 1
        rows = x.shape[0] if weight.dim() == 3 else x.numel() // max(1, x.shape[-1])
        return weight.dtype in TL_DTYPES and self.policy.takes(groups, rows, weight.shape[-2],
                                                                weight.numel() * weight.element_size())

    def __call__(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # The choice is shape-only, so under torch.compile the reference branch is traced
        # (and fused) like any other torch code; only the launch is kept out of the graph.
        if not self.runs_kernel(x, weight):
            return reference_linear(x, weight)
        if weight.dim() == 2:
            lead = x.shape[:-1]
            out = self.grouped(x.reshape(-1, 1, x.shape[-1]), weight.unsqueeze(0))
            return out.reshape(*lead, weight.shape[0])
        return self.grouped(x, weight)

    @torch.compiler.disable  # a Triton launch with Python-side tiling: kept out of dynamo's graphs
    def grouped(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """x [R, G, K] (any strides but a unit K stride), weight [G, N, K] -> [R, G, N]."""
        r, groups, k = x.shape
        n = weight.shape[1]
        x = x.to(weight.dtype)
        if x.stride(-1) != 1:
            x = x.contiguous()
        weight = weight if weight.stride(-1) == 1 else weight.contiguous()
        out = torch.empty(r, groups, n, dtype=weight.dtype, device=weight.device)
        tiles = self.policy.tiling(groups, r, n, k)
        grid = tiles.grid(groups, r, n, k)
        splits = grid[1]
        if splits > 1:
            part = torch.empty(splits * grid[0] * tiles.block_m * tiles.block_n, dtype=torch.float32,
                               device=weight.device)
            count = self.tickets.get(weight.device, grid[0])
        else:
            part = count = out  # not read (one split)
        self.kernel[grid](
            x, weight, out, part, count, r, n, k, tiles.split_k,
            x.stride(1), x.stride(0), weight.stride(0), weight.stride(1), out.stride(1), out.stride(0),
            BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_K=tiles.block_k, SPLITS=splits, DOT=tiles.dot,
            IEEE=weight.dtype == torch.float32, DTYPE=TL_DTYPES[weight.dtype], num_warps=tiles.num_warps,
        )
        return out
