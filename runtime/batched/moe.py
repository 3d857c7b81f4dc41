"""The MoE of one layer on all rows at once, every expert computed densely.

Routing is the runtime's ``route`` (sqrtsoftplus scores; ``ffn.gate.bias`` is added for
the top-k choice only, the weights come from the unbiased scores, renormalised and
scaled). Each expert then runs on every row with that row's routing weight for it (0
when not picked): W2(w * silu(min(W1 x, L)) * clamp(W3 x, -L, L)) is exactly 0 for w = 0,
so the sum over experts in expert order equals the runtime's sparse dispatch. With a
handful of experts this is faster on a GPU than a gather/scatter dispatch, and it has
fixed shapes.

``ffn.gate.bias`` gets no gradient (a hard choice): it is DeepSeek's auxiliary-loss-free
balancing bias, which the trainer moves from ``expert_load`` (e.g. bias += u * sign(mean
load - load)), not by backprop.
"""

from __future__ import annotations

import torch

from runtime.batched.common import float32_region
from runtime.config import V41Config
from runtime.moe import expert, route
from runtime.numerics import Numerics


def dense_moe(x: torch.Tensor, ffn, config: V41Config, num: Numerics) -> tuple[torch.Tensor, torch.Tensor]:
    """x [R, D] -> (output [R, D], expert load [E]: fraction of the R*k (row, slot) picks
    that went to each expert, detached)."""
    c = config
    with float32_region(x):
        weights, idx = route(x, ffn.gate.weight, ffn.gate.bias, c, num)  # [R, k] each
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in range(c.n_routed_experts):
        w_e = (weights * (idx == e)).sum(dim=-1, keepdim=True)  # [R, 1], 0 if not picked
        ex = ffn.experts[e]
        out = out + expert(x, ex.w1.weight, ex.w2.weight, ex.w3.weight, c.swiglu_limit, num, w_e).float()
    if c.n_shared_experts:
        sh = ffn.shared_experts
        out = out + expert(x, sh.w1.weight, sh.w2.weight, sh.w3.weight, c.swiglu_limit, num).float()
    picks = torch.zeros(c.n_routed_experts, dtype=torch.float32, device=x.device)
    picks = picks.scatter_add(0, idx.flatten(), torch.ones(idx.numel(), dtype=torch.float32, device=x.device))
    return out.to(x.dtype), (picks / idx.numel()).detach()
