"""The two-level sparse indexer on a [B, T] batch, and its training loss.

Selection (no gradient; the same functions as the runtime, on B*T rows):
    scores [B, T, N] = sum_h w[t, h] * ReLU(q[t, h] . k[j]) * dI^-1/2, -inf where the
    query cannot see entry j (``runtime.indexer.visible_counts``);
    candidate source: keep the best candidate blocks (published to later layers);
    re-indexing layers: score only inside those blocks; every index source keeps its
    ``index_topk`` best entries (ascending ids, -1 = empty slot, ties to the lowest id).

Training (DeepSeek-V3.2 DSA, sparse stage): a hard top-k passes no gradient, so the
indexer (wq_b, weights_proj of index sources; wk, k_norm of KV sources) learns from
    indexer_loss = KL(p || softmax(s_sel)),
p = the index source layer's own main attention probability on its selected compressed
entries, summed over heads and L1-normalised over the selected entries, detached (the
target); s_sel = the indexer's scores of the same entries; averaged over the queries
that have a selected entry, then over the index-source layers. The indexer's inputs (q_r, x, the compressor
latent) are detached, so the loss trains the indexer only and the main model sees no
gradient from it.
"""

from __future__ import annotations

import torch

from runtime.batched.common import float32_region
from runtime.batched.rounding import round_to
from runtime.config import V41Config
from runtime.indexer import (
    blocks_to_mask,
    candidate_blocks,
    index_scores,
    mask_invisible,
    top_k_entries,
    visible_counts,
)
from runtime.numerics import Numerics
from runtime.rope import apply_rope

NEG_INF = float("-inf")
# MXFP4 x MXFP4 dot products of index_head_dim <= 64 terms are exact in float32 in any
# order, so the score GEMMs need no row-invariant tiling: always the plain batched matmul.
EXACT_DOTS = Numerics()


def index_queries(q_r: torch.Tensor, x: torch.Tensor, w_idx, config: V41Config, cos: torch.Tensor,
                  sin: torch.Tensor, num: Numerics, straight_through: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """q_r [B, T, q_rank], x [B, T, D] (both detached) -> (queries [B, T, nI, dI] MXFP4,
    head weights [B, T, nI] float32, already scaled by nI^-1/2)."""
    b, t, _ = x.shape
    c = config
    with float32_region(x):
        q = num.linear(q_r, w_idx.wq_b.weight).reshape(b, t, c.index_n_heads, c.index_head_dim)
        q = round_to(apply_rope(q, cos[None], sin[None]), "mxfp4", straight_through)
        head_w = num.linear(x, w_idx.weights_proj.weight).float() * c.index_n_heads**-0.5
    return q, head_w


@torch.no_grad()
def select(q: torch.Tensor, head_w: torch.Tensor, keys: torch.Tensor, ratio: int, layer: int,
           candidates: torch.Tensor | None, config: V41Config,
           num: Numerics, start: int = 0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """-> (top-k [B, T, K] entry ids, -1 = empty; candidate blocks [B*T, n_blocks] after
    this layer: new at the candidate source, else the ones passed in). The T queries sit
    at positions start .. start+T-1 (``start`` > 0: a decoder-trimmed prefill's kept rows,
    which see as many compressed entries as their true positions allow)."""
    c = config
    b, t = q.shape[:2]
    n = keys.shape[1]
    if n == 0:  # no completed group yet: nothing to select
        topk = torch.full((b, t, c.index_topk), -1, dtype=torch.int64, device=q.device)
        if layer == c.candidate_source_layer_id:
            candidates = torch.full((b * t, c.candidate_topk_blocks), -1, dtype=torch.int64, device=q.device)
        return topk, candidates
    counts = visible_counts(torch.arange(start, start + t, device=q.device), ratio).expand(b, t).reshape(-1)
    with float32_region(q):
        scores = mask_invisible(index_scores(q, head_w, keys, EXACT_DOTS).reshape(b * t, n), counts)
    if layer == c.candidate_source_layer_id:
        candidates = candidate_blocks(scores, counts, c.candidate_topk_blocks, c.candidate_block_size)
    elif 0 <= c.candidate_source_layer_id < layer and candidates is not None:
        allowed = blocks_to_mask(candidates, n, c.candidate_block_size)
        scores = scores.masked_fill(~allowed, NEG_INF)
    return top_k_entries(scores, c.index_topk).reshape(b, t, -1), candidates


def selected_scores(q: torch.Tensor, head_w: torch.Tensor, keys: torch.Tensor, topk: torch.Tensor) -> torch.Tensor:
    """The indexer's scores of the selected entries only, with gradient: q [B, T, nI, dI],
    head_w [B, T, nI], keys [B, N, dI], topk [B, T, K] -> [B, T, K] (-inf at empty slots).
    The same values as the selection's scores (the MXFP4 dot products are exact)."""
    b, t, n_heads, dim = q.shape
    k = topk.shape[-1]
    if keys.shape[1] == 0:  # no completed group yet: every slot is empty
        keys = keys.new_zeros(b, 1, dim)
    with float32_region(q):
        picked = keys.float().gather(1, topk.clamp_min(0).reshape(b, t * k, 1).expand(-1, -1, dim))
        picked = picked.reshape(b, t, k, dim)  # [B, T, K, dI]
        total = None
        for h in range(n_heads):  # the runtime's head order
            dots = torch.einsum("btd,btkd->btk", q[:, :, h].float(), picked)
            term = head_w[..., h : h + 1] * (torch.relu(dots) * dim**-0.5)
            total = term if total is None else total + term
    return total.masked_fill(topk < 0, NEG_INF)


def indexer_kl(scores_sel: torch.Tensor, attn_probs: torch.Tensor, topk: torch.Tensor) -> torch.Tensor:
    """DSA loss of one index source. scores_sel [B, T, K]; attn_probs [B, T, H, K] (the
    main attention's probabilities on the selected entries) -> 0-dim mean KL over the
    queries that have at least one selected entry."""
    valid = topk >= 0  # [B, T, K]
    row_ok = valid.any(dim=-1)  # [B, T]
    mass = attn_probs.detach().float().sum(dim=2)  # [B, T, K], zero at empty slots
    target = mass / mass.sum(dim=-1, keepdim=True).clamp_min(1e-30)
    logits = torch.where(row_ok[..., None], scores_sel, torch.zeros_like(scores_sel))
    log_q = torch.log_softmax(logits, dim=-1).masked_fill(~valid, 0.0)
    kl = (torch.xlogy(target, target) - target * log_q).sum(dim=-1)  # [B, T]
    return (kl * row_ok).sum() / row_ok.sum().clamp_min(1)
