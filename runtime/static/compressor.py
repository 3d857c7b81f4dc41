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

from dataclasses import dataclass

import torch

from runtime.compressor import entries_at
from runtime.config import V41Config
from runtime.kv_packing import PackedKV
from runtime.numerics import Numerics, rms_norm


def write_rows(cache: torch.Tensor | PackedKV, at: torch.Tensor, rows: torch.Tensor | PackedKV,
               where: torch.Tensor | None = None) -> None:
    """cache [B, N, C]: cache[b, at[b]] = rows[b] (only where ``where[b]``, if given);
    ``at`` and ``where`` are [B, 1, 1] (built once per step, shared by the layers).
    A packed cache takes packed rows: its codes and scales are written alike."""
    if isinstance(cache, PackedKV):
        for part, new in zip(cache[:2], rows[:2], strict=True):
            write_rows(part, at, new, where)
        return
    b, _, width = cache.shape
    at = at.expand(b, 1, width)
    new = rows.reshape(b, 1, width).to(cache.dtype)
    if where is not None:
        new = torch.where(where, new, cache.gather(1, at))
    cache.scatter_(1, at, new)


def slot_rows(cache: torch.Tensor | PackedKV, b: int) -> torch.Tensor | PackedKV:
    """Slots 0..b-1 of a slab cache (a view, dequantized or packed)."""
    return cache.head(b) if isinstance(cache, PackedKV) else cache[:b]


@dataclass(frozen=True)
class GroupIndex:
    """Where one step's rows go for compress ratio ``ratio``, per slot (device tensors):
    ``row`` p % ratio and ``entry`` p // ratio as [B, 1, 1] write indices, ``complete``
    (p + 1) % ratio == 0 as [B, 1, 1] (ratio 1: every group completes, ``row`` and
    ``complete`` are None), and ``cos``/``sin`` the compressed RoPE rows [B, r/2] of the
    group's first position p - p % ratio. Built once per step and ratio, shared by every
    KV source of that ratio (the step used to look the RoPE rows up once per source)."""

    ratio: int
    row: torch.Tensor | None
    entry: torch.Tensor
    complete: torch.Tensor | None
    cos: torch.Tensor
    sin: torch.Tensor

    @classmethod
    def at(cls, pos: torch.Tensor, ratio: int, comp_cos: torch.Tensor, comp_sin: torch.Tensor,
           rows_at_pos: tuple[torch.Tensor, torch.Tensor] | None = None) -> GroupIndex:
        """``comp_cos``/``comp_sin``: the compressed RoPE table (all positions of the slab);
        ``rows_at_pos``: its rows at ``pos``, if the step has them already (ratio 1 then
        looks nothing up: its groups start at p)."""
        b = pos.shape[0]
        if ratio == 1:
            cos, sin = rows_at_pos if rows_at_pos is not None else (comp_cos[pos], comp_sin[pos])
            return cls(1, None, pos.view(b, 1, 1), None, cos, sin)
        row = pos % ratio
        start = pos - row
        return cls(ratio, row.view(b, 1, 1), (pos // ratio).view(b, 1, 1), ((row + 1) == ratio).view(b, 1, 1),
                   comp_cos[start], comp_sin[start])


def update_kv_source(slab, src: int, x: torch.Tensor, groups: GroupIndex, lw, config: V41Config,
                     num: Numerics, ops, comp_weights: tuple[torch.Tensor, torch.Tensor] | None,
                     rope_quant=None) -> None:
    """x [B, D]: the attention-norm rows of slots 0..B-1; ``groups``: their positions'
    group indices and RoPE rows at this source's ratio; ``comp_weights``: (wkv, wgate)
    in float32 for ratio 2 (cast once, not every step); ``rope_quant``: the step's (a
    packing one for a packed slab, runtime/static/packing.py; None: ``ops.rope_quant``)."""
    c = config
    ratio = groups.ratio
    comp = lw.attn.compressor
    b = x.shape[0]
    eps = c.rms_norm_eps
    if ratio == 1:
        latent = rms_norm(num.linear(x, comp.wkv.weight), comp.norm.weight, eps)
        complete = None
    else:
        wkv, wgate = comp_weights
        xf = x.float()  # cast once for both projections
        kv = num.linear(xf, wkv)  # [B, hd] float32, as compress_rows computes it
        gate = num.linear(xf, wgate)
        buf_kv, buf_gate = slab.comp_kv[src][:b], slab.comp_gate[src][:b]
        write_rows(buf_kv, groups.row, kv)
        write_rows(buf_gate, groups.row, gate)
        latent = ops.compress(buf_kv.reshape(b * ratio, -1), buf_gate.reshape(b * ratio, -1), ratio,
                              comp.norm.weight, eps, x.dtype)
        complete = groups.complete
    entries, keys = entries_at(latent, groups.cos, groups.sin, lw.attn, c, num,
                               rope_quant=rope_quant or ops.rope_quant)
    write_rows(slot_rows(slab.global_kv[src], b), groups.entry, entries, complete)
    write_rows(slab.index_keys[src][:b], groups.entry, keys, complete)
