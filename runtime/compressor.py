"""The KV-source compressor: pooled latents -> global KV entries and indexer keys.

Ratio 2: kv = x W_kv^T and g = x W_gate^T in float32; each non-overlapping pair of
tokens (2g, 2g+1) becomes latent_g = sum_j kv_j * softmax_j(g)_j (a per-channel softmax
over the group), then RMSNorm. Ratio 1: latent = RMSNorm(x W_kv^T), no gate.

From each latent at group position P = ratio * g:
  global KV entry = NVFP4(RoPE_compress(latent, P))                 [head_dim]
  indexer key     = MXFP4(RoPE_compress(k_norm(latent W_k^T), P))   [index_head_dim]

A group that is not complete yet is buffered (kv and gate rows) in the sequence state
and completed by the next chunk or decode step.
"""

from __future__ import annotations

import torch

from runtime.config import V41Config
from runtime.numerics import Numerics, rms_norm
from runtime.quant import fake_quant_fp8_ue8m0, fake_quant_mxfp4, fake_quant_nvfp4
from runtime.rope import RopePair, apply_rope


def pool_groups(kv: torch.Tensor, gate: torch.Tensor, ratio: int) -> torch.Tensor:
    """kv, gate [G*ratio, C] float32 -> [G, C]: softmax over each group's tokens, per channel."""
    kv = kv.reshape(-1, ratio, kv.shape[-1])
    gate = gate.reshape(-1, ratio, gate.shape[-1])
    top = gate.amax(dim=1, keepdim=True)
    e = torch.exp(gate - top)
    total = e[:, 0]
    for j in range(1, ratio):
        total = total + e[:, j]
    acc = kv[:, 0] * (e[:, 0] / total)
    for j in range(1, ratio):
        acc = acc + kv[:, j] * (e[:, j] / total)
    return acc


def pool_and_norm(kv: torch.Tensor, gate: torch.Tensor, ratio: int, norm_weight: torch.Tensor, eps: float,
                  dtype: torch.dtype) -> torch.Tensor:
    """kv, gate [G*ratio, C] float32 -> normalised latents [G, C] in ``dtype``."""
    return rms_norm(pool_groups(kv, gate, ratio).to(dtype), norm_weight, eps)


def rope_then_quant(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, fmt: str) -> torch.Tensor:
    """RoPE on the rope tail (x [R, C] or [R, H, C], cos/sin [R, rope/2]), then the cache's
    fake-quant: "fp8" (window KV, e4m3 + ue8m0 scale per 32), "nvfp4" (global KV entries,
    e2m1 + e4m3 scale per 16) or "mxfp4" (indexer keys/queries, e2m1 + ue8m0 per 32)."""
    if fmt == "fp8":
        return fake_quant_fp8_ue8m0(apply_rope(x, cos, sin), block=32)
    if fmt == "nvfp4":
        return fake_quant_nvfp4(apply_rope(x, cos, sin), block=16)
    if fmt == "mxfp4":
        return fake_quant_mxfp4(apply_rope(x, cos, sin), block=32)
    raise ValueError(f"rope_then_quant: fmt must be 'fp8', 'nvfp4' or 'mxfp4', got {fmt!r}")


def compress_rows(
    x: torch.Tensor,
    first_position: int,
    buffer: tuple[torch.Tensor, torch.Tensor] | None,
    w,
    ratio: int,
    config: V41Config,
    num: Numerics,
    pool=pool_and_norm,
) -> tuple[torch.Tensor | None, int, tuple[torch.Tensor, torch.Tensor] | None]:
    """Latents (pre-RoPE) of the groups completed by rows ``x`` [T, D] at positions
    ``first_position``... Returns (latents [G, hd] or None, position of the first
    completed group, new partial-group buffer). ``pool`` is the registry's "compress" op."""
    eps = config.rms_norm_eps
    if ratio == 1:
        latent = rms_norm(num.linear(x, w.wkv.weight), w.norm.weight, eps)
        return latent, first_position, None
    kv = num.linear(x.float(), w.wkv.weight.float())  # [T, hd] float32
    gate = num.linear(x.float(), w.wgate.weight.float())
    start = first_position
    if buffer is not None and buffer[0].shape[0]:
        start -= buffer[0].shape[0]
        kv = torch.cat([buffer[0], kv])
        gate = torch.cat([buffer[1], gate])
    usable = (kv.shape[0] // ratio) * ratio
    rest = (kv[usable:], gate[usable:])
    if usable == 0:
        return None, start, rest
    return pool(kv[:usable], gate[:usable], ratio, w.norm.weight, eps, x.dtype), start, rest


def entries_from_latents(
    latent: torch.Tensor, first_group_position: int, ratio: int, w_attn, config: V41Config,
    rope: RopePair, num: Numerics, rope_quant=rope_then_quant,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(global KV entries [G, hd], indexer keys [G, dI]) for latents [G, hd].
    ``rope_quant`` is the registry's "rope_quant" op."""
    positions = first_group_position + ratio * torch.arange(latent.shape[0])
    cos, sin = rope.compress.lookup(positions, latent.device)
    return entries_at(latent, cos, sin, w_attn, config, num, rope_quant=rope_quant)


def entries_at(latent: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, w_attn, config: V41Config,
               num: Numerics, rope_quant=rope_then_quant) -> tuple[torch.Tensor, torch.Tensor]:
    """``entries_from_latents`` given the compressed RoPE rows of each latent's group
    position (cos/sin [G, rope/2]): no table lookup, so no host sync (the table's
    ``lookup`` reads the largest position on the host); runtime.static calls this."""
    entries = rope_quant(latent, cos, sin, "nvfp4")
    idx = w_attn.indexer
    key = rms_norm(num.linear(latent, idx.wk.weight), idx.k_norm.weight, config.rms_norm_eps)
    key = rope_quant(key, cos, sin, "mxfp4")
    return entries, key
