"""Fused routed experts for few rows: the MoE after routing (W1|W3, clamped SwiGLU scaled
by the routing weight, W2, the sum over a row's picks, plus the shared expert) in two
launches that read each picked expert's weights straight from the stacked tensors.

Same signature and math as :func:`runtime.grouped_moe.routed_experts`, with its roundings:
each pick's W1 / W3 / W2 products are rounded to the model dtype as the grouped GEMMs
round them, the SwiGLU runs in float32 on the rounded values, and a row's picks are
added in float32 in pick order with the shared expert last. Only the order of each
product's K sum differs (K splits in split order), so the result is deterministic but
not bit-equal to the reference.

Why: at one row per step the reference's grouped GEMM (``torch._grouped_mm``) read the six
picked experts of a ``mid`` layer at 28-37 % of the bandwidth (31.5 us for W1|W3, 20.8
us for W2; benchmarks/results/step_profile_h200.md), with a sort, a group search, two
gathers and the shared expert's three GEMMs around it. Here there is nothing to sort:
program (pair, column block, split) reads its pick's expert by id. Every pair reads its
own expert, so once rows share experts the grouped GEMM reads less; the policy
(``runtime/kernels/skinny_tiles.py``, ``ExpertsPolicy.max_pairs``) sends those calls to
the reference.
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.config import V41Config
from runtime.grouped_moe import StackedExperts, routed_experts
from runtime.kernels.backend import interpret_requested, jit
from runtime.kernels.mhc import TL_DTYPES
from runtime.kernels.skinny_tiles import ExpertsPolicy
from runtime.kernels.tickets import TicketCounters
from runtime.numerics import Numerics

# Under the interpreter: one program per output tile (see runtime/kernels/skinny.py).
INTERPRETED = ExpertsPolicy(programs=1, programs_one_row=1)


def _experts_kernel(
    x_ptr, w_ptr, ids_ptr, scale_ptr, out_ptr, part_ptr, count_ptr,
    N, K, SPLIT_K, ROUTED, PER_ROW, SHARED_ID, w_se, limit,
    PICKS: tl.constexpr, SPLITS: tl.constexpr, SWIGLU: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DTYPE: tl.constexpr,
):
    """Program (tile, part): tile = (output row, column block), part = (pick, K split).
    ``pair = row * PICKS + pick`` is one (token, expert) pick: token ``pair // PER_ROW``, its
    ``j = pair % PER_ROW``-th pick, expert ``ids[token, j]`` for j < ROUTED, else SHARED_ID.
    SWIGLU (PICKS 1, an output row per pair): x row = token, weight rows n and n + N
    (W1 | W3), out = scale[token, j] * (silu(min(h1, L)) * clamp(h3, -L, L)) (1 for the
    shared expert). Else: x row = pair (its SwiGLU output), out[row] = the sum over the
    row's picks of each pick's product rounded to DTYPE, in pick order."""
    limit = tl.cast(limit, tl.float32)  # inductor would pass a Python float as fp64
    tile = tl.program_id(0)
    part = tl.program_id(1)
    n_blocks = tl.cdiv(N, BLOCK_N)
    row = tile // n_blocks
    cols = tile % n_blocks * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    pair = row * PICKS + part // SPLITS
    split = part % SPLITS
    token = pair // PER_ROW
    j = pair % PER_ROW
    routed = j < ROUTED
    expert = tl.where(routed, tl.load(ids_ptr + token * ROUTED + j, mask=routed, other=0), SHARED_ID)
    if SWIGLU:
        x_at = x_ptr + token.to(tl.int64) * K
    else:
        x_at = x_ptr + pair.to(tl.int64) * K
    w_rows = w_ptr + expert.to(tl.int64) * w_se + cols.to(tl.int64)[None, :] * K  # [1, BLOCK_N]
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_N,), dtype=tl.float32)
    k_lo = split * SPLIT_K
    k_hi = tl.minimum(k_lo + SPLIT_K, K)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < k_hi
        a = tl.load(x_at + ks, mask=k_ok, other=0.0).to(tl.float32)[:, None]  # [BK, 1]
        w_ok = col_ok[None, :] & k_ok[:, None]
        acc += tl.sum(a * tl.load(w_rows + ks[:, None], mask=w_ok, other=0.0).to(tl.float32), axis=0)
        if SWIGLU:  # W3's row n sits N rows after W1's
            acc3 += tl.sum(a * tl.load(w_rows + N * K + ks[:, None], mask=w_ok, other=0.0).to(tl.float32), axis=0)
    n_tiles = tl.num_programs(0)
    at = tl.arange(0, BLOCK_N)
    if PICKS * SPLITS == 1:
        n_last = 1
    else:
        cell = (part * n_tiles + tile).to(tl.int64) * (2 * BLOCK_N)
        tl.store(part_ptr + cell + at, acc)
        if SWIGLU:
            tl.store(part_ptr + cell + BLOCK_N + at, acc3)
        tl.debug_barrier()  # every thread's partial is written before the ticket releases them
        ticket = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel")
        last = ticket == PICKS * SPLITS - 1
        tl.store(count_ptr + tile, 0, mask=last)  # all others have taken theirs: reset for the next call
        n_last = tl.where(last, 1, 0)
    for _ in range(0, n_last):
        total = tl.zeros((BLOCK_N,), dtype=tl.float32)
        h3 = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for p in tl.static_range(PICKS):  # pick order, then split order: whoever finished last
            if PICKS * SPLITS == 1:
                s1, s3 = acc, acc3
            else:
                s1 = tl.zeros((BLOCK_N,), dtype=tl.float32)
                s3 = tl.zeros((BLOCK_N,), dtype=tl.float32)
                for s in tl.static_range(SPLITS):
                    cell = ((p * SPLITS + s) * n_tiles + tile).to(tl.int64) * (2 * BLOCK_N)
                    # .cg: read through L2, never a stale L1 line of another program's partial
                    s1 += tl.load(part_ptr + cell + at, cache_modifier=".cg")
                    if SWIGLU:
                        s3 += tl.load(part_ptr + cell + BLOCK_N + at, cache_modifier=".cg")
            total += s1.to(DTYPE).to(tl.float32)  # the pick's product in the model dtype
            if SWIGLU:
                h3 = s3.to(DTYPE).to(tl.float32)
        if SWIGLU:
            clamped = limit > 0
            h3 = tl.where(clamped, tl.minimum(tl.maximum(h3, -limit), limit), h3)
            gate = tl.where(clamped, tl.minimum(total, limit), total)
            scale = tl.load(scale_ptr + token * ROUTED + j, mask=routed, other=1.0)
            total = scale * (gate / (1.0 + tl.exp(-gate)) * h3)
        tl.store(out_ptr + row.to(tl.int64) * N + cols, total.to(DTYPE), mask=col_ok)


class FusedExperts:
    """Callable with :func:`runtime.grouped_moe.routed_experts`'s signature.

    Runs the kernel when the policy takes the call's pair count, the numerics are the
    fast ones and the stacked weights hold the shared expert (when the model has one);
    otherwise the reference. Holds the tiles' ticket counters (``tickets``)."""

    def __init__(self, policy: ExpertsPolicy | None = None) -> None:
        self.kernel = jit(_experts_kernel)
        self.policy = policy or (INTERPRETED if interpret_requested() else ExpertsPolicy())
        self.tickets = TicketCounters()

    def runs_kernel(self, ids: torch.Tensor, stacked: StackedExperts, config: V41Config, num: Numerics) -> bool:
        per_row = ids.shape[1] + int(stacked.shared)
        return (num.row_tile == 1 and stacked.w13.dtype in TL_DTYPES and stacked.shared == bool(config.n_shared_experts)
                and self.policy.takes(ids.shape[0] * per_row))

    def __call__(self, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor, ffn, stacked: StackedExperts,
                 config: V41Config, num: Numerics) -> torch.Tensor:
        # The choice is shape-only, so under torch.compile (the static step's grouped_moe)
        # the reference branch is traced and fused like the rest; only the launches are
        # kept out of the graph.
        if not self.runs_kernel(ids, stacked, config, num):
            return routed_experts(x, weights, ids, ffn, stacked, config, num)
        return self.fused(x, weights, ids, stacked, config)

    @torch.compiler.disable  # Triton launches with Python-side tiling: kept out of dynamo's graphs
    def fused(self, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor, stacked: StackedExperts,
              config: V41Config) -> torch.Tensor:
        """The two launches (the caller has checked ``runs_kernel``)."""
        t, k = ids.shape
        per_row = k + int(stacked.shared)
        inter, d = stacked.intermediate, stacked.w13.shape[2]
        dtype = stacked.w13.dtype
        x = x.to(dtype).contiguous()
        ids = ids.contiguous()
        scale = weights.float().contiguous()
        y = torch.empty(t * per_row, inter, dtype=dtype, device=x.device)
        self._launch(x, stacked.w13, ids, scale, y, (t * per_row, 1), inter, d, per_row, k,
                     stacked.shared_id, config.swiglu_limit, swiglu=True)
        out = torch.empty(t, d, dtype=dtype, device=x.device)
        self._launch(y, stacked.w2, ids, scale, out, (t, per_row), d, inter, per_row, k,
                     stacked.shared_id, 0.0, swiglu=False)
        return out

    def _launch(self, x, w, ids, scale, out, rows_picks: tuple[int, int], n: int, k: int, per_row: int,
                routed: int, shared_id: int, limit: float, swiglu: bool) -> None:
        rows, picks = rows_picks
        tiles = self.policy.tiling(rows, picks, n, k)
        grid = tiles.grid(rows, picks, n, k)
        splits = tiles.splits(k)
        if grid[1] > 1:
            part = torch.empty(grid[1] * grid[0] * 2 * tiles.block_n, dtype=torch.float32, device=x.device)
            count = self.tickets.get(x.device, grid[0])
        else:
            part = count = out  # not read (one program per tile)
        self.kernel[grid](
            x, w, ids, scale, out, part, count, n, k, tiles.split_k, routed, per_row, shared_id, w.stride(0),
            float(limit), PICKS=picks, SPLITS=splits, SWIGLU=swiglu, BLOCK_N=tiles.block_n,
            BLOCK_K=tiles.block_k, DTYPE=TL_DTYPES[w.dtype], num_warps=tiles.num_warps,
        )
