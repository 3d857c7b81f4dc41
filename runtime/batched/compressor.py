"""The KV-source compressor on a [B, T] batch: global KV entries and indexer keys.

Same math as ``runtime.compressor`` (whose pooling it calls): ratio 2 pools each pair of
tokens (2g, 2g+1) with the per-channel gated softmax, ratio 1 keeps one latent per token.
A cold prefill of T tokens has exactly T // ratio completed groups, so each row's
entries are the first T // ratio groups of its tokens; a trailing incomplete group is
dropped (the runtime buffers it; no query can see it). Entries built from right-padding
tokens lie beyond every real query's visible count, so they are never read.

The indexer keys are computed from a detached latent: they only feed the (hard) top-k
selection and the indexer loss, so the indexer's training signal stays out of the main
model (DeepSeek-V3.2's DSA recipe).
"""

from __future__ import annotations

import torch

from runtime.batched.common import RopeRows, float32_region
from runtime.batched.rounding import round_to
from runtime.compressor import pool_and_norm
from runtime.config import V41Config
from runtime.numerics import Numerics, rms_norm
from runtime.rope import apply_rope


def compress(x: torch.Tensor, ratio: int, w_attn, config: V41Config, rope: RopeRows, num: Numerics,
             straight_through: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """x [B, T, D] (attn_norm output of the KV source) -> (entries [B, N, hd] NVFP4,
    index keys [B, N, dI] MXFP4), N = T // ratio; entry g sits at position ratio * g."""
    b, t, _ = x.shape
    comp = w_attn.compressor
    eps = config.rms_norm_eps
    n = t // ratio
    if ratio == 1:
        latent = rms_norm(num.linear(x, comp.wkv.weight), comp.norm.weight, eps)  # [B, T, hd]
    else:
        with float32_region(x):
            usable = x[:, : n * ratio].float().reshape(b * n * ratio, x.shape[-1])
            kv = num.linear(usable, comp.wkv.weight.float())  # [B*N*ratio, hd] float32
            gate = num.linear(usable, comp.wgate.weight.float())
            latent = pool_and_norm(kv, gate, ratio, comp.norm.weight, eps, x.dtype).reshape(b, n, kv.shape[-1])
    cos, sin = rope.rows(n, x.device, step=ratio)  # [N, rope/2]
    entries = round_to(apply_rope(latent, cos[None], sin[None]), "nvfp4", straight_through)
    idx = w_attn.indexer
    key = rms_norm(num.linear(latent.detach(), idx.wk.weight), idx.k_norm.weight, eps)  # [B, N, dI]
    keys = round_to(apply_rope(key, cos[None], sin[None]), "mxfp4", straight_through)
    return entries, keys
