"""Routed experts on fixed shapes: the MoE of ``runtime/moe.py`` with no host sync.

``runtime.moe.moe`` groups the (row, pick) pairs by expert on the host (``bincount(...).tolist()``)
and loops over the experts that got rows: right for the engine's eager steps, but every step
syncs, its kernel sequence depends on the routing, and it cannot be captured in a CUDA graph.
Here every step has the same shapes and kernels whatever the routing:

    weights, ids = route(x)                              [T, k]
    picks sorted by (expert, row): rows, offsets        T*k pairs, device tensors
    h = grouped_mm(x[rows], W13^T, offsets)             [T*k, 2I]  one GEMM for W1 and W3
    y = w * silu(min(h1, L)) * clamp(h3, -L, L)
    o = grouped_mm(y, W2^T, offsets)                    [T*k, D]
    out[t] = sum over t's k picks (float32)              + shared expert

``torch._grouped_mm`` runs one GEMM per expert group inside one kernel, with the group
boundaries read on the device. Where it cannot run (no such op, or a dtype/device it does not
support), the same pairs are computed by one batched product over gathered expert weights:
slower and memory-hungry, meant for small CPU models and tests.

The experts' weights are stacked once per layer (``StackedExperts``): a copy, so a model
using this path holds its routed-expert weights twice. Batch-invariant numerics
(``Numerics.row_tile > 1``) need the engine's tiled GEMMs; this path refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from runtime.config import V41Config
from runtime.moe import expert, route
from runtime.numerics import Numerics


@dataclass(frozen=True)
class StackedExperts:
    """One layer's routed experts as stacked tensors (copies of the per-expert weights),
    and the shared expert after them when it has the routed experts' shape (``shared``):
    the fused experts op (runtime/kernels/experts.py) reads it as expert ``shared_id``;
    the grouped GEMMs see it as one more group that no row picks."""

    w13: torch.Tensor  # [E (+1), 2I, D]: W1 rows then W3 rows of each expert
    w2: torch.Tensor  # [E (+1), D, I]
    expert_ids: torch.Tensor  # [E (+1)] int64: 0..E(+1)-1 on the weights' device (grouped_moe's group ends)
    shared: bool = False

    @classmethod
    @torch.no_grad()
    def from_ffn(cls, ffn, n_experts: int) -> StackedExperts:
        experts = [ffn.experts[e] for e in range(n_experts)]
        sh = getattr(ffn, "shared_experts", None)
        shared = sh is not None and sh.w1.weight.shape == experts[0].w1.weight.shape
        stacked = experts + [sh] if shared else experts
        w13 = torch.stack([torch.cat([ex.w1.weight, ex.w3.weight]) for ex in stacked])
        w2 = torch.stack([ex.w2.weight for ex in stacked])
        return cls(w13.detach().contiguous(), w2.detach().contiguous(),
                   torch.arange(len(stacked), device=w13.device), shared)

    @property
    def intermediate(self) -> int:
        return self.w13.shape[1] // 2

    @property
    def shared_id(self) -> int:
        """The shared expert's index in the stack (the routed count when it has none)."""
        return self.w13.shape[0] - 1 if self.shared else self.w13.shape[0]


def stack_all_layers(weights) -> list[StackedExperts]:
    """``StackedExperts`` of every layer of a ``V41Weights``."""
    c = weights.config
    return [StackedExperts.from_ffn(weights.layers[i].ffn, c.n_routed_experts) for i in range(c.num_hidden_layers)]


def grouped_linear(x: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor,
                   group_of_row: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` [M, K], sorted by group, times their group's ``weight[g]`` [N, K]^T -> [M, N]
    in the weight's dtype. ``offsets`` [G] int32: end row of each group; ``group_of_row`` [M]:
    the same grouping per row (used by the fallback only)."""
    x = x.to(weight.dtype)
    if _grouped_mm_supported(x, weight):
        return torch._grouped_mm(x, weight.transpose(1, 2), offs=offsets)
    return torch.bmm(x.unsqueeze(1), weight[group_of_row].transpose(1, 2)).squeeze(1)


def _grouped_mm_supported(x: torch.Tensor, weight: torch.Tensor) -> bool:
    if not hasattr(torch, "_grouped_mm"):
        return False
    if x.device.type == "cuda":
        # The CUDA kernel takes bf16 operands whose rows are 16-byte aligned.
        return weight.dtype == torch.bfloat16 and x.shape[1] % 8 == 0 and weight.shape[1] % 8 == 0
    return x.device.type == "cpu" and weight.dtype in (torch.float32, torch.bfloat16)


def group_ends(experts_sorted: torch.Tensor, expert_ids: torch.Tensor) -> torch.Tensor:
    """[M] expert ids in ascending order, [E] 0..E-1 -> [E] int32: the end row of each
    expert's group (the count of ids <= e). One search over the sorted ids: the same
    integers as counting per expert and a cumulative sum, which took four ops."""
    return torch.searchsorted(experts_sorted, expert_ids.to(experts_sorted.dtype), right=True, out_int32=True)


def grouped_moe(x: torch.Tensor, ffn, stacked: StackedExperts, config: V41Config, num: Numerics,
                route_fn=route, experts_fn=None) -> torch.Tensor:
    """x [T, D] -> [T, D], equal in math to ``runtime.moe.moe`` (same routing; the picks of a
    row summed in one reduction), with no host sync and routing-independent shapes.
    ``route_fn`` / ``experts_fn``: the registry's gate and experts ops (None: the references)."""
    if num.row_tile != 1:
        raise ValueError("grouped_moe: batch-invariant numerics need runtime.moe.moe's tiled GEMMs")
    weights, ids = route_fn(x, ffn.gate.weight, ffn.gate.bias, config, num)  # [T, k]
    return (experts_fn or routed_experts)(x, weights, ids, ffn, stacked, config, num)


def routed_experts(x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor, ffn, stacked: StackedExperts,
                   config: V41Config, num: Numerics) -> torch.Tensor:
    """The MoE after routing (the registry's ``experts`` reference): x [T, D], routing
    weights and ids [T, k] -> [T, D], the routed experts through two grouped GEMMs plus
    the shared expert (``ffn.shared_experts``) through its own three GEMMs."""
    t, k = ids.shape
    flat = ids.reshape(-1)  # [T*k]
    # Pairs grouped by expert, rows ascending; the sort's values are flat[order] already.
    experts_sorted, order = torch.sort(flat, stable=True)
    offsets = group_ends(experts_sorted, stacked.expert_ids)
    rows = order // k

    h = grouped_linear(x[rows], stacked.w13, offsets, experts_sorted).float()  # [T*k, 2I]
    inter = stacked.intermediate
    gate, up = h[:, :inter], h[:, inter:]
    limit = config.swiglu_limit
    if limit > 0:
        up = up.clamp(-limit, limit)
        gate = gate.clamp(max=limit)
    y = weights.reshape(-1)[order].unsqueeze(-1) * (F.silu(gate) * up)
    o = grouped_linear(y.to(x.dtype), stacked.w2, offsets, experts_sorted)  # [T*k, D]

    per_pick = torch.empty_like(o)
    per_pick[order] = o
    # One reduction over the k picks (two kernels, not 2k): its order is the kernel's, so
    # a row equals the reference's expert-ordered sum to float32 rounding, not bit for bit.
    out = per_pick.reshape(t, k, -1).float().sum(dim=1)
    if config.n_shared_experts:
        sh = ffn.shared_experts
        out = out + expert(x, sh.w1.weight, sh.w2.weight, sh.w3.weight, limit, num).float()
    return out.to(x.dtype)
