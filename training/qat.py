"""Quantisation-aware training in the release's storage formats.

The released checkpoint stores attention projections in FP8 32x32 blocks, routed
experts in MXFP4, Engram tables in FP8 rows and the rest in bf16 (or float32 for mHC,
sinks and gate biases; ``runtime.checkpoint.naming``). A model trained in float32 and
rounded only at export would be served with other weights than it was trained with;
on a model this small that difference is a quality change of its own. So the forward
during training reads every weight through the same round trip the checkpoint writer
and loader apply (``encode`` then ``decode``), with a straight-through gradient; the
exported checkpoint then holds exactly the trained values (tests/training check the
round trip is idempotent and equal to ``decode(encode(...))``).
"""

from __future__ import annotations

import torch

from runtime.checkpoint import formats
from runtime.checkpoint.naming import release_format


def release_roundtrip(name: str, weight: torch.Tensor) -> torch.Tensor:
    """The value ``weight`` has after the checkpoint writer and loader (float32)."""
    w = weight.detach().to(torch.float32)
    fmt = release_format(name, w.ndim)
    if fmt.kind == "fp8":
        q, scale = formats.quantize_fp8_block(w, fmt.block)
        return formats.dequantize_fp8_block(q, scale, fmt.block)
    if fmt.kind == "mxfp4":
        q, scale = formats.quantize_mxfp4(w, fmt.block[1])
        return formats.dequantize_mxfp4(q, scale, fmt.block[1])
    if fmt.kind == "bfloat16":
        return w.to(torch.bfloat16).to(torch.float32)
    return w


def straight_through(weight: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``value`` in the forward, the identity's gradient to ``weight`` in the backward."""
    return weight + (value.to(weight.dtype) - weight).detach()


def quantised_view(named: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every parameter replaced by its straight-through release round trip."""
    return {name: straight_through(w, release_roundtrip(name, w)) for name, w in named.items()}


@torch.no_grad()
def snap_to_release(weights: torch.nn.Module) -> None:
    """Overwrite each parameter with its release round trip (before export)."""
    for name, param in weights.named_parameters():
        param.copy_(release_roundtrip(name, param).to(param.dtype))
