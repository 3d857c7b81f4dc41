"""The MoE of a decode step without host syncs.

Fast numerics: ``runtime.grouped_moe.grouped_moe`` (routed experts through grouped GEMMs
on stacked weights, shapes independent of the routing).

Batch-invariant numerics need the engine's tiled GEMMs, which grouped_moe refuses; there
every routed expert runs on every row, its activation scaled by that row's routing
weight for it (0 where the row did not pick it), and the outputs are added in expert
order. A row's picked experts then give exactly the engine's values (``runtime.moe.moe``
on row-invariant GEMMs adds them in the same order) and the others add exact zeros; it
costs n_routed_experts / num_experts_per_tok times the routed FLOPs and is meant for the
exactness tests and small models, not for speed.
"""

from __future__ import annotations

import torch

from runtime.config import V41Config
from runtime.moe import expert, route
from runtime.numerics import Numerics


def every_expert_moe(x: torch.Tensor, ffn, config: V41Config, num: Numerics, route_fn=route) -> torch.Tensor:
    """x [T, D] -> [T, D], equal to ``runtime.moe.moe`` with no host sync."""
    weights, ids = route_fn(x, ffn.gate.weight, ffn.gate.bias, config, num)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    limit = config.swiglu_limit
    for e in range(config.n_routed_experts):
        # A row picks an expert at most once: the sum is that pick's weight, or 0.
        w_e = torch.where(ids == e, weights, torch.zeros_like(weights)).sum(dim=-1, keepdim=True)
        ex = ffn.experts[e]
        out = out + expert(x, ex.w1.weight, ex.w2.weight, ex.w3.weight, limit, num, w_e).float()
    if config.n_shared_experts:
        sh = ffn.shared_experts
        out = out + expert(x, sh.w1.weight, sh.w2.weight, sh.w3.weight, limit, num).float()
    return out.to(x.dtype)
