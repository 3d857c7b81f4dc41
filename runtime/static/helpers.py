"""The static decode step's small-op helpers, plain or compiled with ``torch.compile``.

Why: inside a CUDA graph a ``mid`` decode step still runs ~3,000 kernels, most of them
small elementwise ops (RMSNorm's float/pow/mean/rsqrt/mul/cast, RoPE's halves, the attention
core's masks and softmax, the grouped MoE's gather/SwiGLU/scatter), each costing a few
microseconds however little it does. Inductor fuses each helper's chain into a few kernels:
measured on the H200 at batch 64, 3,147 -> 1,505 kernels per step and 18.8 -> 11.7 ms per
replayed step (benchmarks/results/decode_h200.md). The rest of the step (the fused Triton
ops, the projections) stays as it is, so compiling takes seconds, not the minutes a whole
step takes (227 s measured).

Same math, different float order: inductor keeps a fused chain's intermediates in float32
where eager rounds them to the model dtype, so logits move by bf16 noise (not bit for bit).
Graphs replay whatever the step ran, so graphs equal the eager static step bit for bit when
both compile or both do not.

The attention core is either the batched torch core (``decode_attention`` over a
``KeyLayout``) or, given the registry's fused attention, the Triton kernel over the slab's
ring (``RingAttention`` over ``RingKeys``, runtime/static/ring_attention.py), which is never
compiled: it is one kernel already. ``keys`` is the layout class the step builds for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runtime.grouped_moe import grouped_moe
from runtime.numerics import rms_norm
from runtime.rope import apply_rope
from runtime.static.attention import KeyLayout, decode_attention
from runtime.static.ring_attention import RingAttention, RingKeys


@dataclass(frozen=True)
class StepHelpers:
    rms_norm: Callable
    apply_rope: Callable
    attention: Callable
    grouped_moe: Callable
    keys: type = KeyLayout

    @classmethod
    def build(cls, compiled: bool, device, fused_attention: Callable | None = None) -> StepHelpers:
        """``fused_attention``: the registry's fused attention, to run the core as
        ``RingAttention`` (None: the batched torch core).
        The grouped MoE compiles on CUDA only: the CPU meta function of
        ``torch._grouped_mm`` accepts bf16 operands only, which the CPU float32 models are not."""
        if fused_attention is not None:
            attention, keys = RingAttention(fused_attention), RingKeys
        else:
            attention, keys = decode_attention, KeyLayout
        if not compiled:
            return cls(rms_norm, apply_rope, attention, grouped_moe, keys)
        import torch

        moe = torch.compile(grouped_moe) if torch.device(device).type == "cuda" else grouped_moe
        if fused_attention is None:
            attention = torch.compile(decode_attention)
        return cls(torch.compile(rms_norm), torch.compile(apply_rope), attention, moe, keys)
