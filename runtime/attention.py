"""CSA2 attention core: one softmax over a query's SWA window and its top-k compressed
entries, with a per-head sink, then the grouped output projection.

For the query at position p the keys are, in this fixed order,
  window:     SWA KV at p-W+1 .. p (only positions >= the window floor are valid),
  compressed: the global KV entries of its top-k (ascending ids, -1 = empty slot).
logits = q.k / sqrt(head_dim); the sink adds exp(sink_h) to the denominator only.
Every query is reduced over exactly this fixed-width key row (W + index_topk, or W for
ratio-0 layers), so its result does not depend on which chunk or batch it came in.
"""

from __future__ import annotations

import torch

from runtime.numerics import Numerics
from runtime.rope import apply_rope

QUERY_BLOCK = 128  # queries per gathered block on the fast path (bounds memory)
INVARIANT_QUERY_BLOCK = 16  # fixed block on the invariant path: every product has one shape


def window_indices(positions: torch.Tensor, floor: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[T] positions, [T] floors -> (positions [T, W], valid [T, W])."""
    offsets = torch.arange(window, device=positions.device) - (window - 1)
    idx = positions[:, None] + offsets[None, :]
    valid = idx >= floor[:, None]
    return idx.clamp_min(0), valid


def sparse_attention(
    q: torch.Tensor,
    positions: torch.Tensor,
    floor: torch.Tensor,
    swa: torch.Tensor,
    window: int,
    compressed: torch.Tensor | None,
    topk: torch.Tensor | None,
    sink: torch.Tensor,
    num: Numerics,
) -> torch.Tensor:
    """q [T, H, hd] (RoPE'd); swa [P, hd] by position; compressed [N, hd]; topk [T, K]
    -> attention output [T, H, hd] float32 (still carrying the query's RoPE)."""
    t, n_heads, hd = q.shape
    scale = hd**-0.5
    # One gather source: window KV by position, then compressed entries, then a zero
    # row that every masked slot points at (masked positions may hold NaN).
    # Only the positions this call's windows can reach are copied.
    lo = max(0, int(positions.min()) - window + 1) if t else 0
    hi = int(positions.max()) + 1 if t else 0
    parts = [swa[lo:hi].float()]
    if compressed is not None:
        parts.append(compressed.float())
    parts.append(swa.new_zeros(1, hd, dtype=torch.float32))
    source = torch.cat(parts)
    zero_row = source.shape[0] - 1
    win_idx, win_ok = window_indices(positions, floor, window)
    index, ok = (win_idx - lo).clamp_min(0), win_ok
    if topk is not None:
        index = torch.cat([index, topk.clamp_min(0) + (hi - lo)], dim=1)
        ok = torch.cat([ok, topk >= 0], dim=1)
    index = torch.where(ok, index, torch.full_like(index, zero_row))
    bias = torch.zeros(ok.shape, dtype=torch.float32, device=q.device).masked_fill(~ok, float("-inf"))
    # Invariant mode: pad the query rows to whole blocks, so every batched product has
    # one shape (padding rows see only the zero row and the sink).
    qf = q.float()
    block = QUERY_BLOCK
    if num.row_tile > 1:
        block = INVARIANT_QUERY_BLOCK
        full = -(-t // block) * block
        index = torch.cat([index, index.new_full((full - t, index.shape[1]), zero_row)])
        bias = torch.cat([bias, bias.new_full((full - t, bias.shape[1]), float("-inf"))])
        qf = torch.cat([qf, qf.new_zeros((full - t, *qf.shape[1:]))])
    sinks = sink.float().view(1, n_heads, 1)
    outs = []
    for s in range(0, index.shape[0], block):
        e = min(index.shape[0], s + block)
        keys = source[index[s:e]]  # [b, n_keys, hd]
        logits = torch.matmul(qf[s:e], keys.transpose(1, 2)) * scale + bias[s:e, None, :]
        probs = torch.softmax(torch.cat([logits, sinks.expand(e - s, n_heads, 1)], dim=-1), dim=-1)
        outs.append(torch.matmul(probs[..., :-1], keys))  # [b, H, hd]
    return torch.cat(outs)[:t]


def inverse_rope(out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Remove the query's rotation from an attention output [R, H, hd]; cast to ``dtype``."""
    return apply_rope(out, cos, sin, inverse=True).to(dtype)


def output_projection(out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, w_attn, o_groups: int,
                      num: Numerics, dtype: torch.dtype, inv_rope=inverse_rope) -> torch.Tensor:
    """Inverse RoPE on each head's rope slice, then wo_a per head group and wo_b.

    out [R, H, hd] -> [R, D]; wo_a [G*o_lora, H/G*hd] is G independent blocks."""
    rows, n_heads, hd = out.shape
    out = inv_rope(out, cos, sin, dtype)
    grouped = out.reshape(rows, o_groups, (n_heads // o_groups) * hd)
    wo_a = w_attn.wo_a.weight
    parts = num.grouped_linear(grouped, wo_a.reshape(o_groups, wo_a.shape[0] // o_groups, wo_a.shape[1]))
    return num.linear(parts, w_attn.wo_b.weight)
