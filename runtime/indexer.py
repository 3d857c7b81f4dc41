"""The sparse indexer: which compressed entries each query attends to.

Queries (every index-source layer): q = MXFP4(RoPE_compress(W_qb^I q_r)) -> [T, nI, dI].
Head weights: w = W_w x * nI^-1/2. Score ("sparse MQA logits"):
    s[t, j] = sum_h w[t, h] * ReLU(q[t, h] . k[j]) * dI^-1/2
Entry j is visible to the query at position p iff j < floor((p + 1) / ratio).

Two-level top-k: the candidate source keeps the ``candidate_topk_blocks`` best blocks of
``candidate_block_size`` entries (block score = max; the block holding the newest
visible entry is always kept) and publishes that mask; later index sources score only
inside it. Each index source keeps its ``index_topk`` best visible entries. Ties are
broken by the lowest index (a stable sort), so the choice never depends on the backend.
"""

from __future__ import annotations

import torch

from runtime.numerics import Numerics

NEG_INF = float("-inf")


def index_scores(q: torch.Tensor, head_w: torch.Tensor, keys: torch.Tensor, num: Numerics) -> torch.Tensor:
    """q [..., T, nI, dI], head_w [..., T, nI] (already scaled), keys [..., N, dI] -> scores
    [..., T, N] float32. Leading batch dims (runtime.batched) need the fast path's matmul."""
    n_heads, dim = q.shape[-2:]
    keys_t = keys.float().transpose(-1, -2)  # [..., dI, N]
    total = None
    for h in range(n_heads):
        dots = num.matmul(q[..., h, :].float(), keys_t)  # [..., T, N]
        term = head_w[..., h : h + 1] * (torch.relu(dots) * dim**-0.5)
        total = term if total is None else total + term
    return total


def visible_counts(positions: torch.Tensor, ratio: int) -> torch.Tensor:
    """Number of complete groups a query at each position can see, [T]."""
    return (positions.long() + 1) // ratio


def mask_invisible(scores: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    j = torch.arange(scores.shape[1], device=scores.device)
    return scores.masked_fill(j[None, :] >= counts[:, None], NEG_INF)


def top_k_mask(values: torch.Tensor, k: int) -> torch.Tensor:
    """bool [T, N]: each row's k largest values, ties at the k-th value going to the
    lowest indices, -inf never kept. Linear in N (a threshold, not a full sort): the
    k-th largest value is the same whichever order a backend's top-k returns."""
    n = values.shape[1]
    take = min(k, n)
    if take == 0:
        return torch.zeros(values.shape, dtype=torch.bool, device=values.device)
    kth = torch.topk(values, take, dim=-1, sorted=False).values.amin(dim=-1, keepdim=True)
    above = values > kth
    tie = (values == kth) & (values > NEG_INF)
    room = take - above.sum(dim=-1, keepdim=True)
    return above | (tie & (torch.cumsum(tie.to(torch.int32), dim=-1) <= room))


def mask_to_ids(mask: torch.Tensor, k: int) -> torch.Tensor:
    """bool [T, N] with <= k set per row -> [T, k] their column ids ascending, -1 padded."""
    t, n = mask.shape
    slot = torch.where(mask, torch.cumsum(mask.to(torch.int64), dim=-1) - 1, k)
    ids = torch.arange(n, device=mask.device).expand(t, n)
    out = torch.full((t, k + 1), -1, dtype=torch.int64, device=mask.device)
    out.scatter_(1, slot, torch.where(mask, ids, -1))  # unkept entries land in the dropped slot k
    return out[:, :k]


def top_k_entries(scores: torch.Tensor, k: int) -> torch.Tensor:
    """[T, N] masked scores -> [T, k] entry ids in ascending order, -1 for empty slots.
    Highest scores first, ties to the lowest index; -inf entries are never picked."""
    return mask_to_ids(top_k_mask(scores, k), k)


def candidate_blocks(scores: torch.Tensor, counts: torch.Tensor, n_blocks: int, block: int) -> torch.Tensor:
    """[T, N] masked scores -> [T, n_blocks] kept block ids (-1 = empty slot): the best
    blocks by max score, the block of the newest visible entry always kept, ties to the
    lower block id, unreachable (-inf) blocks never kept."""
    t, n = scores.shape
    nb = -(-n // block)
    padded = torch.full((t, nb * block), NEG_INF, dtype=scores.dtype, device=scores.device)
    padded[:, :n] = scores
    block_scores = padded.reshape(t, nb, block).amax(dim=-1)  # [T, nb]
    newest = (counts - 1).clamp_min(0) // block
    pin = (torch.arange(nb, device=scores.device)[None, :] == newest[:, None]) & (counts[:, None] > 0)
    block_scores = block_scores.masked_fill(pin, float("inf"))
    return mask_to_ids(top_k_mask(block_scores, n_blocks), n_blocks)


def blocks_to_mask(block_ids: torch.Tensor, n: int, block: int) -> torch.Tensor:
    """[T, k] block ids (-1 = none) -> bool [T, n]: entries inside the kept blocks."""
    t = block_ids.shape[0]
    nb = -(-n // block)
    keep = torch.zeros((t, nb + 1), dtype=torch.bool, device=block_ids.device)
    keep.scatter_(1, torch.where(block_ids >= 0, block_ids, nb).clamp_max(nb), True)
    return keep[:, :nb].repeat_interleave(block, dim=1)[:, :n]


def candidate_mask(scores: torch.Tensor, counts: torch.Tensor, n_blocks: int, block: int) -> torch.Tensor:
    """[T, N] masked scores -> bool [T, N]: entries inside each query's kept blocks."""
    return blocks_to_mask(candidate_blocks(scores, counts, n_blocks, block), scores.shape[1], block)
