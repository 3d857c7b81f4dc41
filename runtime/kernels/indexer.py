"""Fused sparse-MQA indexer logits (DeepGEMM ``mqa_logits``):

    s[t, j] = sum_h w[t, h] * ReLU(q[t, h] . k[j]) * dI^-1/2,   -inf where j >= counts[t]

Same signature and math as :func:`runtime.kernels.reference.index_logits`. A program owns
BLOCK_T queries x all heads (BLOCK_T * nI columns of the product) and KEY_TILES consecutive
tiles of BLOCK_N keys; the head reduction happens in registers, so only the [T, N] scores
are written (the reference materialises one [T, N] product per head). Key tiles wholly past
every query's visible count are not read.

Why several key tiles per program: the query tile is loaded once per program. With one
64-key tile per program, 8 decode queries at ``mid`` (a 128 x 128 bf16 query tile, 32 KB)
re-read the queries from L2 for every 16 KB of keys read from HBM: twice the keys' bytes,
at 38 % of the roofline for 128k keys (benchmarks/results/kernels_h200.md). A loop over the
program's tiles keeps the queries resident and lets the compiler pipeline the key loads.

Why the keys as the MMA's rows (``KEYS_AS_ROWS``, the default): with the queries' heads
down the rows, each head sum is a reduction across lanes and warps; with k [BLOCK_N, dI] x
q^T the heads of a query are adjacent columns of the accumulator, summed mostly within a
thread, and 64 key rows are one warpgroup's MMA. 8 ``mid`` queries at 128k keys: 15.7 ->
12.7 us on the H200 (runtime/kernels/indexer_tiles.py has the sweeps).

Why ``READ_ALL`` (``IndexerPolicy.read_all_up_to``): skipping the tiles past every
query's count makes the key loads wait for the counts (the branch and the loop's trip
count depend on them), so a program's first key tile arrives two memory round trips after
its start. At decode that chain is most of the call: 8k keys are 128 programs of one tile
(2.5 us at ``mid`` on the H200, an empty launch ~1 us; kernels_h200.md). Reading every
tile up to N, with the scores masked by the counts as before, issues the counts', the
queries' and the first keys' loads together; the output is the same, bit for bit. On
the H200 it was faster at every decode shape timed (IndexerPolicy's docstring), so calls
of up to 8 queries read all.
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.kernels.backend import jit, next_pow2
from runtime.kernels.indexer_tiles import IndexerPolicy, IndexerTiling
from runtime.numerics import Numerics


def _index_logits_kernel(
    q_ptr, w_ptr, k_ptr, counts_ptr, out_ptr,
    T, N, scale,
    NI: tl.constexpr, DI: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
    KEY_TILES: tl.constexpr, KEYS_AS_ROWS: tl.constexpr, IEEE: tl.constexpr, READ_ALL: tl.constexpr,
):
    """``KEYS_AS_ROWS``: the product as k [BLOCK_N, DI] x q^T [DI, M] (keys the MMA's rows,
    a query's heads adjacent columns, so the head sum stays mostly within a thread) instead
    of q [M, DI] x k^T [DI, BLOCK_N] (heads down the rows, summed across lanes).
    ``READ_ALL``: every tile of the program up to N is read, none skipped by the counts."""
    # an eager launch passes Python floats as fp32, inductor's (torch.compile) as fp64: pin fp32
    scale = tl.cast(scale, tl.float32)
    pid_t = tl.program_id(0)
    pid_n = tl.program_id(1)
    M: tl.constexpr = BLOCK_T * NI
    qrow = pid_t * M + tl.arange(0, M)  # flat (query, head) rows
    q_ok = qrow < T * NI
    ts = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = ts < T
    dim = tl.arange(0, DI)
    counts = tl.load(counts_ptr + ts, mask=t_ok, other=0)
    # the program's keys [first, first + KEY_TILES * BLOCK_N). READ_ALL reads them all (the
    # scores masked by the counts); otherwise the tiles from the first one past every
    # visible count on are written -inf without reading them
    first = pid_n * (KEY_TILES * BLOCK_N)
    if READ_ALL:  # a constant trip count: no load waits for the counts (masked by N only)
        n_read = KEY_TILES
    else:
        seen = tl.minimum(tl.max(counts, axis=0), N)
        n_read = tl.minimum(tl.maximum(seen - first + BLOCK_N - 1, 0) // BLOCK_N, KEY_TILES)
    if n_read > 0:
        q = tl.load(q_ptr + qrow[:, None].to(tl.int64) * DI + dim[None, :], mask=q_ok[:, None], other=0.0)
        w = tl.load(w_ptr + qrow, mask=q_ok, other=0.0)  # [M]
        if IEEE:
            q = q.to(tl.float32)
        for i in range(0, n_read):
            js = first + i * BLOCK_N + tl.arange(0, BLOCK_N)
            if KEYS_AS_ROWS:
                k = tl.load(k_ptr + js[:, None].to(tl.int64) * DI + dim[None, :], mask=js[:, None] < N, other=0.0)
                if IEEE:
                    dots = tl.dot(k.to(tl.float32), tl.trans(q), input_precision="ieee")
                else:
                    dots = tl.dot(k, tl.trans(q))  # [BLOCK_N, M], fp32 accumulation
                terms = (tl.maximum(dots, 0.0) * scale) * w[None, :]
                scores = tl.sum(tl.reshape(terms, (BLOCK_N, BLOCK_T, NI)), axis=2)  # [BLOCK_N, BLOCK_T]
                scores = tl.where(js[:, None] < counts[None, :], scores, float("-inf"))
                tl.store(out_ptr + ts[None, :].to(tl.int64) * N + js[:, None], scores,
                         mask=t_ok[None, :] & (js[:, None] < N))
            else:
                k = tl.load(k_ptr + js[None, :].to(tl.int64) * DI + dim[:, None], mask=js[None, :] < N, other=0.0)
                if IEEE:
                    dots = tl.dot(q, k.to(tl.float32), input_precision="ieee")
                else:
                    dots = tl.dot(q, k)  # [M, BLOCK_N], fp32 accumulation
                terms = w[:, None] * (tl.maximum(dots, 0.0) * scale)
                scores = tl.sum(tl.reshape(terms, (BLOCK_T, NI, BLOCK_N)), axis=1)  # [BLOCK_T, BLOCK_N]
                scores = tl.where(js[None, :] < counts[:, None], scores, float("-inf"))
                tl.store(out_ptr + ts[:, None].to(tl.int64) * N + js[None, :], scores,
                         mask=t_ok[:, None] & (js[None, :] < N))
    hidden = tl.full((BLOCK_T, BLOCK_N), float("-inf"), dtype=tl.float32)
    for i in range(n_read, KEY_TILES):
        js = first + i * BLOCK_N + tl.arange(0, BLOCK_N)
        tl.store(out_ptr + ts[:, None].to(tl.int64) * N + js[None, :], hidden, mask=t_ok[:, None] & (js[None, :] < N))


def launch_kwargs(tiles: IndexerTiling, n_heads: int, dim: int, ieee: bool) -> dict:
    """The kernel's constexprs and compile options for one call (the sm_90 compile check,
    tests/runtime/compile_sm90.py, compiles exactly these)."""
    return dict(NI=n_heads, DI=dim, BLOCK_T=tiles.block_t, BLOCK_N=tiles.block_n, KEY_TILES=tiles.key_tiles,
                KEYS_AS_ROWS=tiles.keys_as_rows, IEEE=ieee, READ_ALL=tiles.read_all, num_warps=tiles.num_warps)


class FusedIndexLogits:
    """Callable with :func:`runtime.kernels.reference.index_logits`'s signature."""

    def __init__(self, policy: IndexerPolicy | None = None) -> None:
        """``policy``: how calls are tiled (default :class:`IndexerPolicy`); benchmark
        sweeps pass others."""
        self.kernel = jit(_index_logits_kernel)
        self.policy = policy or IndexerPolicy()

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
        tiles = self.policy.tiling(t, n_heads, n)
        self.kernel[tiles.grid(t, n)](
            q, head_w.float().contiguous(), keys, counts.long().contiguous(), out, t, n, dim**-0.5,
            **launch_kwargs(tiles, n_heads, dim, ieee=q.dtype == torch.float32),
        )
        return out
