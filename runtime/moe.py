"""V4.1 MoE: the "Mega-Gate" routing and clamped SwiGLU experts.

Gate:   s = sqrtsoftplus(x W_g^T / gate_temp) in float32
        idx = top-k(s + bias)              (the bias only selects)
        w = s[idx] / (sum s[idx] + 1e-20) * routed_scaling_factor
Expert: y = W2(w * silu(min(W1 x, L)) * clamp(W3 x, -L, L))
Output: sum of routed experts (in expert order) + shared expert.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from runtime.config import V41Config
from runtime.numerics import Numerics


def score_fn(logits: torch.Tensor, scoring_func: str) -> torch.Tensor:
    if scoring_func == "sqrtsoftplus":
        return torch.sqrt(F.softplus(logits))
    if scoring_func == "sigmoid":
        return torch.sigmoid(logits)
    return torch.softmax(logits, dim=-1)


def top_k_lowest_index(values: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest values per row; ties go to the lower index."""
    order = torch.sort(values, dim=-1, descending=True, stable=True).indices
    return order[..., :k]


def route(x: torch.Tensor, gate_w: torch.Tensor, bias: torch.Tensor, config: V41Config,
          num: Numerics) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, D] -> (weights [T, k] float32, expert ids [T, k])."""
    logits = num.linear(x.float(), gate_w.float()) / config.gate_temp  # [T, E]
    scores = score_fn(logits, config.scoring_func)
    idx = top_k_lowest_index(scores + bias.float(), config.num_experts_per_tok)
    weights = scores.gather(1, idx)
    if config.norm_topk_prob and config.num_experts_per_tok > 1:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * config.routed_scaling_factor, idx


def expert(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor,
           limit: float, num: Numerics, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Clamped SwiGLU; ``weight`` [M, 1] scales the activation before W2."""
    gate = num.linear(x, w1).float()
    up = num.linear(x, w3).float()
    if limit > 0:
        up = up.clamp(-limit, limit)
        gate = gate.clamp(max=limit)
    y = F.silu(gate) * up
    if weight is not None:
        y = weight * y
    return num.linear(y.to(x.dtype), w2)


def moe(x: torch.Tensor, ffn, config: V41Config, num: Numerics, route_fn=route) -> torch.Tensor:
    """x [T, D] -> [T, D]; ``ffn`` is the layer's ``ffn`` weight node; ``route_fn`` is the
    gate implementation (reference ``route`` or a fused twin with its signature)."""
    weights, idx = route_fn(x, ffn.gate.weight, ffn.gate.bias, config, num)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    k = idx.shape[1]
    # Group the (row, slot) picks by expert; a stable sort keeps rows ascending in a group.
    order = torch.sort(idx.flatten(), stable=True).indices
    counts = torch.bincount(idx.flatten(), minlength=config.n_routed_experts).tolist()
    start = 0
    for e, count in enumerate(counts):
        if count == 0:
            continue
        picks = order[start : start + count]
        start += count
        rows, slot = picks // k, picks % k
        ex = ffn.experts[e]
        y = expert(x[rows], ex.w1.weight, ex.w2.weight, ex.w3.weight, config.swiglu_limit, num,
                   weights[rows, slot].unsqueeze(-1))
        out.index_add_(0, rows, y.float())
    if config.n_shared_experts:
        sh = ffn.shared_experts
        out = out + expert(x, sh.w1.weight, sh.w2.weight, sh.w3.weight, config.swiglu_limit, num).float()
    return out.to(x.dtype)
