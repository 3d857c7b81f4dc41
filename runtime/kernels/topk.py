"""Top-k over indexer scores without a full sort (DeepSelect's role; not a Triton kernel).

``torch.topk`` (a radix select on CUDA) finds each row's k-th largest value v; the pick
is every score > v plus the lowest-index scores == v up to k (a cumulative count), and a
second select returns the picked ids in ascending order. That is exactly the reference's
rule (stable sort: ties to the lowest index; -inf never picked) in O(N) per row instead
of a full O(N log N) sort of every row.
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


class FusedTopk:
    """Callable with :func:`runtime.kernels.reference.topk_entries`'s signature."""

    def __call__(self, scores: torch.Tensor, k: int) -> torch.Tensor:
        t, n = scores.shape
        take = min(k, n)
        if t == 0 or take == 0:
            return torch.full((t, k), -1, dtype=torch.int64, device=scores.device)
        kth = torch.topk(scores, take, dim=-1, sorted=False).values.amin(dim=-1, keepdim=True)  # [T, 1]
        above = scores > kth
        ties = scores == kth
        room = take - above.sum(dim=-1, keepdim=True)
        picked = (above | (ties & (ties.cumsum(dim=-1) <= room))) & (scores > NEG_INF)
        ids = torch.arange(n, device=scores.device).expand(t, n)
        ids = torch.where(picked, ids, torch.full_like(ids, n))
        order = torch.topk(ids, take, dim=-1, largest=False, sorted=True).values
        order = torch.where(order == n, torch.full_like(order, -1), order)
        if take < k:
            order = torch.cat([order, order.new_full((t, k - take), -1)], dim=1)
        return order
