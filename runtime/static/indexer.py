"""The sparse indexer of one decode step over B slots (runtime/indexer.py's selection).

Each slot scores all ``max_len // ratio`` key rows of its KV source, masked to the
visible count (``visible_counts``: (p + 1) // ratio), so the shapes never depend on how
long a request is; the rows past the count are -inf, which the engine's rules never
pick (its candidate blocks and top-k keep no -inf entry, and an all -inf row gives
-1 everywhere, as the engine's "no key yet" branch does). The selection functions are
the engine's own (``candidate_blocks``, ``blocks_to_mask``, the registry's top-k), so
ties go to the lowest index exactly as there.

Scores: the dot products of all heads in one batched product, then the engine's
per-head term ``w_h * (ReLU(dot) * dI^-1/2)`` summed over heads. MXFP4 x MXFP4 dots of
up to 64 terms are exact in float32 (runtime.batched.indexer), so the batched product
gives the engine's values; the head sum runs in one reduction instead of a Python loop
over heads (the same values whenever the sum's order does not matter, e.g. two heads).
A fused batched twin is issue 16's work; the registry's fused indexer takes one
request's keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.config import V41Config
from runtime.indexer import blocks_to_mask, candidate_blocks, visible_counts
from runtime.numerics import Numerics

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Visibility:
    """Which key rows B slots can see at one compress ratio: ``counts`` [B] ((p + 1) //
    ratio, the engine's ``visible_counts``) and ``hidden`` [B, N] (row >= count). Built
    once per step and ratio, shared by the index sources of that ratio (the step used to
    build both in every index source)."""

    counts: torch.Tensor
    hidden: torch.Tensor

    @classmethod
    def at(cls, pos: torch.Tensor, ratio: int, key_rows: torch.Tensor) -> Visibility:
        """``key_rows``: arange(N) on the device (built once with the step)."""
        counts = visible_counts(pos, ratio)
        return cls(counts, key_rows[None, :] >= counts[:, None])


def batched_scores(q: torch.Tensor, head_w: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q [B, nI, dI] (MXFP4), head_w [B, nI] (scaled), keys [B, N, dI] -> [B, N] float32."""
    dim = q.shape[-1]
    dots = torch.matmul(q.float(), keys.float().transpose(1, 2))  # [B, nI, N]
    return (head_w.unsqueeze(-1) * (torch.relu(dots) * dim**-0.5)).sum(dim=1)


def select(layer: int, q_r: torch.Tensor, x: torch.Tensor, cos_c: torch.Tensor, sin_c: torch.Tensor,
           visible: Visibility, keys: torch.Tensor, candidates: torch.Tensor | None, lw, config: V41Config,
           num: Numerics, ops) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Index source ``layer``: q_r, x, cos_c, sin_c for all rows of the step (padding rows
    included, as the engine computes them); ``visible`` and keys [B, N, dI] for the slots.
    -> (top-k [B, index_topk], -1 = empty; the candidate blocks after this layer)."""
    c = config
    b = keys.shape[0]
    idx_w = lw.attn.indexer
    q = num.linear(q_r, idx_w.wq_b.weight).reshape(-1, c.index_n_heads, c.index_head_dim)
    q = ops.rope_quant(q, cos_c, sin_c, "mxfp4")
    head_w = num.linear(x, idx_w.weights_proj.weight).float() * c.index_n_heads**-0.5
    # The engine's mask_invisible, with the step's shared mask.
    scores = batched_scores(q[:b], head_w[:b], keys).masked_fill(visible.hidden, NEG_INF)
    if layer == c.candidate_source_layer_id:
        candidates = candidate_blocks(scores, visible.counts, c.candidate_topk_blocks, c.candidate_block_size)
    elif 0 <= c.candidate_source_layer_id < layer and candidates is not None:
        allowed = blocks_to_mask(candidates, scores.shape[1], c.candidate_block_size)
        scores = torch.where(allowed, scores, NEG_INF)  # masked_fill(~allowed) without the negation
    return ops.topk(scores, c.index_topk), candidates
