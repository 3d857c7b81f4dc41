"""The reference twin of every registry op: plain PyTorch, the model's math
(docs/model.md §5), built from the runtime's own functions (so "reference" kernels ARE
the reference runtime). The op table (name, reference, fused) is ``runtime.kernels.ops``.

Each function here fixes the op's signature; its fused twin takes the same arguments.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from runtime.config import V41Config
from runtime.indexer import index_scores, mask_invisible, top_k_entries
from runtime.kernels.ops import KERNEL_OPS
from runtime.mhc import HcMix, collapse, expand, hc_mix
from runtime.numerics import Numerics, rms_norm
from runtime.rope import apply_rope


def mhc_site(
    streams: torch.Tensor,
    out: torch.Tensor | None,
    prev: HcMix | None,
    pre_shift: torch.Tensor,
    fn: torch.Tensor,
    base: torch.Tensor,
    scale: torch.Tensor,
    norm_weight: torch.Tensor,
    config: V41Config,
    num: Numerics,
) -> tuple[torch.Tensor, HcMix, torch.Tensor]:
    """One mHC site, "Mega-mHC" scope: [post of the previous sublayer] + this site's
    coefficients (RMS over 4D, GEMM with fn, sigmoid / 2*sigmoid / Sinkhorn) + collapse
    with the shifted (previous) pre + weighted RMSNorm.

    streams [T, hc, D]; out [T, D] or None (no previous sublayer to fold in);
    pre_shift [T, hc] -> (streams [T, hc, D], HcMix of this site, x [T, D])."""
    if out is not None:
        streams = expand(out, streams, prev)
    mix = hc_mix(streams, fn, base, scale, norm_eps=config.rms_norm_eps, hc_eps=config.hc_eps,
                 sinkhorn_iters=config.hc_sinkhorn_iters, num=num)
    x = rms_norm(collapse(streams, pre_shift), norm_weight, config.rms_norm_eps)
    return streams, mix, x


def index_logits(q: torch.Tensor, head_w: torch.Tensor, keys: torch.Tensor, counts: torch.Tensor,
                 num: Numerics) -> torch.Tensor:
    """Sparse MQA logits with the visibility mask: q [T, nI, dI], head_w [T, nI],
    keys [N, dI], counts [T] -> scores [T, N] float32, -inf where j >= counts[t]."""
    return mask_invisible(index_scores(q, head_w, keys, num), counts)


def topk_entries(scores: torch.Tensor, k: int) -> torch.Tensor:
    """[T, N] -> [T, k] ascending entry ids, -1 = empty; ties to the lowest index."""
    return top_k_entries(scores, k)


def inverse_rope(out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Attention output [R, H, hd] float32 -> inverse RoPE on the rope tail, cast to ``dtype``
    (the input of the grouped ``wo_a``)."""
    return apply_rope(out, cos, sin, inverse=True).to(dtype)


def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x [..., K] @ weight [N, K]^T in the weight's dtype (``Numerics.linear``'s fast path).
    A grouped weight [G, N, K] takes x [R, G, K] -> [R, G, N]: G independent projections
    (``wo_a``'s head groups), each as its own GEMM."""
    if weight.dim() == 2:
        return F.linear(x.to(weight.dtype), weight)
    return torch.stack([F.linear(x[:, g].to(weight.dtype), weight[g]) for g in range(weight.shape[0])], dim=1)


# op -> its reference function, from the one op table (runtime.kernels.ops); every
# function named there is defined or imported above, so resolving it here is cheap.
REFERENCE_OPS = {op.name: op.reference_fn() for op in KERNEL_OPS}
