"""The static decode step's fused attention: the registry's Triton attention reading the
slab's own layout (runtime/kernels/attention.py, ``FusedSparseAttention.ring``).

Why: the batched torch core (runtime/static/attention.py) first gathers every slot's
W + K key rows into a float32 buffer [B, W + K, hd], then runs two products over it:
at batch 64 on ``mid`` that is 64 x 640 x 512 x 4 B = 84 MB written and read again per
layer, for keys that are 42 MB in bf16. Profiled at batch 64, those gathers, copies and
float32 batched products led the step (9.1 of 16.3 ms; benchmarks/results/decode_h200.md).
The kernel reads each key row from the ring or the global KV once, in the model dtype,
and writes only the output.

Same keys and order as the batched core (window positions p-W+1 .. p from ring row
q % W, valid iff q >= the slot's floor and q >= 0; then the top-k entries, valid iff
id >= 0; the sink in the denominator), another float order (an online softmax over key
tiles, split over the key list), so it runs for fast numerics only: batch-invariant
numerics keep the batched core, whose numbers are the engine's bit for bit.

``RingKeys`` is the layout the step builds once per step (and per index source), as it
builds ``KeyLayout`` for the batched core: here only the positions, floors and top-k
ids, since the kernel works out rows and validity itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.numerics import Numerics


@dataclass(frozen=True)
class RingKeys:
    """What B slots read: positions [B], window floors [B], top-k ids [B, K] (None: the
    window only, a ratio-0 layer)."""

    positions: torch.Tensor
    floor: torch.Tensor
    topk: torch.Tensor | None = None

    @classmethod
    def for_window(cls, pos: torch.Tensor, floor: torch.Tensor, window: int, head_dim: int) -> RingKeys:
        """``KeyLayout.for_window``'s signature; the ring's width says the window."""
        return cls(pos, floor)

    def with_topk(self, topk: torch.Tensor) -> RingKeys:
        return RingKeys(self.positions, self.floor, topk)


@dataclass(frozen=True)
class RingAttention:
    """``decode_attention``'s signature over ``RingKeys``, run by ``kernel`` (the registry's
    fused attention, a ``FusedSparseAttention``)."""

    kernel: object

    def __call__(self, q: torch.Tensor, ring: torch.Tensor, entries: torch.Tensor | None, layout: RingKeys,
                 sink: torch.Tensor, num: Numerics) -> torch.Tensor:
        topk = layout.topk if entries is not None else None
        return self.kernel.ring(q, layout.positions, layout.floor, ring, entries, topk, sink)
