"""CSA2 sparse attention of one decode step over B slots (runtime/attention.py's math).

For slot b at position p the keys are, in the engine's order, the window positions
p-W+1 .. p (read from the slab's ring, slot q % W, valid iff q >= the window floor and
q >= 0) and then the global entries of its top-k ids (valid iff id >= 0), then the
per-head sink in the denominator only. The ring is read in position order (one gather
of W rows) so each query's key row, and thus every sum, has the engine's order.
Invalid keys keep whatever finite value their slot holds: their logit is -inf, their
probability exactly 0, so they add nothing (the slab never holds NaN).

Which keys a slot reads depends on its position, floor and top-k only, not on the
layer: ``KeyLayout`` is built once per step (and once per index source) and shared by
every layer that reads it, so a layer launches only its gathers and products.

Batch-invariant numerics run the products on blocks of the engine's fixed query block
(padded with zero queries over zero keys), so each slot's numbers are the ones the
engine computes for that request alone. With fused attention and fast numerics the step
runs the Triton kernel over the ring instead (runtime/static/ring_attention.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.attention import INVARIANT_QUERY_BLOCK
from runtime.numerics import Numerics

NEG_INF = float("-inf")


@dataclass(frozen=True)
class KeyLayout:
    """What B slots read: ``window`` [B, W, hd] gather index into the ring (positions
    p-W+1 .. p in order), ``entries`` [B, K, hd] gather index into the global KV (None:
    a ratio-0 layer), ``bias`` [B, W (+K)] float32, 0 for a valid key and -inf else."""

    window: torch.Tensor
    entries: torch.Tensor | None
    bias: torch.Tensor

    @classmethod
    def for_window(cls, pos: torch.Tensor, floor: torch.Tensor, window: int, head_dim: int) -> KeyLayout:
        b = pos.shape[0]
        positions = pos[:, None] + (torch.arange(window, device=pos.device) - (window - 1))[None, :]
        ok = (positions >= floor[:, None]) & (positions >= 0)
        index = torch.remainder(positions, window).unsqueeze(-1).expand(b, window, head_dim)
        return cls(index, None, _bias(ok))

    def with_topk(self, topk: torch.Tensor) -> KeyLayout:
        """This window plus the top-k entries [B, K] (-1 = empty slot)."""
        b, k = topk.shape
        index = topk.clamp_min(0).unsqueeze(-1).expand(b, k, self.window.shape[-1])
        return KeyLayout(self.window, index, torch.cat([self.bias[:, : self.window.shape[1]], _bias(topk >= 0)],
                                                       dim=1))


def _bias(ok: torch.Tensor) -> torch.Tensor:
    """0 where ``ok``, -inf else, float32: one select (the same values as zeros, negation
    and masked_fill, three ops)."""
    return torch.where(ok, 0.0, NEG_INF).float()  # .float(): a no-op unless the default dtype is not float32


def decode_attention(q: torch.Tensor, ring: torch.Tensor, entries: torch.Tensor | None, layout: KeyLayout,
                     sink: torch.Tensor, num: Numerics) -> torch.Tensor:
    """q [B, H, hd] (RoPE'd), ring [B, W, hd], entries [B, N, hd] (None for ratio 0) ->
    attention output [B, H, hd] float32 (still carrying the query's RoPE)."""
    b, n_heads, hd = q.shape
    window = layout.window.shape[1]
    block = INVARIANT_QUERY_BLOCK if num.row_tile > 1 else b  # invariant: the engine's query block
    rows = -(-b // block) * block
    # The float32 key rows are filled in place from the gathers (no concatenation and no
    # separate float copy of the model-dtype keys); padding rows are zero, as the
    # engine's padded queries read its zero row.
    keys = torch.empty(rows, layout.bias.shape[1], hd, dtype=torch.float32, device=q.device)
    keys[:b, :window] = ring.gather(1, layout.window)
    if entries is not None:
        keys[:b, window:] = entries.gather(1, layout.entries)
    bias, qf = layout.bias, q.float()
    if rows > b:
        keys[b:].zero_()
        bias = torch.cat([bias, bias.new_full((rows - b, bias.shape[1]), NEG_INF)])
        qf = torch.cat([qf, qf.new_zeros(rows - b, n_heads, hd)])
    sinks = sink.float().view(1, n_heads, 1)
    outs = []
    for s in range(0, qf.shape[0], block):
        e = s + block
        logits = torch.matmul(qf[s:e], keys[s:e].transpose(1, 2)) * hd**-0.5 + bias[s:e, None, :]
        probs = torch.softmax(torch.cat([logits, sinks.expand(e - s, n_heads, 1)], dim=-1), dim=-1)
        outs.append(torch.matmul(probs[..., :-1], keys[s:e]))
    return (outs[0] if len(outs) == 1 else torch.cat(outs))[:b]
