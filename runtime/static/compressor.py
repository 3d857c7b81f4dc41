"""The KV-source update of one decode step, in place in the slab (runtime/compressor.py's
math, one row per slot).

Ratio 1: every position completes its group; the entry is written at index p.
Ratio 2: the row's (kv, gate) goes into the partial buffer at row p % 2 every step, the
pooled entry is computed every step from the buffer's two rows, and it is written at
entry p // 2 only where (p + 1) % 2 == 0. The write is a masked one (the old row is
written back elsewhere), never a branch on data, so the step's kernels do not depend on
which slots complete a group. At an even p the buffer's row 1 still holds the previous
group's second row: the pooled value is then meaningless, and discarded by the mask.
"""

from __future__ import annotations

import torch

from runtime.compressor import entries_at
from runtime.config import V41Config
from runtime.numerics import Numerics, rms_norm


def write_rows(cache: torch.Tensor, index: torch.Tensor, rows: torch.Tensor,
               where: torch.Tensor | None = None) -> None:
    """cache [B, N, C]: cache[b, index[b]] = rows[b] (only where ``where[b]``, if given)."""
    b, _, width = cache.shape
    at = index.view(b, 1, 1).expand(b, 1, width)
    new = rows.reshape(b, 1, width).to(cache.dtype)
    if where is not None:
        new = torch.where(where.view(b, 1, 1), new, cache.gather(1, at))
    cache.scatter_(1, at, new)


def update_kv_source(slab, src: int, x: torch.Tensor, pos: torch.Tensor, lw, config: V41Config,
                     num: Numerics, ops, comp_cos: torch.Tensor, comp_sin: torch.Tensor,
                     comp_weights: tuple[torch.Tensor, torch.Tensor] | None) -> None:
    """x [B, D]: the attention-norm rows of slots 0..B-1 at positions ``pos`` [B];
    ``comp_cos``/``comp_sin``: the compressed RoPE table (all positions of the slab);
    ``comp_weights``: (wkv, wgate) in float32 for ratio 2 (cast once, not every step)."""
    c = config
    ratio = c.compress_ratios[src]
    comp = lw.attn.compressor
    b = x.shape[0]
    eps = c.rms_norm_eps
    if ratio == 1:
        latent = rms_norm(num.linear(x, comp.wkv.weight), comp.norm.weight, eps)
        group_pos, complete = pos, None
    else:
        wkv, wgate = comp_weights
        kv = num.linear(x.float(), wkv)  # [B, hd] float32, as compress_rows computes it
        gate = num.linear(x.float(), wgate)
        buf_kv, buf_gate = slab.comp_kv[src][:b], slab.comp_gate[src][:b]
        write_rows(buf_kv, pos % ratio, kv)
        write_rows(buf_gate, pos % ratio, gate)
        latent = ops.compress(buf_kv.reshape(b * ratio, -1), buf_gate.reshape(b * ratio, -1), ratio,
                              comp.norm.weight, eps, x.dtype)
        group_pos, complete = pos - pos % ratio, (pos + 1) % ratio == 0
    entries, keys = entries_at(latent, comp_cos[group_pos], comp_sin[group_pos], lw.attn, c, num,
                               rope_quant=ops.rope_quant)
    write_rows(slab.global_kv[src][:b], pos // ratio, entries, complete)
    write_rows(slab.index_keys[src][:b], pos // ratio, keys, complete)
